//! Operating a running tableq: its signals, reload, systemd's notify protocol, start-up,
//! several queues in one process, and the commands `count`, `pause`, `failed`.

mod count;
mod count_print_sql;
mod failed_rows;
mod notify;
mod pause;
mod queues;
mod reload;
mod signals;
mod startup;
