//! The two modes a worker claims in, each a [`crate::engine::worker::Mode`]:
//!
//! - [`transaction`]: one transaction per turn, the claimed rows locked until it
//!   commits.
//! - [`lease`]: a short claim that leases rows, the action run with no connection
//!   held, each outcome recorded under its lease.

pub mod lease;
pub mod transaction;
