//! Actions: what tableq does with one item. Each kind lives in its own module and
//! reports an [`Outcome`](crate::item::Outcome); a failure is a value, not an error.
//! An `Err` from an action means the transaction itself is gone.

pub mod sql;
