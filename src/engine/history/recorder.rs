//! The writer of the history: a task with one connection per database, fed the
//! failed attempts through a channel, writing minutes and heartbeats on its ticks.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::options::HistoryOptions;
use crate::db::account;
use crate::db::budget::Place as Seat;
use crate::db::failed::{self, Key};
use crate::db::history::attempts::{self, NewAttempt};
use crate::db::history::copies::{self, Heartbeat, HEARTBEAT_SECONDS};
use crate::db::history::minutes::{self, MinuteRow};
use crate::db::history::{tables, trim, Copy, HistoryConn};
use crate::db::{Database, DbError};
use crate::telemetry::metrics::process::hostname;
use crate::telemetry::stats::history_tap::Kept;
use crate::telemetry::stats::monitor::{Monitor, Setup};
use crate::telemetry::stats::QueueStats;

/// Failed attempts waiting to be written, at most; more are dropped and counted.
const WAITING_ATTEMPTS: usize = 10_000;
/// Failed attempts written on one session before it is given back.
const ATTEMPTS_AT_ONCE: usize = 100;
/// How long connecting to a database may take.
const CONNECT_WITHIN: Duration = Duration::from_secs(10);
/// Minutes a copy keeps in memory, and so can write late after an outage.
const KEPT_MINUTES: u64 = 14;

/// One database the copy's queues run on, and the history's session there while
/// it writes (given back to the connection budget between writes).
struct Place {
    database: Database,
    conn: Option<(HistoryConn, Option<Seat>)>,
    /// The tables are there (created, or found).
    ready: bool,
    /// A refusal to create them was said.
    said_refused: bool,
    /// The tables (or `connect`) whose last write failed: said once each.
    failing: BTreeSet<&'static str>,
    /// Where failed writes are counted.
    errors: Arc<AtomicU64>,
}

pub struct Writer {
    monitor: Arc<Monitor>,
    options: HistoryOptions,
    copy: Copy,
    copy_id: String,
    places: BTreeMap<String, Place>,
    /// The last minute written, by queue.
    written: HashMap<String, u64>,
    started_minute: u64,
    sender: mpsc::Sender<Kept>,
    receiver: mpsc::Receiver<Kept>,
    errors: Arc<AtomicU64>,
    /// Shutdown began: no trim.
    stopping: bool,
}

impl Writer {
    pub fn new(monitor: Arc<Monitor>, options: HistoryOptions) -> Writer {
        let (sender, receiver) = mpsc::channel(WAITING_ATTEMPTS);
        let copy = Copy::this_process(hostname());
        Writer {
            errors: monitor.history_errors(),
            monitor,
            options,
            copy_id: copy.id(),
            copy,
            places: BTreeMap::new(),
            written: HashMap::new(),
            started_minute: minute_now(),
            sender,
            receiver,
            stopping: false,
        }
    }

    /// Keeps the history until `stop`, then writes what is left.
    pub async fn run(mut self, stop: CancellationToken) {
        let every = self.options.every;
        let first_minute = tokio::time::Instant::now() + until_next_write(every);
        let mut minutes = tokio::time::interval_at(first_minute, every);
        let beat_every = Duration::from_secs(HEARTBEAT_SECONDS);
        let mut beats = tokio::time::interval(beat_every);
        loop {
            tokio::select! {
                // The ticks before the attempts: a flood of failures must not
                // starve the heartbeat and the minutes.
                biased;
                _ = stop.cancelled() => break,
                _ = minutes.tick() => self.minutes(every < Duration::from_secs(60)).await,
                _ = beats.tick() => self.beat().await,
                Some(kept) = self.receiver.recv() => self.attempts(kept).await,
            }
            self.give_up().await;
        }
        // The minute under way first (one statement per database), then the copy's
        // leave, then what attempts are left: the shutdown's time may run out.
        self.stopping = true;
        self.minutes(true).await;
        self.leave().await;
        self.receiver.close();
        while let Ok(kept) = self.receiver.try_recv() {
            self.attempt(kept).await;
        }
        self.give_up().await;
    }

    /// `first`, and the attempts that came after it meanwhile (a few at a time, so
    /// a burst of failures shares a session).
    async fn attempts(&mut self, first: Kept) {
        self.attempt(first).await;
        for _ in 0..ATTEMPTS_AT_ONCE {
            match self.receiver.try_recv() {
                Ok(kept) => self.attempt(kept).await,
                Err(_) => return,
            }
        }
    }

    /// Every session given back to the connection budget, until the next writes.
    async fn give_up(&mut self) {
        for place in self.places.values_mut() {
            if let Some((conn, seat)) = place.conn.take() {
                conn.give_up(&place.database, seat).await;
            }
        }
    }

    /// The running queues, each with its stats and setup.
    fn queues(&self) -> Vec<(Arc<QueueStats>, Arc<Setup>)> {
        self.monitor
            .queues()
            .into_iter()
            .filter(|view| view.running)
            .filter_map(|view| self.monitor.running(&view.name))
            .collect()
    }

    /// The heartbeat: every queue's failures taken, each database's tables made
    /// ready, and the copy said alive there.
    async fn beat(&mut self) {
        let queues = self.queues();
        let mut by_place: BTreeMap<String, (Database, Vec<String>, u64)> = BTreeMap::new();
        for (stats, setup) in &queues {
            if !stats.observed.history.connected() {
                let errors = self.errors.clone();
                let sender = self.sender.clone();
                stats
                    .observed
                    .history
                    .connect(&setup.config.name, sender, errors);
            }
            let place = by_place
                .entry(place_name(&setup.database))
                .or_insert_with(|| (setup.database.clone(), Vec::new(), 0));
            place.1.push(setup.config.name.clone());
            place.2 += stats.observed.busy_workers() as u64;
        }
        let (copy, console) = (self.copy.clone(), self.options.console.clone());
        for (name, (database, queues, in_flight)) in by_place {
            let beat = Heartbeat {
                copy: &copy,
                version: env!("CARGO_PKG_VERSION"),
                queues: &queues,
                in_flight,
                console: console.as_deref(),
            };
            let place = self.place(&name, &database);
            let Some(conn) = place.ready_conn().await else {
                continue;
            };
            let written = copies::beat(conn, &beat).await;
            place.written(written, "tableq_copies");
        }
    }

    fn place(&mut self, name: &str, database: &Database) -> &mut Place {
        let errors = &self.errors;
        self.places
            .entry(name.to_string())
            .or_insert_with(|| Place {
                database: database.clone(),
                conn: None,
                ready: false,
                said_refused: false,
                failing: BTreeSet::new(),
                errors: errors.clone(),
            })
    }

    /// Writes each queue's minutes not written yet, up to the last whole one (and
    /// the one under way, if `with_current`), then trims if it is this copy's turn.
    async fn minutes(&mut self, with_current: bool) {
        let now = minute_now();
        let through = if with_current { now } else { now - 1 };
        let mut by_place: BTreeMap<String, (Database, Vec<MinuteRow>)> = BTreeMap::new();
        for (stats, setup) in self.queues() {
            let name = &setup.config.name;
            let after = self.written.get(name).copied();
            let after = after.unwrap_or(self.started_minute.saturating_sub(1));
            let rows = minute_rows(name, &stats, after, through);
            by_place
                .entry(place_name(&setup.database))
                .or_insert_with(|| (setup.database.clone(), Vec::new()))
                .1
                .extend(rows);
        }
        let retention = self.options.retention;
        let trims = !self.stopping;
        for (name, (database, rows)) in by_place {
            let copy_id = self.copy_id.clone();
            let place = self.place(&name, &database);
            let Some(conn) = place.ready_conn().await else {
                continue;
            };
            let written = minutes::write(conn, &copy_id, &rows).await;
            let ok = written.is_ok();
            place.written(written, "tableq_history");
            if ok && trims {
                if let Some(conn) = place.ready_conn().await {
                    let trimmed = trim::trim(conn, retention).await.map(|_| ());
                    place.written(trimmed, "tableq_chores");
                }
            }
            if ok {
                for row in rows {
                    // The minute under way is written again next time.
                    let last = if row.minute == now {
                        now - 1
                    } else {
                        row.minute
                    };
                    let kept = self.written.entry(row.queue).or_default();
                    *kept = (*kept).max(last);
                }
            }
        }
    }

    /// Writes a failed attempt, after looking whether its row gave up.
    async fn attempt(&mut self, kept: Kept) {
        let Some((_, setup)) = self.monitor.running(&kept.queue) else {
            return;
        };
        let copy_id = self.copy_id.clone();
        let place = self.place(&place_name(&setup.database), &setup.database);
        let Some(conn) = place.ready_conn().await else {
            return;
        };
        let attempt = &kept.attempt;
        let gave_up = match attempt.gave_up {
            Some(gave_up) => gave_up,
            None if attempt.recorded => {
                let key = Key::from_text(&attempt.key);
                let found = failed::gave_up(conn.conn(), &setup.config, key.value()).await;
                found.unwrap_or(false)
            }
            None => false,
        };
        let new = NewAttempt {
            queue: &setup.config.name,
            key: &attempt.key,
            at_micros: unix_micros(attempt.at),
            copy: &copy_id,
            ms: attempt.ms.unwrap_or(0),
            status: attempt.status,
            kind: attempt.kind.as_deref(),
            error: &attempt.error,
            gave_up,
        };
        let mut written = attempts::write(conn, &new).await;
        if let (Ok(()), true) = (&written, gave_up) {
            let minute = unix_micros(attempt.at) / 60_000_000;
            written = minutes::add_gave_up(conn, &copy_id, &setup.config.name, minute).await;
        }
        place.written(written, "tableq_attempts");
    }

    /// The copy stopped: no longer listed among the copies.
    async fn leave(&mut self) {
        for place in self.places.values_mut() {
            if let Some(conn) = place.ready_conn().await {
                let _ = copies::leave(conn, &self.copy).await;
            }
        }
    }
}

impl Place {
    /// The session, connected and the tables ready; `None` (said once) if not.
    async fn ready_conn(&mut self) -> Option<&mut HistoryConn> {
        if self.conn.is_none() {
            match HistoryConn::seated(&self.database, CONNECT_WITHIN).await {
                Ok(seated) => {
                    self.conn = Some(seated);
                    self.failing.remove("connect");
                }
                Err(e) => {
                    self.written(Err(e), "connect");
                    return None;
                }
            }
        }
        if !self.ready {
            self.make_ready().await;
        }
        match self.ready {
            true => self.conn.as_mut().map(|(conn, _)| conn),
            false => None,
        }
    }

    /// Creates the tables, or says once which grant the account lacks.
    async fn make_ready(&mut self) {
        let Some((conn, _)) = self.conn.as_mut() else {
            return;
        };
        match tables::create(conn).await {
            Ok(()) => {
                self.ready = true;
                if self.said_refused {
                    info!(database = %self.database.name(), "the history tables are there now: this copy keeps its history");
                }
            }
            Err(e) => {
                if !self.said_refused {
                    let account = account::current(conn.conn())
                        .await
                        .unwrap_or_else(|_| "its account".into());
                    let grant = tables::grant(self.database.name(), &account);
                    warn!(database = %self.database.name(), error = %e,
                        "this copy keeps no history (the console's charts, failed attempts and copies): it may not create the tableq_* history tables; {grant}; or run with --history off to say nothing");
                    self.said_refused = true;
                }
            }
        }
    }

    /// A write's end: a failure counted and said once per table until a write
    /// to it succeeds again; a session that broke is dropped (the next write
    /// connects again).
    fn written(&mut self, written: Result<(), DbError>, table: &'static str) {
        let e = match written {
            Ok(()) => {
                self.failing.remove(table);
                return;
            }
            Err(e) => e,
        };
        self.errors.fetch_add(1, Ordering::Relaxed);
        // A server's error leaves the session as it was; any other broke it.
        if e.server_code().is_none() {
            self.conn = None;
            self.ready = false;
        }
        if self.failing.insert(table) {
            warn!(database = %self.database.name(), table, error = %e,
                "cannot write the history: the queues go on; failed writes are counted in tableq_history_write_errors_total (said again only after a write to it succeeded)");
        }
    }
}

/// `queue`'s minutes after `after` through `through`, as `stats` kept them: the
/// minutes with nothing in them left out, but the last (it carries the backlog).
fn minute_rows(queue: &str, stats: &QueueStats, after: u64, through: u64) -> Vec<MinuteRow> {
    let from = (after + 1).max(through.saturating_sub(KEPT_MINUTES));
    let backlog = stats.observed.backlog();
    (from..=through)
        .filter_map(|minute| {
            let counted = stats.observed.minute(minute)?;
            let sketch = stats.observed.action_recent.minute_json(minute);
            let last = minute == through;
            let empty = counted.done + counted.failed + counted.returned + counted.held_back == 0;
            if empty && sketch.is_none() && !last {
                return None;
            }
            Some(MinuteRow {
                queue: queue.to_string(),
                minute,
                done: counted.done,
                failed: counted.failed,
                returned: counted.returned,
                held_back: counted.held_back,
                sketch,
                backlog: backlog.waiting.filter(|_| last).map(|n| n as u64),
                lag_s: backlog.oldest_seconds.filter(|_| last),
            })
        })
        .collect()
}

/// A database's name in the copy's map: its servers and schema.
fn place_name(database: &Database) -> String {
    format!("{}/{}", database.server(), database.name())
}

/// The wait until the first minutes are written: just past the next minute (a
/// minute's counts are whole by then), or `every` when it is shorter than one.
fn until_next_write(every: Duration) -> Duration {
    if every < Duration::from_secs(60) {
        return every;
    }
    let into = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let into_minute = Duration::from_millis((into.as_millis() % 60_000) as u64);
    Duration::from_secs(61) - into_minute
}

fn minute_now() -> u64 {
    unix_micros(SystemTime::now()) / 60_000_000
}

fn unix_micros(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_micros() as u64
}
