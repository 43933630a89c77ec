//! One value of a queue file's key, as written and checked, whichever key holds it:
//! a duration ([`duration`]), SQL ([`statements`]), a `{column}` template
//! ([`template`]), `${ENV}` and `${file:…}` ([`interpolate`]), and the files secrets
//! are read from ([`secret_file`]), and whether an address is public ([`address`]).

pub mod address;
pub(crate) mod duration;
pub(crate) mod interpolate;
pub mod secret_file;
pub(crate) mod statements;
pub mod template;
