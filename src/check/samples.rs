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

/// What a successful action binds: its kind's success status (an HTTP 200, exit
/// status 0) and the longest output, or nothing where the kind has none (SQL).
pub fn success(action: &ActionConfig) -> Outcome {
    let samples = action.kind().samples();
    Outcome {
        status: samples.success_status,
        output: samples.output.then(sample_output),
        ..Outcome::success()
    }
}

/// What a failed action binds: a long `:error`, with its kind's failure status (an
/// HTTP 500, exit status 1) and the longest output where it has them.
pub fn failure(action: &ActionConfig) -> Outcome {
    let samples = action.kind().samples();
    Outcome {
        status: samples.failure_status,
        output: samples.output.then(sample_output),
        ..Outcome::failure(sample_error())
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
