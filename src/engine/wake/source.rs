//! What a source of wake-ups is: something that knows when an idle queue's watcher
//! should claim again. A source may nudge the queue at once (`Idle::nudge`, when it
//! learns of a change), and is asked, before each wait of the watcher, how long
//! the wait may be as far as it knows: how often to poll ([`Poll`]), and when to
//! end the wait at the latest ([`Cut`]). The queue's sources are combined in
//! [`super::Wake`]; a new source is one more implementation of [`WakeSource`].

use std::fmt::Debug;
use std::time::Duration;

use tokio::time::Instant;

use crate::db::due::DueQuery;
use crate::db::DbError;

/// One source of wake-ups of an idle queue.
pub trait WakeSource: Send + Sync + Debug {
    /// How often the watcher polls when nothing wakes it, as far as this source
    /// goes.
    fn poll(&self) -> Poll {
        Poll::Silent
    }

    /// Before a wait of `every` from `now`: when this source ends it at the latest,
    /// or a question to ask the database first.
    fn cut(&self, _every: Duration, _now: Instant) -> Cut<'_> {
        Cut::Never
    }

    /// The database's answer to this source's [`Cut::Ask`] (`None`: no session
    /// could be had to ask on), for a wait of `every`: when it ends the wait at the
    /// latest.
    fn answered(
        &self,
        _every: Duration,
        _answer: Option<Result<Option<Duration>, DbError>>,
    ) -> Option<Instant> {
        None
    }

    /// The queue's tables changed (a nudge woke the watcher).
    fn changed(&self) {}
}

/// How often a source has the watcher poll.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Poll {
    /// No say in it.
    Silent,
    /// Every this long, unless a source announces every change.
    Every(Duration),
    /// This source announces every change (by a nudge): the watcher polls only
    /// this often, however often the others would.
    Announces(Duration),
}

/// When a source ends the watcher's wait.
#[derive(Debug)]
pub enum Cut<'a> {
    /// It does not.
    Never,
    /// At this instant at the latest.
    At(Instant),
    /// Ask the database when the queue's next row falls due, then hand the answer
    /// to [`WakeSource::answered`].
    Ask(&'a DueQuery),
}
