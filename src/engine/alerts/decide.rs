//! What a copy does with one alert after a look: the pure decision, apart from the
//! statements. A condition's state changes when what the copy saw disagrees with
//! the row; an unsent message no copy holds is taken up; otherwise nothing.

use std::time::SystemTime;

use crate::config::queue::alerts::Condition;
use crate::db::backlog::Backlog;
use crate::db::history::alerts::AlertState;

/// What a copy saw of one condition.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Seen {
    pub breached: bool,
    /// Seconds, failures or rows, as the condition counts.
    pub value: f64,
}

/// What to do with one alert's row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The row says what the copy saw, and its message went out or is held.
    Nothing,
    /// The state changed: write it, and tell it if `tell`.
    Flip { firing: bool, tell: bool },
    /// Its message did not go out and no copy holds it: this copy sends it.
    TakeUp,
}

/// The step for `state` after the copy saw `seen` (`None`: nothing to judge by,
/// such as no history tables yet). A change whose row's last message never went
/// out, and that no copy is sending, tells nothing: the receiver last heard the
/// state the alert is back in.
pub fn step(state: &AlertState, seen: Option<Seen>) -> Step {
    match seen {
        Some(seen) if seen.breached != state.firing => Step::Flip {
            firing: seen.breached,
            tell: state.sent || !state.send_free,
        },
        _ if !state.sent && state.send_free => Step::TakeUp,
        _ => Step::Nothing,
    }
}

/// What `condition` looks like, from the backlog read under the lock and the
/// failures of the last complete minute (`None`: not read, or no history tables).
pub fn seen(condition: Condition, backlog: Option<&Backlog>, failed: Option<u64>) -> Option<Seen> {
    match condition {
        Condition::OldestWaiting(limit) => {
            let backlog = backlog?;
            let oldest = backlog
                .oldest_since
                .as_ref()
                .filter(|_| backlog.waiting > 0)
                .and_then(|since| backlog.clock.age(since, SystemTime::now()))
                .unwrap_or_default();
            Some(Seen {
                breached: oldest > limit,
                value: oldest.as_secs_f64(),
            })
        }
        Condition::FailedPerMinute(limit) => failed.map(|n| Seen {
            breached: n > u64::from(limit),
            value: n as f64,
        }),
        Condition::GaveUp => backlog?.gave_up.map(|n| Seen {
            breached: n > 0,
            value: n as f64,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(firing: bool, sent: bool, send_free: bool) -> AlertState {
        AlertState {
            alert: "oldest_waiting".into(),
            firing,
            flips: 1,
            sent,
            send_free,
            send_attempts: 0,
            value: None,
            limit: None,
            seen_by: String::new(),
            since: 0.0,
        }
    }

    fn saw(breached: bool) -> Option<Seen> {
        Some(Seen {
            breached,
            value: 1.0,
        })
    }

    #[test]
    fn a_breach_flips_once_and_is_told() {
        let quiet = state(false, true, true);
        let told = Step::Flip {
            firing: true,
            tell: true,
        };
        assert_eq!(step(&quiet, saw(true)), told);
        assert_eq!(step(&state(true, true, true), saw(true)), Step::Nothing);
        // Sent by another copy right now: not sent twice.
        assert_eq!(step(&state(true, false, false), saw(true)), Step::Nothing);
        assert_eq!(step(&state(true, false, true), saw(true)), Step::TakeUp);
        assert_eq!(step(&state(true, false, true), None), Step::TakeUp);
        assert_eq!(step(&quiet, None), Step::Nothing);
    }

    #[test]
    fn a_change_whose_message_never_went_out_tells_nothing_of_the_way_back() {
        let unheard = state(true, false, true);
        let quiet_again = Step::Flip {
            firing: false,
            tell: false,
        };
        assert_eq!(step(&unheard, saw(false)), quiet_again);
        // One copy is sending it: the way back is told too.
        let sending = state(true, false, false);
        let resolved = Step::Flip {
            firing: false,
            tell: true,
        };
        assert_eq!(step(&sending, saw(false)), resolved);
    }
}
