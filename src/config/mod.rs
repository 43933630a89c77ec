//! Queue files: find them, parse them, validate them, and hand out typed
//! [`QueueConfig`]s. `run`, `check` and `count` all load through [`load_paths`], so
//! they agree on what a valid queue is and say the same thing when it is not.

pub mod action;
mod batch_scope;
pub mod circuit;
pub(crate) mod duration;
pub mod failed;
pub mod files;
pub(crate) mod interpolate;
pub mod kind;
pub mod lease;
pub mod lease_queue;
pub mod limits;
mod load;
mod locate;
pub mod mode;
pub mod monitoring;
pub mod names;
mod parse;
mod queue;
mod raw;
pub mod schema;
pub mod scope;
pub mod secret_file;
pub mod site;
pub(crate) mod statements;
pub mod template;
mod validate;
pub(crate) mod validator;
pub mod wake;

pub use action::ActionConfig;
pub use circuit::CircuitConfig;
pub use interpolate::{files, interpolate, interpolate_secret, variables, InterpolateError};
#[cfg(test)]
pub(crate) use load::load_file;
pub(crate) use load::{load_all, load_paths};
pub use load::{LoadError, Loaded, QueueSource};
pub use locate::{line_of, statement_path};
pub use mode::Mode;
pub use monitoring::Monitoring;
pub use queue::{
    QueueConfig, Rate, DEFAULT_DATABASE_TIMEOUT, DEFAULT_ERROR_BACKOFF, DEFAULT_LOOP_LIMIT,
    DEFAULT_LOOP_WINDOW, DEFAULT_POLL_INTERVAL, MAX_BATCH, MAX_ERROR_BACKOFF, MAX_WORKERS,
};
pub use scope::Scope;
pub use secret_file::SecretFile;
pub use site::Site;
pub use wake::{Wake, WakeSource};
