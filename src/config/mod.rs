//! Queue files: find them, parse them, validate them, and hand out typed
//! [`QueueConfig`]s. `run`, `check` and `count` all load through [`load_paths`], so
//! they agree on what a valid queue is and say the same thing when it is not.
//!
//! Where a rule lives: `load` (a file read, as written, every key's problem at
//! once, and the schema), `value` (one value of a key: a duration, SQL, a
//! template, `${ENV}`, a secret's file), `queue` (the validated queue and its
//! tables), `validate` (a whole file checked, and the rules across its tables),
//! `action` (the `[action]` table, as this layer sees it).

pub mod action;
pub mod load;
pub mod queue;
pub mod validate;
pub mod value;

pub use action::ActionConfig;
#[cfg(test)]
pub(crate) use load::load_file;
pub use load::locate::{line_of, statement_path};
pub(crate) use load::{load_all, load_paths};
pub use load::{LoadError, Loaded, QueueSource};
pub use queue::circuit::CircuitConfig;
pub use queue::mode::Mode;
pub use queue::monitoring::Monitoring;
pub use queue::scope::Scope;
pub use queue::site::Site;
pub use queue::wake::{Wake, WakeSource};
pub use queue::{
    QueueConfig, Rate, DEFAULT_DATABASE_TIMEOUT, DEFAULT_ERROR_BACKOFF, DEFAULT_LOOP_LIMIT,
    DEFAULT_LOOP_WINDOW, DEFAULT_POLL_INTERVAL, MAX_BATCH, MAX_ERROR_BACKOFF, MAX_WORKERS,
};
pub use value::interpolate::{files, interpolate, interpolate_secret, variables, InterpolateError};
pub use value::secret_file::SecretFile;
