//! One value of a queue file's key, as written and checked, whichever key holds it:
//! a duration ([`duration`]), SQL ([`statements`]), a `{column}` template
//! ([`template`]), `${ENV}` and `${file:…}` ([`interpolate`]), the files secrets
//! are read from ([`secret_file`]), a cron expression in a time zone ([`cron`]),
//! and whether an address is public ([`address`]).

pub mod address;
pub mod cron;
pub(crate) mod duration;
pub(crate) mod interpolate;
pub mod secret_file;
pub(crate) mod statements;
pub mod template;
