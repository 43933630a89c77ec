//! The rules a queue's workers keep together, one module each:
//!
//! - [`limits`]: `rate_limit` and `max_in_flight`, shared by every copy through
//!   [`copies`] (the copies on the database), kept shared across reloads by
//!   [`sharing`].
//! - [`concurrency`]: `[concurrency]`'s key slots.
//! - [`circuit`]: the circuit breaker; [`gate`]: no claims while the database
//!   refuses writes; [`pausing`]: whether `tableq pause` holds the queue.
//! - [`retry`]: the one retry helper, with backoff; [`loops`]: rows that come
//!   straight back; [`recurring`]: `[recurring]`'s rows, read before their action
//!   and given `:next_run` after it.

pub mod circuit;
pub mod concurrency;
pub mod copies;
pub mod gate;
pub mod limits;
pub mod loops;
pub mod pausing;
pub mod recurring;
pub mod retry;
pub mod sharing;
