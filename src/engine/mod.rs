//! The engine: runs each queue's workers. Its folders show one turn of a worker
//! and what surrounds it:
//!
//! - [`worker`]: the one worker loop, over a [`worker::Mode`].
//! - [`turn`]: one turn — the claim's rows admitted, each item's action run, its
//!   outcome recorded and its end settled.
//! - [`modes`]: how a worker holds what it claimed: transaction mode (row locks
//!   for the turn) or lease mode (a lease, no connection held).
//! - [`policy`]: the rules the workers of a queue keep together: limits,
//!   `[concurrency]`, the circuit, the write gate, the pause, retry and backoff.
//! - [`queue`]: a queue's life: launched, supervised, reloaded, stopped.
//! - [`wake`]: when an idle queue looks again.

pub mod history;
pub mod modes;
pub mod policy;
pub mod queue;
pub mod turn;
pub mod wake;
pub mod worker;
