//! Operating a running tableq: its signals, reload, systemd's notify protocol, start-up,
//! several queues in one process, the commands `count`, `pause`, `failed`, `schedules`, and every
//! command's standard output closed by its reader.

mod closed_stdout;
mod count;
mod count_print_sql;
mod failed_rows;
mod notify;
mod pause;
mod queues;
mod reload;
mod schedules;
mod signals;
mod startup;
