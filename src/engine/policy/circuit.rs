//! The circuit breaker of a queue whose action reaches outside the database.
//!
//! Closed, items run as usual and their results are counted in a sliding window.
//! When enough of them failed downstream (see [`Blame`]), the circuit opens: the
//! workers stop claiming, so no row spends an attempt on an outage, and an item
//! still in flight that fails downstream is left waiting rather than recorded. After
//! a cool-down one worker claims and runs **one** item, the probe (half-open): its
//! success closes the circuit, its failure opens it again for twice as long (with
//! jitter, up to `max_cool_down`).
//!
//! A handler that cannot be reached at all ([`Blame::Unreached`]: a connection
//! refused, a socket or program missing) opens the circuit at once, with or
//! without `[circuit]`: its item is left as claimed, its attempt not spent, and the
//! handler is tried with one item every [`UNREACHED_RETRY`] until it answers —
//! whatever it answers closes the circuit. That is waiting, not statistics: no
//! window, no doubling, one warning when it starts and one line when it ends.
//!
//! Where the claim itself moved the row on (a schedule with `overlap = true`),
//! nothing is left waiting: such a run, held back or failed, is recorded (its due
//! time counted missed).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use crate::action::{Blame, Outcome};
use crate::config::{CircuitConfig, QueueConfig};
use crate::engine::policy::retry::jitter;
use crate::lock::lock;
use crate::telemetry::events::{CircuitChanged, Event, HandlerBack, HandlerUnreached};
use crate::telemetry::stats::{CircuitState, QueueStats};

/// How often an unreachable handler is tried again, with one item.
pub const UNREACHED_RETRY: Duration = Duration::from_secs(1);

/// How many slices the window is counted in: memory stays bounded whatever the
/// throughput, and the window slides a tenth at a time.
const SLICES: u32 = 10;

pub struct Circuit {
    /// `None`: the breaker is off, and the circuit always closed.
    config: Option<CircuitConfig>,
    /// A command's exit codes that count as downstream failures.
    transient_exit_codes: Vec<i32>,
    state: Mutex<State>,
    /// Bumped at every change of state: workers waiting to claim look again.
    changed: watch::Sender<u64>,
    stats: Arc<QueueStats>,
    /// Whether an item held back is left waiting; false where the claim moved the
    /// row on (a schedule with `overlap = true`): its run is recorded, missed.
    items_wait: bool,
}

enum State {
    Closed {
        slices: VecDeque<Slice>,
    },
    Open {
        until: Instant,
        cool_down: Duration,
        cause: Cause,
    },
    HalfOpen {
        cool_down: Duration,
        probe: Probe,
        cause: Cause,
    },
}

/// Why the circuit is open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cause {
    /// Too many items failed downstream (`[circuit]`).
    Failures,
    /// The handler could not be reached, since then.
    Unreached { since: Instant },
}

/// Items finished within one slice of the window.
struct Slice {
    start: Instant,
    finished: u32,
    failed_downstream: u32,
}

/// Where the half-open circuit's one probe is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Probe {
    /// Nobody probes: the next worker to claim does.
    Free,
    /// A worker claims for the probe.
    Claimed,
    /// The probe's action runs.
    Running,
}

/// Leave to claim, held while the claim is processed. A probe's pass that ends
/// without its item running (an empty claim, a lost connection) frees the probe.
pub struct Pass<'a> {
    circuit: &'a Circuit,
    probe: bool,
}

/// Leave to run one item's action; [`Admission::finished`] says what its outcome does
/// to the circuit. A probe's ticket dropped unfinished (the action was cancelled)
/// frees the probe.
pub struct Admission<'a> {
    circuit: &'a Circuit,
    probe: bool,
    done: bool,
}

impl Circuit {
    pub fn new(config: &QueueConfig, stats: Arc<QueueStats>) -> Circuit {
        // Empty unless the kind's failures have exit codes (the loader's rule).
        let transient_exit_codes = config
            .circuit
            .as_ref()
            .map(|circuit| circuit.transient_exit_codes.clone())
            .unwrap_or_default();
        stats.set_circuit(CircuitState::Closed);
        Circuit {
            config: config.circuit.clone(),
            transient_exit_codes,
            state: Mutex::new(State::closed()),
            changed: watch::Sender::new(0),
            stats,
            items_wait: !config.claim_moves_on(),
        }
    }

    /// Waits until the queue may claim: at once while the circuit is closed; while
    /// it is open, until its cool-down is over; half-open, until the probe is free.
    /// `None` once `stop` is cancelled.
    pub async fn pass(&self, stop: &CancellationToken) -> Option<Pass<'_>> {
        loop {
            let mut changed = self.changed.subscribe();
            let wait_until = {
                let mut state = self.lock();
                match &mut *state {
                    State::Closed { .. } => return Some(self.pass_with(false)),
                    State::Open {
                        until,
                        cool_down,
                        cause,
                    } if *until <= Instant::now() => {
                        let cause = *cause;
                        *state = State::HalfOpen {
                            cool_down: *cool_down,
                            probe: Probe::Claimed,
                            cause,
                        };
                        match cause {
                            Cause::Failures => {
                                self.changed_to(CircuitState::HalfOpen, "", Duration::ZERO)
                            }
                            // Shown as open until the handler answers.
                            Cause::Unreached { .. } => {}
                        }
                        return Some(self.pass_with(true));
                    }
                    State::Open { until, .. } => Some(*until),
                    State::HalfOpen { probe, .. } if *probe == Probe::Free => {
                        *probe = Probe::Claimed;
                        return Some(self.pass_with(true));
                    }
                    State::HalfOpen { .. } => None,
                }
            };
            let until = wait_until.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
            tokio::select! {
                _ = stop.cancelled() => return None,
                _ = changed.changed() => {}
                _ = tokio::time::sleep_until(until) => {}
            }
        }
    }

    fn pass_with(&self, probe: bool) -> Pass<'_> {
        Pass {
            circuit: self,
            probe,
        }
    }

    /// Leave to run one item's action now: always while the circuit is closed;
    /// half-open, for the probe alone; open, never (the item is left waiting).
    pub fn admit(&self) -> Option<Admission<'_>> {
        let mut state = self.lock();
        match &mut *state {
            State::Closed { .. } => Some(self.ticket(false)),
            State::HalfOpen { probe, .. } if *probe != Probe::Running => {
                *probe = Probe::Running;
                Some(self.ticket(true))
            }
            State::HalfOpen { .. } | State::Open { .. } => None,
        }
    }

    fn ticket(&self, probe: bool) -> Admission<'_> {
        Admission {
            circuit: self,
            probe,
            done: false,
        }
    }

    /// Whether `outcome` failed for a reason that is not the item's own.
    fn failed_downstream(&self, outcome: &Outcome) -> bool {
        !outcome.succeeded()
            && (outcome.blame == Blame::Downstream
                || outcome.status.is_some_and(|status| {
                    i32::try_from(status).is_ok_and(|s| self.transient_exit_codes.contains(&s))
                }))
    }

    /// Counts a finished item; true if the outcome is to be recorded as usual, false
    /// if the item is to be left waiting (its handler could not be reached, or it
    /// failed downstream with the circuit open).
    fn finished(&self, probe: bool, outcome: &Outcome) -> bool {
        if outcome.blame == Blame::Unreached {
            self.unreached(probe, outcome);
            return false;
        }
        let downstream = self.failed_downstream(outcome);
        let mut state = self.lock();
        if let State::HalfOpen {
            cause: Cause::Unreached { since },
            ..
        } = &*state
        {
            if probe {
                let since = *since;
                // No answer (a timeout, a cut): still waiting for the handler.
                if downstream {
                    self.wait_for_handler(state, since, false, outcome);
                    return false;
                }
                *state = State::closed();
                drop(state);
                HandlerBack {
                    after: since.elapsed(),
                }
                .emit(&self.stats);
                self.changed.send_modify(|generation| *generation += 1);
                return true;
            }
        }
        let Some(config) = &self.config else {
            // No breaker: only an unreachable handler opens the circuit, and an
            // outage must not spend the attempts of the items still in flight.
            return matches!(*state, State::Closed { .. }) || !downstream;
        };
        let now = Instant::now();
        match &mut *state {
            State::HalfOpen { cool_down, .. } if probe => {
                if downstream {
                    let longer = (*cool_down * 2).min(config.max_cool_down);
                    self.open(&mut state, longer, "the probe failed downstream too");
                } else {
                    *state = State::closed();
                    self.changed_to(CircuitState::Closed, "", Duration::ZERO);
                }
                true
            }
            State::Closed { slices } => {
                let (finished, failed) = count(slices, now, config.window, downstream);
                if finished as usize >= config.min_items
                    && f64::from(failed) > config.failure_ratio * f64::from(finished)
                {
                    let why = format!(
                        "{failed} of the last {finished} items failed downstream within {}",
                        humantime::format_duration(config.window)
                    );
                    self.open(&mut state, config.cool_down, &why);
                }
                true
            }
            // Open, or half-open and this is not the probe: the circuit is not this
            // item's to judge, and an outage must not spend its attempt.
            State::Open { .. } | State::HalfOpen { .. } => !downstream,
        }
    }

    /// An item's action could not reach its handler: the circuit opens for
    /// [`UNREACHED_RETRY`] — said once, when the handler was reachable until now
    /// (the circuit closed, or open for failures); a probe that could not reach it
    /// either keeps it open, quietly.
    fn unreached(&self, probe: bool, outcome: &Outcome) {
        let state = self.lock();
        let now = Instant::now();
        let (since, newly) = match &*state {
            State::Closed { .. } => (now, true),
            State::HalfOpen {
                cause: Cause::Unreached { since },
                ..
            } if probe => (*since, false),
            State::HalfOpen { .. } if probe => (now, true),
            // Already open: its next probe tells.
            State::Open { .. } | State::HalfOpen { .. } => return,
        };
        self.wait_for_handler(state, since, newly, outcome);
    }

    /// Opens the circuit for [`UNREACHED_RETRY`], for a handler unreachable since
    /// `since`: said when `newly`, else only shown; workers waiting look again.
    fn wait_for_handler(
        &self,
        mut state: MutexGuard<'_, State>,
        since: Instant,
        newly: bool,
        outcome: &Outcome,
    ) {
        *state = State::Open {
            until: Instant::now() + UNREACHED_RETRY,
            cool_down: UNREACHED_RETRY,
            cause: Cause::Unreached { since },
        };
        drop(state);
        let error = outcome.error.as_deref().unwrap_or_default();
        match newly {
            true => HandlerUnreached {
                error,
                retry_in: UNREACHED_RETRY,
                item_waits: self.items_wait,
            }
            .emit(&self.stats),
            false => self
                .stats
                .note_circuit(CircuitState::Open, error, UNREACHED_RETRY),
        }
        self.changed.send_modify(|generation| *generation += 1);
    }

    /// Opens the circuit for a jittered `cool_down`.
    fn open(&self, state: &mut MutexGuard<'_, State>, cool_down: Duration, why: &str) {
        let wait = jitter(cool_down);
        **state = State::Open {
            until: Instant::now() + wait,
            cool_down,
            cause: Cause::Failures,
        };
        self.changed_to(CircuitState::Open, why, wait);
    }

    /// The probe ended without a result: the next worker to claim probes instead.
    fn free_probe(&self, from: Probe) {
        let mut state = self.lock();
        if let State::HalfOpen { probe, .. } = &mut *state {
            if *probe == from {
                *probe = Probe::Free;
                drop(state);
                self.changed.send_modify(|generation| *generation += 1);
            }
        }
    }

    /// The circuit changed to `to` (opened `why`, until `retry_in`): said, shown, and
    /// workers waiting to claim look again.
    fn changed_to(&self, to: CircuitState, why: &str, retry_in: Duration) {
        CircuitChanged { to, why, retry_in }.emit(&self.stats);
        self.changed.send_modify(|generation| *generation += 1);
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }
}

impl State {
    fn closed() -> State {
        State::Closed {
            slices: VecDeque::with_capacity(SLICES as usize + 1),
        }
    }
}

/// Adds one finished item to the window's slices, forgets the slices older than
/// `window`, and returns the items finished and failed downstream within it.
fn count(slices: &mut VecDeque<Slice>, now: Instant, window: Duration, failed: bool) -> (u32, u32) {
    let width = window / SLICES;
    while slices
        .front()
        .is_some_and(|oldest| now.duration_since(oldest.start) >= window)
    {
        slices.pop_front();
    }
    if slices
        .back()
        .is_none_or(|newest| now.duration_since(newest.start) >= width)
    {
        slices.push_back(Slice {
            start: now,
            finished: 0,
            failed_downstream: 0,
        });
    }
    if let Some(newest) = slices.back_mut() {
        newest.finished += 1;
        newest.failed_downstream += u32::from(failed);
    }
    slices.iter().fold((0, 0), |(finished, failed), slice| {
        (finished + slice.finished, failed + slice.failed_downstream)
    })
}

impl Admission<'_> {
    /// The item's action finished with `outcome`. True if the outcome is to be
    /// recorded as usual; false if the item is to be left waiting, untouched (never
    /// where the claim moved the row on).
    pub fn finished(mut self, outcome: &Outcome) -> bool {
        self.done = true;
        let record = self.circuit.finished(self.probe, outcome);
        let waits = !record && self.circuit.items_wait;
        // An unreachable handler is said once, when the circuit opens for it.
        if !record && outcome.blame != Blame::Unreached {
            let error = outcome.error.as_deref().unwrap_or_default();
            match waits {
                true => {
                    warn!(%error, "item failed downstream while the circuit is open; it is waiting again, its attempt not spent")
                }
                false => {
                    warn!(%error, "run failed downstream while the circuit is open; its due time is counted missed")
                }
            }
        }
        !waits
    }
}

impl Drop for Admission<'_> {
    fn drop(&mut self) {
        if self.probe && !self.done {
            self.circuit.free_probe(Probe::Running);
        }
    }
}

impl Drop for Pass<'_> {
    fn drop(&mut self) {
        if self.probe {
            self.circuit.free_probe(Probe::Claimed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_forgets_what_is_older_than_it() {
        let mut slices = VecDeque::new();
        let start = Instant::now();
        let window = Duration::from_secs(10);
        assert_eq!(count(&mut slices, start, window, true), (1, 1));
        assert_eq!(count(&mut slices, start, window, false), (2, 1));
        let later = start + Duration::from_secs(5);
        assert_eq!(count(&mut slices, later, window, true), (3, 2));
        let much_later = start + Duration::from_secs(11);
        assert_eq!(count(&mut slices, much_later, window, false), (2, 1));
        assert!(slices.len() <= SLICES as usize + 1);
    }
}
