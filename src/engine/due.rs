//! Rows due by time alone (`send_after <= NOW()`, a retry's `retry_at`, an expired
//! lease): nothing commits when one falls due, so nothing wakes the queue. The
//! watcher of an idle queue therefore asks the server, after each empty claim,
//! when the next such row is due ([`crate::sql::due`] reads the select's time
//! conditions; [`crate::db::due`] asks), and waits until then — or until a
//! wake-up, or its poll, whichever is first. Where the select's clock cannot be
//! read, the queue polls at least every `poll_interval`, binary log or not.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tracing::{debug, warn};

use crate::config::QueueConfig;
use crate::db::due::DueQuery;
use crate::db::DbError;
use crate::sql::due::{due_times, DueTimes};

/// A wait shorter than this is not worth a question: the poll itself is on time.
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

/// What the watcher does before its wait.
pub enum Ask<'a> {
    /// Wait this long; nothing to ask.
    Wait(Duration),
    /// Ask this, then hand the answer to [`Due::answered`].
    Query(&'a DueQuery),
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
        }
    }

    /// Before the watcher waits up to `every`: what to ask, or how long to wait.
    pub fn ask(&self, every: Duration) -> Ask<'_> {
        match &self.how {
            How::Timeless => Ask::Wait(every),
            How::Asked(query) if every > ASK_ABOVE && !self.failed.load(Ordering::Acquire) => {
                Ask::Query(query)
            }
            How::Asked(_) | How::Polled => Ask::Wait(every.min(self.poll_interval)),
        }
    }

    /// The wait, given the server's answer to [`Ask::Query`] (`None`: no session
    /// could be had to ask on).
    pub fn answered(
        &self,
        every: Duration,
        answer: Option<Result<Option<Duration>, DbError>>,
    ) -> Duration {
        let polled = every.min(self.poll_interval);
        match answer {
            Some(Ok(None)) => every,
            Some(Ok(Some(due))) => every.min(due + MARGIN),
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
        }
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
        Due::of(&crate::config::load_file(&path, &|_| None).expect("a valid queue file"))
    }

    const MINUTE: Duration = Duration::from_secs(60);
    const FIVE: Duration = Duration::from_secs(5);

    /// A timeless select waits its poll; an unread one at most `poll_interval`; a
    /// read one asks, unless its poll is short anyway.
    #[test]
    fn what_the_watcher_asks_before_it_waits() {
        let wait = |due: &Due, every| match due.ask(every) {
            Ask::Wait(wait) => Some(wait),
            Ask::Query(_) => None,
        };
        let timeless = due("SELECT id FROM job WHERE done = 0");
        assert_eq!(wait(&timeless, MINUTE), Some(MINUTE));
        let unread = due("SELECT id FROM job WHERE done = 0 AND NOT (run_at > NOW())");
        assert_eq!(wait(&unread, MINUTE), Some(FIVE));
        let read = due("SELECT id FROM job WHERE done = 0 AND run_at <= NOW()");
        assert_eq!(wait(&read, MINUTE), None, "asked");
        let short = Duration::from_millis(100);
        assert_eq!(wait(&read, short), Some(short));
    }

    /// The answer shortens the wait to the due time; no row due keeps the poll; a
    /// question the server refuses is said once, and the queue polls from then on.
    #[test]
    fn the_answer_decides_the_wait() {
        let read = due("SELECT id FROM job WHERE done = 0 AND run_at <= NOW()");
        let in_two = Duration::from_secs(2);
        assert_eq!(
            read.answered(MINUTE, Some(Ok(Some(in_two)))),
            in_two + MARGIN
        );
        assert_eq!(read.answered(MINUTE, Some(Ok(None))), MINUTE);
        assert_eq!(read.answered(MINUTE, None), FIVE);
        let (log, _guard) = capture();
        let refused = || Some(Err(DbError::server(1054, "Unknown column 'run_at'")));
        assert_eq!(read.answered(MINUTE, refused()), FIVE);
        assert_eq!(read.answered(MINUTE, refused()), FIVE);
        assert_eq!(log.text().matches("cannot ask the database").count(), 1);
        assert!(matches!(read.ask(MINUTE), Ask::Wait(FIVE)));
    }
}
