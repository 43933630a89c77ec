//! The due-time timer, a source of wake-ups ([`crate::engine::wake`]). Rows due by
//! time alone (`send_after <= NOW()`, a retry's `retry_at`, an expired lease):
//! nothing commits when one falls due, so nothing else wakes the queue. The
//! watcher of an idle queue therefore asks the server when the next such row is due
//! ([`crate::sql::due`] reads the select's time conditions; [`crate::db::due`]
//! asks), and claims then — or at a wake-up, or its poll, whichever is first. Where
//! the select's clock cannot be read, the queue polls at least every
//! `poll_interval`, binary log or not.
//!
//! The answer is kept: every wait of the watcher ends by the next due time known,
//! the short second looks after a wake-up included (a look that outlasted it made
//! rows due a second apart later by each look's length, every second). It is asked
//! again before any wait longer than [`ASK_ABOVE`], and before the first wait after
//! the queue's tables changed (a row may have come with an earlier due time).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;
use tracing::{debug, warn};

use crate::config::QueueConfig;
use crate::db::due::DueQuery;
use crate::db::DbError;
use crate::engine::wake::source::{Cut, WakeSource};
use crate::lock::lock;
use crate::sql::due::{due_times, DueTimes};

/// A wait up to this long is not worth a question of its own: the next due time
/// already known ends it, and the claim after it is soon anyway.
const ASK_ABOVE: Duration = Duration::from_millis(200);

/// Past the due time the server gave, so that the claim sees the row due.
const MARGIN: Duration = Duration::from_millis(2);

/// How a queue's rows due by time are found.
#[derive(Debug)]
pub struct Due {
    how: How,
    poll_interval: Duration,
    /// The question failed on its own SQL: said once, and the queue polls instead.
    failed: AtomicBool,
    known: Mutex<Known>,
}

#[derive(Debug)]
enum How {
    /// No time function decides which rows wait.
    Timeless,
    /// Asked of the server.
    Asked(DueQuery),
    /// Polled for, every `poll_interval` (the select cannot be read).
    Polled,
}

/// What the last answer said.
#[derive(Debug)]
struct Known {
    /// When the next row falls due (`None`: no row waits for the clock).
    next: Option<Instant>,
    /// The queue's tables changed since (or nothing was asked yet): ask again.
    stale: bool,
}

impl Known {
    /// `until`, or the next due time if that is sooner and still ahead.
    fn cut(&self, until: Instant, now: Instant) -> Instant {
        match self.next {
            Some(next) if next > now => until.min(next),
            _ => until,
        }
    }
}

impl Due {
    /// How `config`'s rows due by time are found.
    pub fn of(config: &QueueConfig) -> Due {
        let how = match due_times(&config.select.text) {
            DueTimes::Timeless => How::Timeless,
            DueTimes::Read(next) => match DueQuery::new(&next) {
                Some(query) => How::Asked(query),
                None => How::Polled,
            },
            DueTimes::Unread { .. } => How::Polled,
        };
        Due {
            how,
            poll_interval: config.poll_interval,
            failed: AtomicBool::new(false),
            known: Mutex::new(Known {
                next: None,
                stale: true,
            }),
        }
    }
}

impl WakeSource for Due {
    /// Before the watcher waits up to `every`: what to ask, or when to end the wait.
    fn cut(&self, every: Duration, now: Instant) -> Cut<'_> {
        match &self.how {
            How::Timeless => Cut::Never,
            How::Asked(_) if self.failed.load(Ordering::Acquire) => {
                Cut::At(now + self.poll_interval)
            }
            How::Asked(query) => {
                let known = lock(&self.known);
                match every > ASK_ABOVE || known.stale {
                    true => Cut::Ask(query),
                    false => Cut::At(known.cut(now + every.min(self.poll_interval), now)),
                }
            }
            How::Polled => Cut::At(now + self.poll_interval),
        }
    }

    /// Until when to wait, given the server's answer to [`Cut::Ask`] (`None`: no
    /// session could be had to ask on). The due time counts from the answer's
    /// arrival, not from whenever the wait begins.
    fn answered(
        &self,
        every: Duration,
        answer: Option<Result<Option<Duration>, DbError>>,
    ) -> Option<Instant> {
        let now = Instant::now();
        let polled = now + every.min(self.poll_interval);
        Some(match answer {
            Some(Ok(next)) => {
                let mut known = lock(&self.known);
                *known = Known {
                    next: next.map(|due| now + due + MARGIN),
                    stale: false,
                };
                known.cut(now + every, now)
            }
            Some(Err(e)) if e.is_statement_error() => {
                if !self.failed.swap(true, Ordering::AcqRel) {
                    warn!(error = %e, "cannot ask the database when the next row falls due by \
                        time; rows due by time are claimed by polling every poll_interval instead");
                }
                polled
            }
            Some(Err(e)) => {
                debug!(error = %e, "could not ask when the next row falls due");
                polled
            }
            None => polled,
        })
    }

    /// The queue's tables changed: a row may have come due sooner than the answer
    /// said, so the next wait asks.
    fn changed(&self) {
        lock(&self.known).stale = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::log::capture;

    fn due(select: &str) -> Due {
        let file = format!(
            "select = \"{select}\"\npoll_interval = \"5s\"\n[action]\ntype = \"sql\"\nsql = \"DO :id\"\n\
             [on_success]\nsql = \"UPDATE job SET done = 1 WHERE id = :id\""
        );
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("test.toml");
        std::fs::write(&path, file).expect("the queue file written");
        Due::of(
            &crate::config::load_file::<crate::action::RawAction>(&path, &|_| None)
                .expect("a valid queue file"),
        )
    }

    const MINUTE: Duration = Duration::from_secs(60);
    const FIVE: Duration = Duration::from_secs(5);

    /// How long from now a wait of `every` lasts (`None`: it asks first).
    fn waits(due: &Due, every: Duration) -> Option<Duration> {
        let now = Instant::now();
        match due.cut(every, now) {
            Cut::Never => Some(every),
            Cut::At(until) => Some(until.min(now + every) - now),
            Cut::Ask(_) => None,
        }
    }

    /// A timeless select waits its poll; an unread one at most `poll_interval`; a
    /// read one asks, unless its wait is short and nothing changed since it asked.
    #[tokio::test(start_paused = true)]
    async fn what_the_watcher_asks_before_it_waits() {
        let timeless = due("SELECT id FROM job WHERE done = 0");
        assert_eq!(waits(&timeless, MINUTE), Some(MINUTE));
        let unread = due("SELECT id FROM job WHERE done = 0 AND NOT (run_at > NOW())");
        assert_eq!(waits(&unread, MINUTE), Some(FIVE));
        let read = due("SELECT id FROM job WHERE done = 0 AND run_at <= NOW()");
        assert_eq!(waits(&read, MINUTE), None, "asked");
        let short = Duration::from_millis(100);
        assert_eq!(waits(&read, short), None, "nothing asked yet");
        read.answered(short, Some(Ok(None)));
        assert_eq!(waits(&read, short), Some(short));
        assert_eq!(waits(&read, MINUTE), None, "a long wait asks again");
        read.changed();
        assert_eq!(waits(&read, short), None, "the tables changed");
    }

    /// The answer ends the wait at the due time, counted from the answer; no row
    /// due keeps the poll; a question the server refuses is said once, and the
    /// queue polls from then on.
    #[tokio::test(start_paused = true)]
    async fn the_answer_decides_the_wait() {
        let read = due("SELECT id FROM job WHERE done = 0 AND run_at <= NOW()");
        let in_two = Duration::from_secs(2);
        let asked = Instant::now();
        assert_eq!(
            read.answered(MINUTE, Some(Ok(Some(in_two)))).unwrap(),
            asked + in_two + MARGIN
        );
        assert_eq!(read.answered(MINUTE, Some(Ok(None))), Some(asked + MINUTE));
        assert_eq!(read.answered(MINUTE, None), Some(asked + FIVE));
        let (log, _guard) = capture();
        let refused = || Some(Err(DbError::server(1054, "Unknown column 'run_at'")));
        assert_eq!(read.answered(MINUTE, refused()), Some(asked + FIVE));
        assert_eq!(read.answered(MINUTE, refused()), Some(asked + FIVE));
        assert_eq!(log.text().matches("cannot ask the database").count(), 1);
        assert_eq!(waits(&read, MINUTE), Some(FIVE));
    }

    /// A short look (a second look after a wake-up) ends at the next due time known,
    /// not after its own length; once that time has passed, it no longer counts.
    #[tokio::test(start_paused = true)]
    async fn a_short_look_ends_at_the_next_due_time_known() {
        let read = due("SELECT id FROM job WHERE done = 0 AND run_at <= NOW(3)");
        let look = Duration::from_millis(100);
        let in_forty = Duration::from_millis(40);
        read.answered(MINUTE, Some(Ok(Some(in_forty))));
        assert_eq!(waits(&read, look), Some(in_forty + MARGIN));
        tokio::time::advance(in_forty + MARGIN).await;
        assert_eq!(waits(&read, look), Some(look), "passed");
    }
}
