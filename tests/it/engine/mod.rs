//! Claiming, running and settling rows: each mode (transaction, lease) and scope
//! (item, batch), the limits and the connection budget, waking on the binary log,
//! a queue that loops, rows that re-arm themselves ([recurring]), and what a failing
//! action or outcome statement leaves.

mod batch_scope;
mod batch_scope_outside;
mod binary_keys;
mod budget;
mod concurrency;
mod due;
mod email_queue;
mod exactly_once;
mod failures;
mod framework_tables;
mod global_limits;
mod idle;
mod isolation;
mod lease;
mod lease_connections;
mod limits;
mod loops;
mod modes;
mod outcome_sql;
mod packet;
mod paused_retry;
mod recurring;
mod schedules;
mod stop_when_empty;
mod wake;
mod wake_reads;
mod workflows;
