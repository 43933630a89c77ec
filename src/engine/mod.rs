//! The engine: the supervisor that runs N workers per queue, the worker loop, one
//! batch's transaction, and what they share.

pub mod backoff;
pub mod batch;
pub mod circuit;
pub mod idle;
pub mod launch;
pub mod lease;
pub mod lifecycle;
pub mod limits;
pub mod liveness;
pub mod loops;
pub mod observe;
pub mod once;
pub mod queue;
pub mod refusals;
pub mod reload;
pub mod report;
pub mod restart;
pub mod stats_refresher;
pub mod stop_when_empty;
pub mod supervisor;
pub mod worker;
