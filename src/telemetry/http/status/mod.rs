//! The status page: at `/`, one table of the queues — workers, the last 15 minutes
//! minute by minute, the backlog and its age, action times — and under each its last
//! failures; at `/status.json`, the same data. Read-only, from memory (no query),
//! server-rendered with no script and no outside asset: it works offline, behind a
//! proxy, under a strict Content-Security-Policy, and refreshes itself. A queue's
//! page adds what the console read from the history tables (its charts, its failed
//! rows); `/copies` is the fleet, and each failed row has its attempts' page.

mod charts;
mod failed_rows;
mod fleet;
mod html;
mod queue_page;
mod response;
mod schedule;
mod sparkline;

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::db::pause::Paused;
use crate::telemetry::metrics::process::{hostname, ProcessStats};
use crate::telemetry::stats::by_label::LabelCounts;
use crate::telemetry::stats::failure_kinds::FailureKind;
use crate::telemetry::stats::in_flight::RunView;
use crate::telemetry::stats::monitor::{Monitor, QueueView};
use crate::telemetry::stats::observed::{Failure, Minute};
use crate::telemetry::stats::recent::Percentiles;
use crate::telemetry::stats::{CircuitOpen, QueueStats, WakeStatus};

pub use charts::since_asked;
pub use failed_rows::{attempts_page, FailedRows};
pub use fleet::fleet_page;
pub use queue_page::{confirm_discard_page, inspect_page, sign_in_page, PageHistory};
pub use response::{html_response, json_response, page_asked, page_response, queue_page_response};
pub use schedule::ScheduleStatus;

/// How many queues one page shows: a process with thousands of queues still
/// answers `/` and `/status.json` quickly, a page at a time.
pub const PER_PAGE: usize = 50;

/// Who looks at a page: whether the console can act at all (a token was given),
/// the CSRF token of a signed-in browser (`None`: not signed in, no buttons), and
/// what its last action did.
#[derive(Debug, Clone, Default)]
pub struct Viewer {
    pub console: bool,
    pub csrf: Option<String>,
    pub notice: Option<String>,
}

/// Everything the page shows.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    pub version: &'static str,
    /// When this was read, in seconds since the epoch.
    pub generated_at: u64,
    /// Which copy this is: several run side by side.
    pub host: String,
    pub pid: u32,
    pub uptime_seconds: Option<u64>,
    /// Every queue of the process, counted.
    pub summary: Summary,
    /// Which page of the queues this is (`?page=N`, from 1).
    pub page: usize,
    pub pages: usize,
    /// This page's queues, by name.
    pub queues: Vec<QueueStatus>,
}

/// The whole process at a glance, whatever the page.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub queues: usize,
    pub running: usize,
    /// Queues configured and not started yet: `run` is opening their first
    /// connection and looking at their claim.
    pub starting: usize,
    /// Running queues whose circuit is not closed.
    pub circuit_not_closed: usize,
    /// Running queues that stopped claiming by themselves (a loop).
    pub stopped_claiming: usize,
    /// Running queues paused by `tableq pause`.
    pub paused: usize,
    pub workers: usize,
    pub busy: usize,
}

/// One label's items.
#[derive(Debug, Clone, Serialize)]
pub struct LabelStatus {
    pub label: String,
    #[serde(flatten)]
    pub counts: LabelCounts,
}

/// One queue's line, and its failures.
#[derive(Debug, Clone, Serialize)]
pub struct QueueStatus {
    pub name: String,
    /// `starting` (configured, its first connection and the look at its claim
    /// under way), `running`, or `stopped`.
    pub state: &'static str,
    pub running: bool,
    pub workers: usize,
    pub connected: usize,
    pub busy: usize,
    pub done: u64,
    pub failed: u64,
    /// Left waiting: no `[on_failure]`, outcome SQL that failed, the circuit, a
    /// stop — not counting `held_back`.
    pub returned: u64,
    /// Claimed and handed back untouched: their `[concurrency]` key was at its
    /// limit (waiting their turn, not failed).
    pub held_back: u64,
    pub rolled_back: u64,
    /// Lease mode: leases lost while their item was worked on (counted in
    /// `returned` too).
    pub leases_lost: u64,
    /// The circuit breaker: `closed` (also when it is off), `open` or `half_open`.
    pub circuit: &'static str,
    /// While the circuit is not closed: since when, why, the next probe.
    pub circuit_open: Option<CircuitOpenStatus>,
    /// Whether the queue claims rows; when it stopped by itself, why
    /// (`stopped_claiming`: `looping`).
    pub claiming: bool,
    pub stopped_claiming: Option<&'static str>,
    /// Paused by `tableq pause` (claims nothing until resumed); `null` when not.
    pub paused: Option<PauseStatus>,
    /// Its database refuses writes, and why (`read-only`, `not synced`,
    /// `permission denied`): it claims nothing until writes work; `null` when not.
    pub database_refuses: Option<&'static str>,
    /// The database host its connections go to, when its URL lists several
    /// (`db2:3306`); `null` for a URL of one host.
    pub database_host: Option<String>,
    /// Where its wake-ups come from: `{"source": "binlog"}`, or `poll` with why.
    pub wake: WakeStatus,
    /// Wake-ups from the binary log since the daemon started.
    pub wake_events: u64,
    /// Waiting rows, as of the last background count (none yet: `null`).
    pub waiting: Option<usize>,
    /// More rows wait than `waiting_cap`.
    pub waiting_capped: bool,
    pub oldest_waiting_seconds: Option<f64>,
    /// Rows that gave up (`[failed] select`), as of the last count; `null` without
    /// `[failed]`.
    pub gave_up: Option<usize>,
    /// A schedule queue (`schedule = "…"`): its row of `tableq_schedules`, as of
    /// the last count; `null` for other queues.
    pub schedule: Option<ScheduleStatus>,
    /// The action's p50 and p99 over the last 5 and the last 15 minutes.
    pub action_recent: Vec<Percentiles>,
    /// Items by the queue's `label` column (a job's class), when it has one:
    /// `[{"label": "App\\Jobs\\SendInvoice", "done": 3, "failed": 0, "returned": 1}]`.
    pub by_label: Vec<LabelStatus>,
    /// The action's runs under way, and the oldest few of them (keys, since when,
    /// lease mode's last progress line).
    pub in_flight: usize,
    pub in_flight_runs: Vec<RunView>,
    /// The last 15 minutes, oldest first.
    pub minutes: Vec<Minute>,
    /// The last failures, newest first.
    pub failures: Vec<Failure>,
    /// The failures since the process started, grouped by kind (the error text with
    /// numbers, ids and quoted values masked) and status, the latest seen first;
    /// each with a few of its keys and one full example.
    pub failure_groups: Vec<FailureKind>,
}

/// A circuit that is not closed, as `/status.json` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CircuitOpenStatus {
    /// Unix times, in seconds: when it opened (the first time, if probes failed
    /// since), and when the next probe is due (`null` while one runs).
    pub since_at: u64,
    pub reason: String,
    pub next_probe_at: Option<u64>,
}

impl CircuitOpenStatus {
    fn of(open: &CircuitOpen) -> CircuitOpenStatus {
        CircuitOpenStatus {
            since_at: unix(open.since),
            reason: open.why.clone(),
            next_probe_at: open.next_probe.map(unix),
        }
    }
}

/// A time in seconds since the epoch.
fn unix(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs()
}

/// How many runs under way a queue's line lists.
const IN_FLIGHT_LISTED: usize = 10;

/// A pause in force, as `/status.json` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PauseStatus {
    pub reason: String,
    /// The operator's login and host (`CURRENT_USER()` of `tableq pause`).
    pub by: String,
    /// Unix times, in seconds; `until_at` is `null` for a pause until resumed.
    pub since_at: u64,
    pub until_at: Option<u64>,
}

impl PauseStatus {
    fn of(paused: &Paused) -> PauseStatus {
        PauseStatus {
            reason: paused.reason.clone(),
            by: paused.by.clone(),
            since_at: unix(paused.since),
            until_at: paused.until.map(unix),
        }
    }
}

/// How many keys a failure kind lists on the page.
const GROUP_KEYS: usize = 5;

/// A queue's failure kinds, each with the first few of its keys.
fn kinds_listed(stats: &QueueStats) -> Vec<FailureKind> {
    let mut kinds = stats.observed.failure_kinds();
    for kind in &mut kinds {
        kind.keys.truncate(GROUP_KEYS);
    }
    kinds
}

impl Status {
    /// Reads the summary of every queue from `monitor`, and the numbers of the
    /// queues on `page` (from 1; past the last, the last).
    pub fn of(monitor: &Monitor, page: usize) -> Status {
        let watched = monitor.watched();
        let pages = watched.len().div_ceil(PER_PAGE).max(1);
        let page = page.clamp(1, pages);
        let mut status = Status::of_page(&watched, page, pages);
        status.queues = watched
            .iter()
            .skip((page - 1) * PER_PAGE)
            .take(PER_PAGE)
            .map(|(view, stats)| QueueStatus::of(view, stats))
            .collect();
        status
    }

    /// The process and its summary, without queues yet.
    fn of_page(watched: &[(QueueView, Arc<QueueStats>)], page: usize, pages: usize) -> Status {
        let generated_at = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        let started = ProcessStats::read().map(|p| p.start_time as u64);
        Status {
            version: env!("CARGO_PKG_VERSION"),
            generated_at,
            host: hostname(),
            pid: std::process::id(),
            uptime_seconds: started.map(|at| generated_at.saturating_sub(at)),
            summary: Summary::of(watched),
            page,
            pages,
            queues: Vec::new(),
        }
    }
}

impl Status {
    /// The same for queue `name` alone (`None`: no such queue here).
    pub fn of_queue(monitor: &Monitor, name: &str) -> Option<Status> {
        let watched = monitor.watched();
        let (view, stats) = watched.iter().find(|(view, _)| view.name == name)?;
        let mut status = Status::of_page(&watched, 1, 1);
        status.queues = vec![QueueStatus::of(view, stats)];
        Some(status)
    }
}

impl Summary {
    fn of(watched: &[(QueueView, Arc<QueueStats>)]) -> Summary {
        let mut summary = Summary {
            queues: watched.len(),
            ..Summary::default()
        };
        summary.starting = watched.iter().filter(|(view, _)| view.starting).count();
        for (view, stats) in watched.iter().filter(|(view, _)| view.running) {
            summary.running += 1;
            summary.circuit_not_closed += usize::from(view.circuit.name() != "closed");
            summary.stopped_claiming += usize::from(view.stopped_claiming.is_some());
            summary.paused += usize::from(view.paused.is_some());
            summary.workers += view.workers;
            summary.busy += stats.observed.busy_workers();
        }
        summary
    }
}

impl QueueStatus {
    fn of(view: &QueueView, stats: &Arc<QueueStats>) -> QueueStatus {
        let observed = &stats.observed;
        let backlog = observed.backlog();
        let failures = observed.failures();
        let state = match (view.starting, view.running) {
            (true, _) => "starting",
            (false, true) => "running",
            (false, false) => "stopped",
        };
        QueueStatus {
            name: view.name.clone(),
            state,
            running: view.running,
            workers: view.workers,
            connected: view.connected,
            busy: observed.busy_workers(),
            done: view.counts.done,
            failed: view.counts.failed,
            returned: view.counts.returned,
            held_back: observed.limited.held_back_total(),
            rolled_back: observed.rolled_back(),
            leases_lost: view.counts.leases_lost,
            circuit: view.circuit.name(),
            circuit_open: stats.circuit_open().as_ref().map(CircuitOpenStatus::of),
            claiming: view.stopped_claiming.is_none(),
            stopped_claiming: view.stopped_claiming,
            paused: view.paused.as_ref().map(PauseStatus::of),
            database_refuses: view.refusing,
            database_host: view.database_host.clone(),
            wake: stats.wake(),
            wake_events: view.counts.wake_events,
            waiting: backlog.waiting,
            waiting_capped: backlog.capped,
            oldest_waiting_seconds: backlog.oldest_seconds,
            gave_up: backlog.gave_up,
            schedule: observed.schedule().as_ref().map(ScheduleStatus::of),
            action_recent: observed.action_recent.windows(),
            in_flight: observed.in_flight.count(),
            in_flight_runs: observed.in_flight.oldest(IN_FLIGHT_LISTED),
            minutes: observed.minutes(),
            failure_groups: kinds_listed(stats),
            by_label: observed
                .by_label
                .all()
                .into_iter()
                .map(|(label, counts)| LabelStatus { label, counts })
                .collect(),
            failures,
        }
    }
}
