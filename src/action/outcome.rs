//! What an action came to: success, or a failure with its reason and whose fault it
//! looks like. A failure is a value, not an error.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::capture;
use crate::db::{OutcomeParams, Refusal};

/// What happened to an item's action; outcome SQL sees it as `:error`, `:status`,
/// `:output` and `:retry_after`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    pub error: Option<String>,
    pub status: Option<i64>,
    pub output: Option<Vec<u8>>,
    pub retry_after: Option<u32>,
    /// The handler released the item, to be tried again after this many seconds
    /// (`[on_release]`'s `:release_after`): not done, and not a failure.
    pub release_after: Option<u32>,
    /// `[recurring]` or a schedule: the row's next due time after its action
    /// (`:next_run`), and for a schedule what the run passed over; set where the
    /// action runs, `engine::turn::execute`. Behind a pointer, so that an outcome
    /// stays small to move about.
    pub rearmed: Option<Box<Rearmed>>,
    /// The handler did not finish the item: it died, hung or wrote what is not an
    /// answer (a PHP fatal error, a kill). What it did is not known; with
    /// `[on_release]` the row is put back rather than recorded as failed.
    pub interrupted: bool,
    /// What kind of failure the handler says this is (a worker's `"kind"`: the
    /// exception's class): the console groups failures by it, rather than by
    /// their masked text.
    /// Behind a thin pointer, so that an outcome stays small to move about.
    pub kind: Option<Box<Kind>>,
    /// Whose fault a failure looks like.
    pub blame: Blame,
    /// The trace context the action sent, and when it ran: for the item's log
    /// lines and its exported span. Behind a pointer, as `each` is.
    pub trace: Option<Box<TraceNotes>>,
    /// A batch's action that sends each item on its own (a message per row) and so
    /// knows each one's fate: their outcomes, in the batch's order. `None` when the
    /// batch went as one (an HTTP request, a command). Behind a pointer, so that an
    /// outcome stays small to move about.
    pub each: Option<Arc<Vec<Outcome>>>,
}

/// A row's next due time: a cron expression's time, in whole seconds since the
/// epoch (so that an outcome stays small to move about; until 2106).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NextRun(NonZeroU32);

impl NextRun {
    /// `at`, to the second before; `None` before 1970-01-01 00:00:01 or past 2106.
    pub fn at(at: SystemTime) -> Option<NextRun> {
        let seconds = at.duration_since(UNIX_EPOCH).ok()?.as_secs();
        u32::try_from(seconds)
            .ok()
            .and_then(NonZeroU32::new)
            .map(NextRun)
    }

    pub fn time(self) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(u64::from(self.0.get()))
    }
}

/// What a finished run makes of a row that re-arms: its next due time
/// (`:next_run`); for a schedule, the due times the run passed over (`:skipped`)
/// and a failed run's retry within its period (`:retry_at`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rearmed {
    pub next_run: NextRun,
    pub skipped: u32,
    pub retry_at: Option<NextRun>,
}

impl Rearmed {
    /// A row's next due time alone (`[recurring]`).
    pub fn next(next_run: NextRun) -> Rearmed {
        Rearmed {
            next_run,
            skipped: 0,
            retry_at: None,
        }
    }
}

/// A failure's kind, as its handler names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kind(pub String);

/// What an item's trace learns from its action.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceNotes {
    /// The W3C trace context an HTTP action sent (`traceparent`): its trace id, for
    /// the item's log lines, and its span id — the item's exported span is that
    /// span, so the receiver's spans are its children.
    pub sent: Option<(String, String)>,
    /// When the action started and ended, by the wall clock (set where it runs,
    /// `engine::turn::execute`, while spans are exported).
    pub ran: Option<(std::time::SystemTime, std::time::SystemTime)>,
}

/// Whose fault a failure looks like. Only the item's own failures are recorded
/// through `[on_failure]` as normal processing; the others say nothing about the
/// item, and slow the queue down instead (the circuit breaker counts those
/// downstream; the worker backs off).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Blame {
    /// The item's own: its values, or the receiver's verdict on it.
    #[default]
    Item,
    /// Not the item's: the receiver failed or was slow after it may have started
    /// on the item (a timeout, a 503, a connection cut mid-answer). The item may
    /// have run, so its attempt is spent (at-least-once).
    Downstream,
    /// The action cannot have reached its handler: a connection refused, a socket
    /// or program missing, a server that said it was overloaded before taking the
    /// request. The item is left as claimed, its attempt not spent, and the queue
    /// stops claiming until the handler answers again (`engine::policy::circuit`), with
    /// or without `[circuit]`.
    Unreached,
    /// The queue's own: its SQL names a column, table or procedure that is not
    /// there, or a privilege its user lacks. Every item would fail alike until
    /// someone fixes the queue, so the item is left waiting, its attempt not spent.
    Queue,
    /// The database's, for now: it takes no writes (`read-only`, `permission
    /// denied`). The item is left waiting, and no worker claims on that database
    /// until it takes writes again.
    Database(Refusal),
}

impl Outcome {
    pub fn success() -> Self {
        Outcome::default()
    }

    pub fn failure(error: impl Into<String>) -> Self {
        Outcome {
            error: Some(capture::clip_error(error.into())),
            ..Outcome::default()
        }
    }

    /// A failure that is not the item's fault (see [`Blame::Downstream`]).
    pub fn downstream(error: impl Into<String>) -> Self {
        Outcome {
            blame: Blame::Downstream,
            ..Outcome::failure(error)
        }
    }

    /// A failure that cannot have reached the handler (see [`Blame::Unreached`]).
    pub fn unreached(error: impl Into<String>) -> Self {
        Outcome {
            blame: Blame::Unreached,
            ..Outcome::failure(error)
        }
    }

    pub fn succeeded(&self) -> bool {
        self.error.is_none()
    }

    /// The W3C trace id the action sent, if it sent one.
    pub fn trace_id(&self) -> Option<&str> {
        let (trace_id, _) = self.trace.as_deref()?.sent.as_ref()?;
        Some(trace_id)
    }

    /// How long the action ran, when it was timed (a failure's always is).
    pub fn ran_for(&self) -> Option<std::time::Duration> {
        let (began, ended) = self.trace.as_deref()?.ran?;
        ended.duration_since(began).ok()
    }

    /// The outcome as outcome SQL's parameters.
    pub fn params(&self) -> OutcomeParams<'_> {
        OutcomeParams {
            error: self.error.as_deref(),
            status: self.status,
            output: self.output.as_deref(),
            // A release recorded by `[on_failure]` (no `[on_release]`) says when.
            retry_after: self.retry_after.or(self.release_after).map(u64::from),
            // A handler that died under the item: put back at once, or when its
            // answer said to try again.
            release_after: self.release_after.map(u64::from).or_else(|| {
                let cut = self.interrupted || self.blame == Blame::Downstream;
                cut.then_some(u64::from(self.retry_after.unwrap_or(0)))
            }),
            next_run: self.rearmed.as_deref().map(|r| r.next_run.time()),
            skipped: self.rearmed.as_deref().map(|r| u64::from(r.skipped)),
            retry_at: self
                .rearmed
                .as_deref()
                .and_then(|r| r.retry_at)
                .map(NextRun::time),
            lease: Default::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_next_run_keeps_whole_seconds_until_2106() {
        let at = UNIX_EPOCH + Duration::from_millis(1_806_220_800_250);
        let next = NextRun::at(at).expect("in range");
        assert_eq!(next.time(), UNIX_EPOCH + Duration::from_secs(1_806_220_800));
        assert_eq!(NextRun::at(UNIX_EPOCH), None);
        assert_eq!(NextRun::at(UNIX_EPOCH + Duration::from_secs(1 << 32)), None);
    }
}
