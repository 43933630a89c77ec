//! `tableq schedules`: each schedule queue of the files, as its row of
//! `tableq_schedules` says it is now — its next due time, its last run and how it
//! ended, its runs and the due times it missed — as a table, or one JSON array.

use std::fmt::Write as _;

use serde::Serialize;

use super::cli::{SchedulesArgs, SchedulesFormat};
use super::failure::Failure;
use super::operate::{queues, runtime};
use super::stdout;
use crate::config::queue::schedule::When;
use crate::config::QueueConfig;
use crate::db::schedules::{read_from, ScheduleRow};
use crate::db::Database;

/// How much of the last error the table shows (JSON has all of it).
const ERROR_SHOWN: usize = 60;

/// `tableq schedules`.
pub async fn schedules_command(args: SchedulesArgs, url: Option<&str>) -> Result<(), Failure> {
    let all = queues(args.paths, args.queues, url)?;
    let scheduled: Vec<_> = all.iter().filter(|(q, _)| q.schedule.is_some()).collect();
    if scheduled.is_empty() {
        let names: Vec<&str> = all.iter().map(|(q, _)| q.name.as_str()).collect();
        return Err(Failure::Usage(format!(
            "no schedule queue here ({} {}): a schedule queue has `schedule = \"…\"` \
             instead of a select (see the book's \"Recurring work\")",
            if names.len() == 1 { "queue" } else { "queues" },
            names.join(", ")
        )));
    }
    let mut shown = Vec::with_capacity(scheduled.len());
    for (queue, database) in scheduled {
        shown.push(Shown::of(queue, read_row(queue, database).await?));
    }
    match args.format {
        SchedulesFormat::Json => {
            stdout::line(serde_json::to_string_pretty(&shown).unwrap_or_default())
        }
        SchedulesFormat::Text => stdout::print(&table(&shown)),
    }
}

/// The queue's row; `None` before any copy opened the queue.
async fn read_row(
    queue: &QueueConfig,
    database: &Database,
) -> Result<Option<ScheduleRow>, Failure> {
    let names = [queue.name.as_str()];
    let rows = read_from(database, &names, queue.database_timeout)
        .await
        .map_err(|e| runtime(queue, database, "reading tableq_schedules", &e))?;
    Ok(rows.into_iter().next())
}

/// One schedule, as the command shows it; times in UTC, RFC 3339.
#[derive(Debug, Serialize)]
struct Shown {
    queue: String,
    schedule: String,
    /// A cron schedule's time zone; `null` for `every`.
    timezone: Option<&'static str>,
    /// `waiting` for its due time, `due` (its time has passed: being claimed, run
    /// in a transaction by an SQL action, or no copy runs it), `running` (a lease
    /// holds it), or `not_started` (no copy has opened it: no row yet).
    state: &'static str,
    next_due: Option<String>,
    runs: u64,
    missed: u64,
    last_missed_at: Option<String>,
    last_scheduled_at: Option<String>,
    last_run_at: Option<String>,
    last_finished_at: Option<String>,
    /// `done` or `failed`.
    last_outcome: Option<String>,
    last_error: Option<String>,
    last_success_at: Option<String>,
    /// Failed tries of the due time it waits for (retried within its period).
    attempts: u32,
}

impl Shown {
    /// A schedule no copy has opened yet: no row.
    fn not_started(queue: String, schedule: String, timezone: Option<&'static str>) -> Shown {
        Shown {
            queue,
            schedule,
            timezone,
            state: "not_started",
            next_due: None,
            runs: 0,
            missed: 0,
            last_missed_at: None,
            last_scheduled_at: None,
            last_run_at: None,
            last_finished_at: None,
            last_outcome: None,
            last_error: None,
            last_success_at: None,
            attempts: 0,
        }
    }

    fn of(queue: &QueueConfig, row: Option<ScheduleRow>) -> Shown {
        let (text, timezone) = match &queue.schedule {
            Some(schedule) => (
                schedule.text.clone(),
                match &schedule.when {
                    When::Cron(_, zone) => Some(zone.name()),
                    When::Every(_) => None,
                },
            ),
            None => (String::new(), None),
        };
        let Some(row) = row else {
            return Shown::not_started(queue.name.clone(), text, timezone);
        };
        let time = |t: Option<String>| t.map(|t| rfc3339(&t));
        Shown {
            queue: queue.name.clone(),
            schedule: text,
            timezone,
            state: match (row.running, row.due) {
                (true, _) => "running",
                (false, true) => "due",
                (false, false) => "waiting",
            },
            next_due: Some(rfc3339(&row.due_at)),
            runs: row.runs,
            missed: row.missed,
            last_missed_at: time(row.last_missed_at),
            last_scheduled_at: time(row.last_scheduled_at),
            last_run_at: time(row.last_run_at),
            last_finished_at: time(row.last_finished_at),
            last_outcome: row.last_outcome,
            last_error: row.last_error,
            last_success_at: time(row.last_success_at),
            attempts: row.attempts,
        }
    }
}

/// `2026-12-07 03:00:00.000000` (UTC, as the table holds it) as
/// `2026-12-07T03:00:00.000000Z`.
fn rfc3339(utc: &str) -> String {
    format!("{}Z", utc.trim().replacen(' ', "T", 1))
}

/// `2026-12-07T03:00:00.250000Z` as `2026-12-07 03:00:00.25`: to the second, and
/// its fraction only when there is one.
fn readable(at: &str) -> String {
    let at = at.trim_end_matches('Z').replacen('T', " ", 1);
    match at.split_once('.') {
        Some((whole, fraction)) => match fraction.trim_end_matches('0') {
            "" => whole.to_string(),
            kept => format!("{whole}.{kept}"),
        },
        None => at,
    }
}

/// The table: a header, then a line a schedule, its columns aligned.
fn table(shown: &[Shown]) -> String {
    let header = [
        "QUEUE",
        "SCHEDULE",
        "STATE",
        "NEXT DUE (UTC)",
        "RUNS",
        "MISSED",
        "LAST RUN (UTC)",
        "OUTCOME",
    ];
    let mut lines: Vec<Vec<String>> = vec![header.iter().map(|h| h.to_string()).collect()];
    lines.extend(shown.iter().map(cells));
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            lines
                .iter()
                .map(|l| l[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for line in &lines {
        let mut text = String::new();
        for (i, cell) in line.iter().enumerate() {
            let _ = write!(text, "{cell:<width$}  ", width = widths[i]);
        }
        out.push_str(text.trim_end());
        out.push('\n');
    }
    out
}

/// One schedule's cells.
fn cells(s: &Shown) -> Vec<String> {
    let schedule = match s.timezone {
        Some(zone) if zone != "UTC" => format!("{} ({zone})", s.schedule),
        _ => s.schedule.clone(),
    };
    let missed = match &s.last_missed_at {
        Some(at) if s.missed > 0 => format!("{} (last {})", s.missed, readable(at)),
        _ => s.missed.to_string(),
    };
    let next = s.next_due.as_deref().map(readable).unwrap_or("–".into());
    vec![
        s.queue.clone(),
        schedule,
        s.state.replace('_', " "),
        next,
        s.runs.to_string(),
        missed,
        last_run(s),
        outcome(s),
    ]
}

/// `2026-12-07 03:00:00, started +250ms, took 1.3s`: the due time it ran for, how
/// late it started and how long it took; `–` before the first.
fn last_run(s: &Shown) -> String {
    let Some(scheduled) = &s.last_scheduled_at else {
        return "–".into();
    };
    let seconds = |from: &Option<String>, to: &Option<String>| -> Option<f64> {
        let at = |t: &Option<String>| {
            let t = t.as_deref()?.trim_end_matches('Z');
            crate::config::value::cron::parse_utc_datetime(t)
        };
        let (from, to) = (at(from)?, at(to)?);
        Some(match to.duration_since(from) {
            Ok(d) => d.as_secs_f64(),
            Err(e) => -e.duration().as_secs_f64(),
        })
    };
    let mut text = readable(scheduled);
    if let Some(late) = seconds(&s.last_scheduled_at, &s.last_run_at) {
        let sign = if late < 0.0 { "-" } else { "+" };
        let _ = write!(text, ", started {sign}{}", short(late.abs()));
    }
    if let Some(took) = seconds(&s.last_run_at, &s.last_finished_at) {
        let _ = write!(text, ", took {}", short(took.max(0.0)));
    }
    text
}

/// `4ms`, `2.5s`, `3m 20s`.
fn short(seconds: f64) -> String {
    match seconds {
        s if s < 1.0 => format!("{}ms", (s * 1000.0).round()),
        s if s < 60.0 => format!("{s:.1}s"),
        s => humantime::format_duration(std::time::Duration::from_secs(s as u64)).to_string(),
    }
}

/// `done`, or `failed: why` (clipped, on one line); with the tries of a retry
/// waiting.
fn outcome(s: &Shown) -> String {
    let mut text = match (&s.last_outcome, &s.last_error) {
        (None, _) => "–".to_string(),
        (Some(outcome), Some(error)) if outcome == "failed" => {
            let one_line = error.split_whitespace().collect::<Vec<_>>().join(" ");
            let mut clipped: String = one_line.chars().take(ERROR_SHOWN).collect();
            if one_line.chars().count() > ERROR_SHOWN {
                clipped.push('…');
            }
            format!("failed: {clipped}")
        }
        (Some(outcome), _) => outcome.clone(),
    };
    if s.attempts > 0 {
        let _ = write!(text, " (retrying: {} failed)", s.attempts);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown() -> Shown {
        Shown {
            queue: "nightly".into(),
            schedule: "0 3 * * *".into(),
            timezone: Some("Europe/Berlin"),
            state: "waiting",
            next_due: Some("2026-12-08T02:00:00.000000Z".into()),
            runs: 41,
            missed: 2,
            last_missed_at: Some("2026-12-05T02:00:01.500000Z".into()),
            last_scheduled_at: Some("2026-12-07T02:00:00.000000Z".into()),
            last_run_at: Some("2026-12-07T02:00:00.250000Z".into()),
            last_finished_at: Some("2026-12-07T02:00:12.350000Z".into()),
            last_outcome: Some("failed".into()),
            last_error: Some(format!("exit status 1: {}", "x".repeat(100))),
            last_success_at: None,
            attempts: 1,
        }
    }

    #[test]
    fn a_line_says_the_last_run_its_lateness_its_length_and_a_clipped_error() {
        let cells = cells(&shown());
        assert_eq!(cells[1], "0 3 * * * (Europe/Berlin)");
        assert_eq!(cells[3], "2026-12-08 02:00:00");
        assert_eq!(cells[5], "2 (last 2026-12-05 02:00:01.5)");
        assert_eq!(cells[6], "2026-12-07 02:00:00, started +250ms, took 12.1s");
        assert!(
            cells[7].starts_with("failed: exit status 1: xxx"),
            "{}",
            cells[7]
        );
        assert!(cells[7].ends_with("… (retrying: 1 failed)"), "{}", cells[7]);
        assert_eq!(cells[7].chars().count(), "failed: ".len() + 60 + 1 + 21);
    }

    #[test]
    fn the_table_aligns_its_columns_and_a_schedule_not_started_shows_dashes() {
        let not_started = Shown::not_started("q".into(), "every 30s".into(), None);
        let text = table(&[shown(), not_started]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        let column = |line: &str| line.find("NEXT DUE").or_else(|| line.find("2026-12-08"));
        assert_eq!(column(lines[0]), column(lines[1]));
        assert!(
            lines[2].starts_with("q        every 30s                  not started  –"),
            "{}",
            lines[2]
        );
    }
}
