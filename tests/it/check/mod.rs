//! `tableq check`: what it finds offline and on the server, its proofs (leave the
//! query, the SKIP LOCKED self-test, lease mode's) and how it prints them.

mod batch_scope;
mod format;
mod grants;
mod index;
mod lease;
mod lease_time_zone;
mod limits;
mod offline;
mod proof;
mod reads;
mod self_test;
mod server;
