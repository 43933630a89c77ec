//! The database seam: the only place outside `check` that talks to the driver.
//! Connecting and KILL ([`connect`]), error classes ([`error`]), the worker session
//! and what the engine does with it ([`session`]), a queue's SQL prepared
//! ([`prepared`]), and the claimed row with its binding and JSON form ([`item`],
//! [`row_json`]).

pub mod account;
pub mod backlog;
pub mod bind;
pub mod binlog;
pub mod budget;
pub mod clock;
pub mod cluster;
pub mod connect;
pub mod deadline;
pub mod due;
pub mod error;
pub mod error_kind;
pub mod failed;
pub mod history;
pub mod item;
pub mod key_claim;
pub mod key_lock;
pub mod named_lock;
pub mod pause;
pub mod pool;
pub mod prepared;
pub mod row_json;
pub mod schedules;
pub mod session;
pub mod unanswered;
pub mod value;
pub mod views;

pub use budget::Budget;
pub use clock::DbClock;
pub use connect::Database;
pub use error::{DbError, Refusal};
pub use error_kind::ErrorKind;
pub use item::{Item, LeaseParams, OutcomeParams};
pub use key_claim::{Claimed, Unreadable};
pub use pool::SessionPool;
pub use prepared::Statements;
pub use session::{OpenError, Ran, Reuse, Session};
pub use unanswered::Unanswered;
