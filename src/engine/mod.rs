//! The engine: the supervisor that runs N workers per queue, the one worker loop
//! and its two modes, the one place an action runs, the one recorder of outcomes,
//! and what a queue's workers share.

pub mod admit;
pub mod circuit;
pub mod concurrency;
pub mod copies;
pub mod drain;
pub mod due;
pub mod execute;
pub mod gate;
pub mod idle;
pub mod launch;
pub mod lease;
pub mod lifecycle;
pub mod limits;
pub mod liveness;
pub mod loops;
pub mod pausing;
pub mod queue;
pub mod record;
pub mod reload;
pub mod report;
pub mod restart;
pub mod retry;
pub mod settle;
pub mod sharing;
pub mod stats_refresher;
pub mod stop_when_empty;
pub mod supervisor;
pub mod transaction;
pub mod turn;
pub mod wake;
pub mod worker;
