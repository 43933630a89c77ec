//! The outcome parameters the proof binds: as big as real ones, so outcome SQL that
//! would fail on a real `:error` or `:output` (a column too short for it, in strict
//! mode) fails in check too.

use crate::action::capture::{ERROR_LIMIT, OUTPUT_LIMIT};
use crate::action::Outcome;
use crate::config::ActionConfig;

/// `:error` as big as an action can make it: [`ERROR_LIMIT`] bytes (a command's
/// last stderr lines, a redirect's long Location).
fn sample_error() -> String {
    const LINE: &str = "a sample error from tableq check, as long as real ones may get; \
                        keep less with LEFT(:error, n) | ";
    LINE.chars().cycle().take(ERROR_LIMIT).collect()
}

/// `:output` as big as the action can make it: the first [`OUTPUT_LIMIT`] bytes of
/// a response body or of standard output.
fn sample_output() -> Vec<u8> {
    const LINE: &[u8] = b"sample output from tableq check, as long as an action's may be\n";
    LINE.iter().copied().cycle().take(OUTPUT_LIMIT).collect()
}

/// What a successful action binds: an HTTP 200 or exit status 0, with the longest
/// output; all NULL for an SQL action, as `run` binds them.
pub fn success(action: &ActionConfig) -> Outcome {
    let status = match action {
        ActionConfig::Sql(_) => return Outcome::success(),
        ActionConfig::Http(_) => 200,
        ActionConfig::Command(_) => 0,
    };
    Outcome {
        status: Some(status),
        output: Some(sample_output()),
        ..Outcome::success()
    }
}

/// What a failed action binds: a long `:error`; an HTTP 500 or exit status 1 with
/// the longest output, or NULL `:status` and `:output` for an SQL action.
pub fn failure(action: &ActionConfig) -> Outcome {
    let (status, output) = match action {
        ActionConfig::Sql(_) => (None, None),
        ActionConfig::Http(_) => (Some(500), Some(sample_output())),
        ActionConfig::Command(_) => (Some(1), Some(sample_output())),
    };
    Outcome {
        error: Some(sample_error()),
        status,
        output,
        retry_after: None,
        trace_id: None,
        blame: Default::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_as_big_as_real_parameters() {
        assert_eq!(sample_error().len(), ERROR_LIMIT);
        assert_eq!(sample_output().len(), OUTPUT_LIMIT);
        assert!(std::str::from_utf8(&sample_output()).is_ok());
    }
}
