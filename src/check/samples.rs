//! The outcome parameters the proof binds: as big as real ones, so outcome SQL that
//! would fail on a real `:error` or `:output` (a column too short for it, in strict
//! mode) fails in check too.

use crate::action::capture::OUTPUT_LIMIT;
use crate::action::Outcome;
use crate::config::ActionConfig;

/// A real failure's `:error` can run to a few hundred characters; this one, ≈ 300.
pub const SAMPLE_ERROR: &str = "HTTP 503 Service Unavailable from \
    https://hooks.example.com/v1/deliveries/8f14e45f-ceea-467f-a0e6-7fc3b2b1c0de: \
    upstream connect error or disconnect/reset before headers. reset reason: connection \
    timeout (a sample error from tableq check, as long as real ones get; keep less with \
    LEFT(:error, n))";

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
        error: Some(SAMPLE_ERROR.to_string()),
        status,
        output,
        retry_after: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_as_big_as_real_parameters() {
        assert!((290..=310).contains(&SAMPLE_ERROR.chars().count()));
        assert_eq!(sample_output().len(), OUTPUT_LIMIT);
        assert!(std::str::from_utf8(&sample_output()).is_ok());
    }
}
