//! The statements tableq writes for a schedule queue: its claim's lease and the
//! outcome statements that re-arm its row (before the file's own, in the same
//! transaction: the first is the one a lease is judged by). Without
//! `overlap`, a run holds its due time — by the claim's transaction for an SQL
//! action, by a lease for any other — and its outcome moves the row on, guarded by
//! the due time; with `overlap = true` the claim itself moves the row on
//! (`:next_run` bound at the claim), and the outcome only counts.

use crate::config::action::ActionConfig;
use crate::config::queue::lease::{LeaseConfig, LeaseToken};
use crate::config::queue::mode::Mode;
use crate::config::queue::scope::Scope;
use crate::sql::statement::{parse_statement, ParsedStatement};

use super::{ScheduleConfig, LEASE, RENEW_EVERY};

/// What the run's outcome writes besides its result, in both outcomes.
const SETTLED: &str = "last_scheduled_at = :scheduled_at, last_run_at = :run_at, \
     last_finished_at = UTC_TIMESTAMP(6), lease_id = NULL, seen_at = UTC_TIMESTAMP(6)";

impl ScheduleConfig {
    /// The schedule's `[on_success]` statement (after the file's own): the row
    /// re-armed, the due times a long run passed over counted as missed.
    fn on_success(&self, guard: &str) -> String {
        format!(
            "UPDATE tableq_schedules SET due_at = :next_run, attempts = 0, runs = runs + 1, \
             missed = missed + :skipped, \
             last_missed_at = IF(:skipped > 0, UTC_TIMESTAMP(6), last_missed_at), \
             catch_up_until = IF(catch_up_until < :next_run, NULL, catch_up_until), \
             last_outcome = 'done', last_error = NULL, last_success_at = UTC_TIMESTAMP(6), \
             lease_until = '1970-01-01 00:00:01', {SETTLED} WHERE name = :queue AND due_at = :scheduled_at{guard}"
        )
    }

    /// The schedule's `[on_failure]` statement (after the file's own): a retry within
    /// the period — the same due time, held back until `:retry_at` by the lease's
    /// column — or the due time missed.
    fn on_failure(&self, guard: &str) -> String {
        format!(
            "UPDATE tableq_schedules SET due_at = IF(:retry_at IS NULL, :next_run, due_at), \
             attempts = IF(:retry_at IS NULL, 0, attempts + 1), \
             missed = missed + IF(:retry_at IS NULL, 1 + :skipped, 0), \
             last_missed_at = IF(:retry_at IS NULL, UTC_TIMESTAMP(6), last_missed_at), \
             catch_up_until = IF(:retry_at IS NULL AND catch_up_until < :next_run, NULL, \
             catch_up_until), \
             last_outcome = 'failed', last_error = :error, \
             lease_until = COALESCE(:retry_at, '1970-01-01 00:00:01'), {SETTLED} WHERE name = :queue AND due_at = :scheduled_at{guard}"
        )
    }

    /// The lease an action outside the database runs under.
    fn lease(&self) -> LeaseConfig {
        let interval = format!("INTERVAL {} SECOND", LEASE.as_secs());
        let held = "WHERE name = :queue AND lease_id = :lease_id";
        LeaseConfig {
            sql: vec![internal(&format!(
                "UPDATE tableq_schedules SET lease_id = :lease_id, \
                 lease_until = UTC_TIMESTAMP(6) + {interval} WHERE name = :queue"
            ))],
            renew_sql: Some(vec![internal(&format!(
                "UPDATE tableq_schedules SET lease_until = UTC_TIMESTAMP(6) + {interval} {held}"
            ))]),
            release_sql: Some(vec![internal(&format!(
                "UPDATE tableq_schedules SET lease_id = NULL, \
                 lease_until = '1970-01-01 00:00:01' {held}"
            ))]),
            renew_every: Some(RENEW_EVERY),
            connections: 2,
            length: Some(LEASE),
            token: LeaseToken::Random,
        }
    }

    /// With `overlap = true`: the claim moves the row to `:next_run` at once (the
    /// due times passed over counted missed), so the next due time can start while
    /// this run runs; nothing holds the run's due time.
    fn overlapping_lease(&self) -> LeaseConfig {
        LeaseConfig {
            sql: vec![internal(
                "UPDATE tableq_schedules SET due_at = :next_run, attempts = 0, \
                 missed = missed + :skipped, \
                 last_missed_at = IF(:skipped > 0, UTC_TIMESTAMP(6), last_missed_at), \
                 catch_up_until = IF(catch_up_until < :next_run, NULL, catch_up_until), \
                 last_scheduled_at = due_at, last_run_at = UTC_TIMESTAMP(6), \
                 seen_at = UTC_TIMESTAMP(6) WHERE name = :queue",
            )],
            renew_sql: None,
            release_sql: None,
            renew_every: None,
            connections: 2,
            length: None,
            token: LeaseToken::Random,
        }
    }

    /// With `overlap = true`, the outcome only counts: the claim re-armed the row.
    fn overlapping_outcomes(&self) -> (String, String) {
        let counted = "last_finished_at = UTC_TIMESTAMP(6), seen_at = UTC_TIMESTAMP(6) \
                       WHERE name = :queue";
        (
            format!(
                "UPDATE tableq_schedules SET runs = runs + 1, last_outcome = 'done', \
                 last_error = NULL, last_success_at = UTC_TIMESTAMP(6), {counted}"
            ),
            format!(
                "UPDATE tableq_schedules SET missed = missed + 1, \
                 last_missed_at = UTC_TIMESTAMP(6), last_outcome = 'failed', \
                 last_error = :error, {counted}"
            ),
        )
    }

    /// The queue's mode (lease for an action outside the database) and its outcome
    /// statements: the schedule's first — lease mode judges the lease by the first
    /// statement's rows, and it is the one guarded by the due time — then the file's own.
    pub fn mode_and_outcomes(
        &self,
        action: &ActionConfig,
        on_success: &mut Vec<ParsedStatement>,
        on_failure: &mut Option<Vec<ParsedStatement>>,
    ) -> Mode {
        if self.overlap && !action.in_transaction() {
            let (success, failure) = self.overlapping_outcomes();
            on_success.insert(0, internal(&success));
            on_failure
                .get_or_insert_with(Vec::new)
                .insert(0, internal(&failure));
            return Mode::Lease(self.overlapping_lease());
        }
        let (mode, guard) = match action.in_transaction() {
            true => (Mode::Transaction { scope: Scope::Item }, String::new()),
            false => (
                Mode::Lease(self.lease()),
                " AND lease_id = :lease_id".into(),
            ),
        };
        on_success.insert(0, internal(&self.on_success(&guard)));
        on_failure
            .get_or_insert_with(Vec::new)
            .insert(0, internal(&self.on_failure(&guard)));
        mode
    }
}

/// One of tableq's own statements, which parse.
fn internal(text: &str) -> ParsedStatement {
    match parse_statement(text) {
        Ok(parsed) => parsed,
        Err(e) => unreachable!("a schedule statement does not parse: {e}: {text}"),
    }
}
