//! A blind stream: the binary log is followed, yet tableq's own commits to a
//! queue's tables never show in it — the server filters the schema out of its log
//! (`binlog-ignore-db`, `binlog-do-db`, or a replica's filters in a chain), or logs
//! them in a form the reader cannot tell apart. Nothing would wake the queue but its rare
//! poll; so once its own commits go unseen for [`BLIND_AFTER`], the queue says so
//! once and polls every `poll_interval` until the stream shows them again.

use std::time::{Duration, SystemTime};

use crate::lock::lock;
use std::sync::Mutex;

/// How long an own commit may go unseen before the stream counts as blind: a
/// commit shows in milliseconds.
pub const BLIND_AFTER: Duration = Duration::from_secs(10);

/// What the status page and the log say of a blind stream.
pub const BLIND: &str = "the binary log stream shows none of tableq's own commits to the \
    queue's tables: the server likely leaves the schema out of its log (binlog-ignore-db, \
    binlog-do-db in its options: SHOW MASTER STATUS names them)";

/// Whether the stream shows the queue's own commits.
#[derive(Debug, Default)]
pub struct OwnCommits(Mutex<State>);

#[derive(Debug, Default)]
struct State {
    /// The first own commit the stream has not shown yet.
    unseen_since: Option<SystemTime>,
    /// The last time the stream showed a change of the queue's tables.
    last_seen: Option<SystemTime>,
    blind: bool,
}

/// What a look at the queue's own commits finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Look {
    /// Every own commit was shown (or none was made).
    Seeing,
    /// One is unseen: the stream counts as blind if it still is after this long.
    Unseen(Duration),
    /// Blind; `newly` the first look that found it so.
    Blind { newly: bool },
}

impl OwnCommits {
    /// tableq committed a change to the queue's tables in a transaction that
    /// began at `began`.
    pub fn committed(&self, began: SystemTime) {
        let mut state = lock(&self.0);
        // A change shown since the transaction began may have been this one.
        if state.last_seen.is_some_and(|seen| seen >= began) {
            return;
        }
        state.unseen_since.get_or_insert_with(SystemTime::now);
    }

    /// The stream showed a change of the queue's tables; true when it was blind.
    pub fn seen(&self) -> bool {
        let mut state = lock(&self.0);
        state.last_seen = Some(SystemTime::now());
        state.unseen_since = None;
        std::mem::take(&mut state.blind)
    }

    /// Forgets what was unseen: the stream (re)opened, or is not followed.
    pub fn reset(&self) {
        let mut state = lock(&self.0);
        state.unseen_since = None;
        state.blind = false;
    }

    pub fn look(&self) -> Look {
        let mut state = lock(&self.0);
        if state.blind {
            return Look::Blind { newly: false };
        }
        let Some(since) = state.unseen_since else {
            return Look::Seeing;
        };
        let unseen = since.elapsed().unwrap_or_default();
        if unseen < BLIND_AFTER {
            return Look::Unseen(BLIND_AFTER - unseen);
        }
        state.blind = true;
        Look::Blind { newly: true }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_own_commit_unseen_for_long_makes_the_stream_blind_until_one_shows() {
        let own = OwnCommits::default();
        assert_eq!(own.look(), Look::Seeing);
        own.committed(SystemTime::now());
        assert!(matches!(own.look(), Look::Unseen(left) if left <= BLIND_AFTER));
        lock(&own.0).unseen_since = Some(SystemTime::now() - BLIND_AFTER);
        assert_eq!(own.look(), Look::Blind { newly: true });
        assert_eq!(own.look(), Look::Blind { newly: false });
        assert!(own.seen(), "it was blind");
        assert_eq!(own.look(), Look::Seeing);
    }

    #[test]
    fn a_commit_shown_before_its_worker_noted_it_is_not_unseen() {
        let own = OwnCommits::default();
        let began = SystemTime::now() - Duration::from_millis(5);
        assert!(!own.seen());
        own.committed(began);
        assert_eq!(own.look(), Look::Seeing);
    }
}
