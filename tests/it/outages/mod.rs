//! Something tableq depends on fails: the database goes away, goes silent, comes
//! back all at once or is full, or the action's downstream goes away (the circuit).

mod circuit;
mod database_restart;
mod multi_host;
mod reconnect_jitter;
mod server_full;
mod stall;
