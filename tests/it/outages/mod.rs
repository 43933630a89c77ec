//! Something tableq depends on fails: the database goes away, goes silent, comes
//! back all at once, is full or read-only for a while, or the action's downstream goes
//! away: it answers badly (the circuit) or cannot be reached at all (unreachable; the
//! fastcgi and worker kinds prove theirs in `kinds::fastcgi` and `kinds::worker`).

mod circuit;
mod database_restart;
mod multi_host;
mod read_only;
mod reconnect_jitter;
mod server_full;
mod stall;
mod unreachable;
