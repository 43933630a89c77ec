//! `tableq new laravel|symfony`: a commented queue file that works a framework's own
//! queue table in place, through its bridge (bridges/ in the repository).
//!
//! - `laravel`, `symfony`: each framework's file, a template (`*.toml.in`) filled
//!   with the names given;
//! - `fill`: those names made safe for SQL and TOML, and put into a template.

mod fill;
mod laravel;
mod symfony;

use super::cli::{Framework, NewArgs};
use super::Failure;

/// The queue file `args` asks for, or why a name given cannot go into it.
pub fn queue_file(args: &NewArgs) -> Result<String, Failure> {
    match &args.framework {
        Framework::Laravel(laravel) => laravel::queue_file(laravel),
        Framework::Symfony(symfony) => symfony::queue_file(symfony),
    }
}
