//! How an item's turn ends, in one call: [`QueueRuntime::settle`] counts its fate
//! in the turn's report, notes it for the item's trace span, and says it in the
//! log — one arm per way an item can end (done, failed, or returned to wait again,
//! and why), so that the count, the span and the line cannot drift apart.

use std::time::SystemTime;

use tracing::{debug, warn, Level, Span};

use crate::action::Outcome;
use crate::db::{DbError, Item, Statements};
use crate::engine::queue::QueueRuntime;
use crate::engine::turn::report::{BatchReport, Fate, Returned};
use crate::telemetry::events::{Event, ItemFailed, LeaseLost, OutcomeSqlFailed};
use crate::telemetry::stats::by_label::Ended;
use crate::telemetry::stats::history_tap::FailedAttempt;
use crate::telemetry::trace::otlp;
use crate::telemetry::trace::spans::ItemTrace;

impl QueueRuntime {
    /// Settles `item`: its `fate` counted in `report`, noted for its trace span
    /// (with what its action's `outcome` says, if it ran), and said in the item's
    /// log span.
    pub fn settle(
        &self,
        report: &mut BatchReport,
        item: &Item,
        fate: Fate,
        outcome: Option<&Outcome>,
    ) {
        // A done item says nothing above debug: no log span is made for it then.
        let quiet = matches!(fate, Fate::Done) && !tracing::enabled!(Level::DEBUG);
        let _span = (!quiet && !in_item_span()).then(|| outcome_span(item, outcome).entered());
        self.say(report, item, &fate, outcome);
        self.count_by_label(item, &fate);
        note_span(report, item, &fate, outcome);
        // A row `[on_success]` re-armed with `:next_run` is meant to come back.
        let rearmed = self.config.rearms() && outcome.is_some_and(|o| o.rearmed.is_some());
        report.count(&fate, || (!rearmed).then(|| item.key_text()));
    }

    /// The item counted under its `label` column's value, if the queue has one.
    fn count_by_label(&self, item: &Item, fate: &Fate) {
        let Some(column) = &self.config.monitoring.label else {
            return;
        };
        let ended = match fate {
            Fate::Done => Ended::Done,
            Fate::Failed => Ended::Failed,
            Fate::Returned(_) => Ended::Returned,
        };
        let label = item.text_of(column);
        self.stats.observed.by_label.count(label.as_deref(), ended);
    }

    /// The fate's line (and what the status page and the counters keep of it).
    fn say(&self, report: &mut BatchReport, item: &Item, fate: &Fate, outcome: Option<&Outcome>) {
        let error = outcome.and_then(|o| o.error.as_deref()).unwrap_or_default();
        let why = match fate {
            Fate::Done => return debug!("item done"),
            Fate::Failed => return self.item_failed(report, item, outcome, true),
            Fate::Returned(why) => why,
        };
        match why {
            Returned::CircuitOpen => {
                debug!("the circuit breaker is open: the item is left as claimed, waiting again")
            }
            Returned::QueueFault => self.queue_fault(error),
            Returned::WritesRefused => debug!(%error,
                "the database refuses writes: the item is waiting again, its attempt not spent"),
            Returned::NoOnFailure => self.item_failed(report, item, outcome, false),
            Returned::SqlFailed { which, error: e } => self.sql_failed(item, *which, e, error),
            Returned::NotLeased => self.not_leased(item),
            Returned::KeyAtLimit => {
                self.stats.observed.record_held_back(1);
                debug!("its [concurrency] key is at its limit: not started, waiting again")
            }
            Returned::LeaseLost { lease_id, at } => {
                let lost = LeaseLost { lease_id, at: *at };
                lost.emit(&self.stats)
            }
            Returned::NotKnown(why) => warn!(error = %why,
                "the outcome is not recorded; the row is worked on again when its lease expires"),
            Returned::Stopping => {
                debug!("the worker is stopping: the item is not started, and is waiting again")
            }
            Returned::Aborted => warn!("the shutdown timeout passed; the action is cancelled"),
            Returned::Released => {
                debug!(%error, release_after = outcome.and_then(|o| o.release_after),
                "released by its handler: waiting again")
            }
        }
    }

    /// The item's failure said and shown on the status page, and kept for the
    /// history once its turn commits.
    fn item_failed(
        &self,
        report: &mut BatchReport,
        item: &Item,
        outcome: Option<&Outcome>,
        recorded: bool,
    ) {
        let attempt = FailedAttempt {
            key: item.key_text(),
            at: SystemTime::now(),
            ms: outcome
                .and_then(Outcome::ran_for)
                .map(|took| took.as_millis() as u64),
            error: outcome.and_then(|o| o.error.clone()).unwrap_or_default(),
            status: outcome.and_then(|o| o.status),
            kind: outcome.and_then(|o| o.kind.as_deref()).map(|k| k.0.clone()),
            recorded,
            gave_up: None,
        };
        ItemFailed { attempt: &attempt }.emit(&self.stats);
        if self.stats.observed.history.connected() {
            report.attempts.push(attempt);
        }
    }

    /// A failure that is the queue's: said in full once per error.
    fn queue_fault(&self, error: &str) {
        if self.queue_faults.first(error) {
            tracing::error!(%error,
                "the action failed for a reason that is the queue's, not the row's (a column, \
                 table, procedure or script that is not there, or a privilege its user \
                 lacks): the item \
                 is waiting again, its attempt not spent, and the queue backs off until it is \
                 fixed; said once per error");
        } else {
            debug!(%error, "the queue's action failed again for a reason that is not the row's");
        }
    }

    /// `which` SQL failed for `item`: counted every time, said in full once per key.
    fn sql_failed(&self, item: &Item, which: Statements, e: &DbError, action_error: &str) {
        let outcome = matches!(which, Statements::OnSuccess | Statements::OnFailure);
        let failed = OutcomeSqlFailed {
            which: which.label(),
            error: e,
            action_error,
            first: self.outcome_sql_failed.first(&item.key_text()),
            // A leased row comes back when its lease expires.
            leased: outcome && self.config.is_lease(),
        };
        failed.emit(&self.stats);
    }

    /// `[lease] sql` did not match the claimed row: said once per key.
    fn not_leased(&self, item: &Item) {
        if self.outcome_sql_failed.first(&item.key_text()) {
            warn!(
                "[lease] sql matched no row: the row is not leased and is left as it is; the \
                 lease SQL must update the claimed row by its key; said once per row"
            );
        }
    }
}

/// Notes `item`'s fate for its trace span, when spans are exported.
fn note_span(report: &mut BatchReport, item: &Item, fate: &Fate, outcome: Option<&Outcome>) {
    if !otlp::enabled() {
        return;
    }
    let notes = outcome.and_then(|o| o.trace.as_deref());
    let (name, why) = match fate {
        Fate::Done => ("done", None),
        Fate::Failed => ("failed", None),
        Fate::Returned(why) => ("returned", why.why()),
    };
    report.traced.push(ItemTrace {
        key: item.key_text(),
        parent: item.trace_parent(),
        sent: notes.and_then(|n| n.sent.clone()),
        outcome: name,
        error: why.or_else(|| outcome.and_then(|o| o.error.clone())),
        action: notes.and_then(|n| n.ran),
        recorded: SystemTime::now(),
    });
}

/// The span an item's work runs in: its key on every log line, and the trace id
/// of its HTTP delivery once it has one.
pub fn item_span(item: &Item) -> Span {
    tracing::info_span!("item", key = %item.key_text(), trace_id = tracing::field::Empty)
}

/// The span an item's outcome is said in: its key, and the trace id its delivery
/// sent, if any.
pub fn outcome_span(item: &Item, outcome: Option<&Outcome>) -> Span {
    let span = item_span(item);
    if let Some(trace_id) = outcome.and_then(Outcome::trace_id) {
        span.record("trace_id", trace_id);
    }
    span
}

/// Whether the current span is an item's already (its work's, in lease mode).
fn in_item_span() -> bool {
    Span::current()
        .metadata()
        .is_some_and(|meta| meta.name() == "item")
}
