//! `schedule = "0 3 * * *"` (or `"every 30s"`): a queue with no select of its own
//! whose due times run once across every copy. Its state is one row of
//! `tableq_schedules`, and the queue is written over that row — the select, the
//! claim's lease and the outcome SQL that re-arms it are tableq's, so a schedule
//! runs through the same claim, action and outcome as any queue:
//! - the select returns the row while its due time has passed (`:scheduled_at`,
//!   the due time; `:run_at`, the claim's time — both UTC `DATETIME(6)`);
//! - an action outside the database runs under a lease (no transaction held
//!   while it runs); an SQL action in the claim's transaction, exactly once;
//! - `[on_success]` moves the row to `:next_run` and counts the due times a long
//!   run passed over as missed; `[on_failure]` sets a retry, with the queue's
//!   backoff, while one fits before the next due time — else the run is missed.
//!
//! tableq's statement runs first, then the user's own `[on_success]` and
//! `[on_failure]` statements, in the same transaction: a run whose due time was
//! lost (its lease, or the row) writes nothing of its own.

mod statements;
pub mod when;

use std::time::Duration;

use crate::config::load::raw::RawQueue;
use crate::config::validate::validator::Validator;
use crate::config::value::cron::Zone;

pub use when::{Finished, Rearm, When};

/// The table that holds every schedule's state.
pub const TABLE: &str = "tableq_schedules";
/// The longest `schedule` (the table keeps it, with its time zone, in 255).
const MAX_TEXT: usize = 160;
/// `catch_up_max` when the file does not set it.
pub const DEFAULT_CATCH_UP_MAX: u32 = 10;
/// How long a run of an action outside the database holds its due time without a
/// renewal: a copy killed mid-run leaves it to another copy after this long.
pub const LEASE: Duration = Duration::from_secs(30);
/// `poll_interval` of a schedule queue when the file does not set it: a copy
/// waiting behind another's run (whose row it cannot see locked) looks again
/// within this long, so that it takes over within a second from a copy killed.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(1);
/// How often a running run renews its hold.
pub const RENEW_EVERY: Duration = Duration::from_secs(10);

/// After the daemon was down: which of the due times it missed run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CatchUp {
    /// None: the next due time after the start.
    None,
    /// The latest missed one, once (the default).
    One,
    /// Each, oldest first, up to `catch_up_max` of the latest.
    All,
}

/// A schedule queue's schedule.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleConfig {
    /// As written: `tableq schedules` shows it, and a changed one re-arms the row.
    pub text: String,
    pub when: When,
    pub catch_up: CatchUp,
    pub catch_up_max: u32,
    /// A run may start while the previous one runs: the claim re-arms the row.
    pub overlap: bool,
}

impl ScheduleConfig {
    /// As `tableq_schedules` keeps it: the expression, with its time zone when not
    /// UTC — a change of either re-arms the row.
    pub fn stored(&self) -> String {
        match &self.when {
            When::Cron(_, zone) if *zone != Zone::UTC => format!("{} ({})", self.text, zone.name()),
            _ => self.text.clone(),
        }
    }
}

/// The select a schedule queue claims with: its row, while its due time has passed
/// and no run holds it.
pub const SELECT: &str = "SELECT due_at AS scheduled_at, UTC_TIMESTAMP(6) AS run_at, attempts, \
     catch_up_until FROM tableq_schedules WHERE name = :queue AND due_at <= UTC_TIMESTAMP(6) \
     AND lease_until <= UTC_TIMESTAMP(6)";
/// Its key: the due time.
pub const KEY: &str = "scheduled_at";

/// The keys a schedule queue writes instead of, or cannot have.
const NOT_WITH_SCHEDULE: &[(&str, &str)] = &[
    ("select", "its select is tableq's, over the schedule's row in tableq_schedules"),
    ("key", "its key is the due time, `scheduled_at`"),
    ("mode", "an SQL action runs in the claim's transaction, any other under a lease"),
    ("lease", "the due time is held by tableq's own lease"),
    ("scope", "each due time is one item"),
    ("failed", "a failed run is retried until the next due time, then recorded as missed (`tableq schedules`)"),
    ("recurring", "the schedule is the file's, not a row's"),
    ("on_release", "a run that did not finish is retried like a failed one"),
];

/// Reads `schedule`, `timezone`, `catch_up`, `catch_up_max` and `overlap`; a
/// schedule queue's select is then [`SELECT`], its key [`KEY`].
pub(crate) fn validate<A>(v: &mut Validator, raw: &mut RawQueue<A>) -> Option<ScheduleConfig> {
    let Some(text) = raw.schedule.clone() else {
        without_schedule(v, raw);
        return None;
    };
    let given = |key: &str| match key {
        "select" => !raw.select.trim().is_empty(),
        "key" => raw.key.is_some(),
        "mode" => raw.mode.is_some(),
        "lease" => raw.lease.is_some(),
        "scope" => raw.scope.is_some(),
        "failed" => raw.failed.is_some(),
        "recurring" => raw.recurring.is_some(),
        "on_release" => raw.on_release.is_some(),
        other => unreachable!("NOT_WITH_SCHEDULE names {other} without reading it"),
    };
    for (key, why) in NOT_WITH_SCHEDULE {
        if given(key) {
            v.error(
                &[key],
                format!("`{key}` does not go with `schedule`: {why}; remove it"),
            );
        }
    }
    let zone = match raw.timezone.as_deref().map(Zone::parse) {
        None => Zone::UTC,
        Some(Ok(zone)) => zone,
        Some(Err(e)) => {
            v.error(&["timezone"], format!("`timezone`: {e}"));
            Zone::UTC
        }
    };
    let catch_up = catch_up(v, raw.catch_up.as_deref());
    let catch_up_max = v.in_range(
        "catch_up_max",
        raw.catch_up_max.or(Some(DEFAULT_CATCH_UP_MAX)),
        1,
        1000,
    ) as u32;
    raw.select = SELECT.to_string();
    raw.key = Some(KEY.to_string());
    raw.poll_interval = raw.poll_interval.or(Some(DEFAULT_POLL_INTERVAL));
    let when = When::parse(&text, zone).and_then(|when| {
        // An expression that names no time to come (`0 0 30 2 *`) would never run.
        let next = when.next_after(std::time::SystemTime::now());
        next.map(|_| when)
            .map_err(|e| format!("cron expression {:?}: {e}", text.trim()))
    });
    match when {
        Ok(_) if text.trim().len() > MAX_TEXT => {
            v.error(
                &["schedule"],
                format!(
                    "`schedule` is longer than {MAX_TEXT} characters: write a shorter expression"
                ),
            );
            None
        }
        Ok(when) => Some(ScheduleConfig {
            text: text.trim().to_string(),
            when,
            catch_up,
            catch_up_max,
            overlap: raw.overlap.unwrap_or(false),
        }),
        Err(why) => {
            v.error(
                &["schedule"],
                format!("`schedule`: {why}; write 5 cron fields (\"0 3 * * *\"), 6 with seconds first, or \"every 30s\""),
            );
            None
        }
    }
}

/// A file without `schedule`: the keys that only go with one, and a select.
fn without_schedule<A>(v: &mut Validator, raw: &RawQueue<A>) {
    let only = [
        ("timezone", raw.timezone.is_some()),
        ("catch_up", raw.catch_up.is_some()),
        ("catch_up_max", raw.catch_up_max.is_some()),
        ("overlap", raw.overlap.is_some()),
    ];
    for (key, given) in only {
        if given {
            v.error(
                &[key],
                format!("`{key}` goes with `schedule = \"…\"` only: add a schedule, or remove it"),
            );
        }
    }
    if raw.select.trim().is_empty() {
        v.error(
            &["select"],
            "the queue has no `select`: write the SELECT that returns the rows waiting for \
             work, or `schedule = \"…\"` for a queue that runs on a schedule",
        );
    }
}

fn catch_up(v: &mut Validator, text: Option<&str>) -> CatchUp {
    match text {
        None | Some("one") => CatchUp::One,
        Some("none") => CatchUp::None,
        Some("all") => CatchUp::All,
        Some(other) => {
            v.error(
                &["catch_up"],
                format!("`catch_up` = {other:?}: use \"none\", \"one\" (the default) or \"all\""),
            );
            CatchUp::One
        }
    }
}
