//! The deadlines a kind keeps itself. An item's is the engine's
//! (`engine::turn::execute`: the action's `timeout` cancels the item's run), and a
//! program's grace to end is `action::process`'s ([`grace`](super::process::grace));
//! what remains is a step with a limit of its own, outside any item's — a connect
//! to a handler, a question to PHP-FPM's pool — and `check`'s look downstream
//! ([`probe`]), whose limit is one formula for every kind ([`probe_limit`]).

use std::fmt;
use std::future::Future;
use std::time::Duration;

use super::Probed;

/// The least a look downstream is given: a short `timeout` is for an item, and a
/// first connection may take longer.
const PROBE_LEAST: Duration = Duration::from_secs(5);
/// The most a look downstream is given: `check` does not hang on a server that
/// does not answer.
const PROBE_MOST: Duration = Duration::from_secs(10);

/// A step had no answer within its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Late(pub Duration);

impl fmt::Display for Late {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "no answer within {}", humantime::format_duration(self.0))
    }
}

/// Awaits `step` for at most `limit`.
pub async fn within<T>(limit: Duration, step: impl Future<Output = T>) -> Result<T, Late> {
    tokio::time::timeout(limit, step)
        .await
        .map_err(|_| Late(limit))
}

/// How long `check` gives a kind's look downstream, for an action whose items are
/// given `timeout`: that, but at least [`PROBE_LEAST`] and at most [`PROBE_MOST`].
pub fn probe_limit(timeout: Duration) -> Duration {
    timeout.clamp(PROBE_LEAST, PROBE_MOST)
}

/// What `look` found within [`probe_limit`] of `timeout`; past it, what the kind
/// says of a server that did not answer, `unanswered`, ended with how long it
/// waited ("no answer from … within 10s").
pub async fn probe(
    timeout: Duration,
    look: impl Future<Output = Vec<Probed>>,
    unanswered: Probed,
) -> Vec<Probed> {
    let limit = probe_limit(timeout);
    match within(limit, look).await {
        Ok(found) => found,
        Err(late) => vec![Probed {
            message: format!(
                "{} within {}",
                unanswered.message,
                humantime::format_duration(late.0)
            ),
            ..unanswered
        }],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_look_gets_the_timeout_within_bounds() {
        assert_eq!(probe_limit(Duration::from_secs(1)), PROBE_LEAST);
        assert_eq!(probe_limit(Duration::from_secs(7)), Duration::from_secs(7));
        assert_eq!(probe_limit(Duration::from_secs(30)), PROBE_MOST);
    }

    #[tokio::test(start_paused = true)]
    async fn an_unanswered_look_is_the_kinds_word() {
        let never = std::future::pending::<Vec<Probed>>();
        let found = probe(
            Duration::from_secs(1),
            never,
            Probed::error("url", "no answer"),
        );
        assert_eq!(found.await, [Probed::error("url", "no answer within 5s")]);
    }
}
