//! A schedule queue on the status page: its schedule, its next due time, its last
//! run and how it ended, the due times it missed — from its row of
//! `tableq_schedules` as the background count last read it (`html` says it under
//! the queue's name).

use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::config::value::cron::parse_utc_datetime;
use crate::db::schedules::ScheduleRow;

/// How much of it `/status.json` holds (as much as a failure of its list).
const ERROR_KEPT: usize = 500;

/// A schedule queue, as `/status.json` shows it; times in seconds since the epoch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScheduleStatus {
    /// As the file writes it.
    pub schedule: String,
    /// The due time it waits for (or a failed run's retry).
    pub next_due_at: Option<u64>,
    /// A lease holds it: a run of an action outside the database is under way.
    pub running: bool,
    /// Runs that succeeded, and due times that did not run, across every copy.
    pub runs: u64,
    pub missed: u64,
    pub last_missed_at: Option<u64>,
    /// The due time the last run was for, and when it finished.
    pub last_scheduled_at: Option<u64>,
    pub last_finished_at: Option<u64>,
    /// `done` or `failed`, and why it failed.
    pub last_outcome: Option<String>,
    pub last_error: Option<String>,
}

impl ScheduleStatus {
    pub fn of(row: &ScheduleRow) -> ScheduleStatus {
        let at = |text: Option<&str>| unix(parse_utc_datetime(text?)?);
        ScheduleStatus {
            schedule: row.schedule.clone(),
            next_due_at: at(Some(&row.due_at)),
            running: row.running,
            runs: row.runs,
            missed: row.missed,
            last_missed_at: at(row.last_missed_at.as_deref()),
            last_scheduled_at: at(row.last_scheduled_at.as_deref()),
            last_finished_at: at(row.last_finished_at.as_deref()),
            last_outcome: row.last_outcome.clone(),
            last_error: row
                .last_error
                .as_ref()
                .map(|e| e.chars().take(ERROR_KEPT).collect()),
        }
    }
}

fn unix(at: SystemTime) -> Option<u64> {
    Some(at.duration_since(UNIX_EPOCH).ok()?.as_secs())
}
