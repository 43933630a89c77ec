//! Waking idle queues. An idle queue's watcher claims again when one of its
//! sources of wake-ups says so ([`source::WakeSource`]): the binary log
//! ([`binlog`]: one [`follower`] per database follows the server's log and, when a
//! committed transaction changed a table a queue's select reads, nudges that
//! queue's watcher to claim now), the poll ([`poll`]: every `poll_interval`, seldom
//! while the binary log announces every change), and the due-time timer
//! ([`crate::engine::wake::due`]: a row due by time alone, which nothing announces).
//! [`Wake`] combines a queue's sources. A wake-up only says *when* to look, never
//! *what* to take: the claim alone decides, and every queue still polls, so a
//! missed event, a broken stream or a row due by time alone is found.

pub mod binlog;
pub mod blind;
pub mod due;
pub mod follower;
pub mod idle;
pub mod poll;
pub mod source;
pub mod tables;

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::config::queue::wake::binlog_refused;
use crate::config::{QueueConfig, WakeSource as WakeSetting};
use crate::db::binlog as binlog_stream;
use crate::db::due::DueQuery;
use crate::db::{Database, DbError};
use crate::diagnostic::{Finding, Severity};
use crate::engine::wake::due::Due;
use crate::telemetry::stats::QueueStats;
use binlog::BinlogWake;
pub use follower::Followers;
use poll::Polling;
use source::{Cut, Poll, WakeSource};

/// A queue's sources of wake-ups, combined: the watcher polls as often as the
/// sources say (seldom when one announces every change), and its wait ends at the
/// soonest any of them ends it.
#[derive(Debug)]
pub struct Wake {
    binlog: Arc<BinlogWake>,
    sources: Vec<Arc<dyn WakeSource>>,
}

/// What the watcher does before its wait.
pub enum Ask<'a> {
    /// Wait until then; nothing to ask.
    Until(Instant),
    /// Ask this, then hand the answer to [`Wake::answered`].
    Query(Question<'a>),
}

/// A source's question to the database before the watcher's wait.
pub struct Question<'a> {
    pub query: &'a DueQuery,
    source: &'a dyn WakeSource,
    every: Duration,
    /// When the other sources end the wait.
    others: Option<Instant>,
}

impl Wake {
    /// `config`'s sources: the poll, the binary log (followed once a follower has the
    /// queue), the due-time timer; their states said in `stats`.
    pub fn of(config: &QueueConfig, stats: &Arc<QueueStats>) -> Wake {
        let binlog = Arc::new(BinlogWake::of(config, stats));
        let sources: Vec<Arc<dyn WakeSource>> = vec![
            Arc::new(Polling(config.poll_interval)),
            binlog.clone(),
            Arc::new(Due::of(config)),
        ];
        Wake { binlog, sources }
    }

    /// The binary log's source, for the follower and the claims that commit.
    pub fn binlog(&self) -> &BinlogWake {
        &self.binlog
    }

    /// Whether the queue's follower streams the binary log now.
    pub fn following(&self) -> bool {
        self.binlog.following()
    }

    /// Waits until the binary log showed a change of the queue's tables.
    pub async fn changed(&self) {
        self.binlog.changed().await
    }

    /// How long the watcher waits between polls now: `soon` (a second look after a
    /// wake-up), else as often as a source that announces every change says, else
    /// as often as the most frequent poll.
    pub fn every(&self, soon: Option<Duration>) -> Duration {
        soon.unwrap_or_else(|| polled_every(&self.sources))
    }

    /// Before a wait of `every`: until when, or (the first source that asks) a
    /// question to the database first.
    pub fn ask(&self, every: Duration) -> Ask<'_> {
        ask(&self.sources, every)
    }

    /// Until when to wait, given the database's answer to `question` (`None`: no
    /// session could be had to ask on).
    pub fn answered(
        &self,
        question: Question<'_>,
        answer: Option<Result<Option<Duration>, DbError>>,
    ) -> Instant {
        let asked = question.source.answered(question.every, answer);
        let until = asked.unwrap_or_else(|| Instant::now() + question.every);
        question.others.map_or(until, |o| o.min(until))
    }

    /// A nudge woke the watcher: the queue's tables changed.
    pub fn nudged(&self) {
        for source in &self.sources {
            source.changed();
        }
    }
}

/// How often `sources` have the watcher poll: as a source that announces every
/// change says, else as the most frequent poll.
fn polled_every(sources: &[Arc<dyn WakeSource>]) -> Duration {
    let polls: Vec<Poll> = sources.iter().map(|s| s.poll()).collect();
    let announced = polls.iter().filter_map(|p| match p {
        Poll::Announces(every) => Some(*every),
        _ => None,
    });
    let polled = polls.iter().filter_map(|p| match p {
        Poll::Every(every) => Some(*every),
        _ => None,
    });
    announced
        .min()
        .or_else(|| polled.min())
        .unwrap_or(Duration::MAX)
}

/// Before a wait of `every`: until when `sources` end it, or (the first that asks)
/// a question to the database first.
fn ask(sources: &[Arc<dyn WakeSource>], every: Duration) -> Ask<'_> {
    let now = Instant::now();
    let mut others: Option<Instant> = None;
    let mut question = None;
    for source in sources {
        match source.cut(every, now) {
            Cut::Never => {}
            Cut::At(at) => others = Some(others.map_or(at, |o| o.min(at))),
            Cut::Ask(query) if question.is_none() => question = Some((query, &**source)),
            Cut::Ask(_) => {}
        }
    }
    match question {
        Some((query, source)) => Ask::Query(Question {
            query,
            source,
            every,
            others,
        }),
        None => Ask::Until(others.map_or(now + every, |o| o.min(now + every))),
    }
}

/// The queues with `wake = "binlog"` whose database will not stream its binary log
/// to them, each a finding that says why and what would allow it. A database that
/// cannot be reached is no finding: the queue starts once it can.
pub async fn refused_binlog(queues: &[(QueueConfig, Database)]) -> Vec<Finding> {
    let mut verdicts = binlog_stream::Verdicts::default();
    let mut findings = Vec::new();
    for (config, database) in queues {
        if config.wake.source != WakeSetting::Binlog {
            continue;
        }
        if let Ok(Some(why)) = verdicts.of(database).await {
            let message = binlog_refused(&why);
            findings.push(config.finding(Severity::Error, &["wake"], message));
        }
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A source that polls and cuts as it is told.
    #[derive(Debug)]
    struct Told(Poll, Option<Duration>);

    impl WakeSource for Told {
        fn poll(&self) -> Poll {
            self.0
        }

        fn cut(&self, _every: Duration, now: Instant) -> Cut<'_> {
            self.1.map_or(Cut::Never, |after| Cut::At(now + after))
        }
    }

    fn sources(told: Vec<Told>) -> Vec<Arc<dyn WakeSource>> {
        told.into_iter()
            .map(|t| Arc::new(t) as Arc<dyn WakeSource>)
            .collect()
    }

    const SECOND: Duration = Duration::from_secs(1);

    /// A source that announces every change sets the poll, however often the others
    /// would poll; without one, the most frequent poll does.
    #[test]
    fn an_announcing_source_stretches_the_poll() {
        let polls = sources(vec![
            Told(Poll::Every(5 * SECOND), None),
            Told(Poll::Every(2 * SECOND), None),
            Told(Poll::Silent, None),
        ]);
        assert_eq!(polled_every(&polls), 2 * SECOND);
        let announced = sources(vec![
            Told(Poll::Every(5 * SECOND), None),
            Told(Poll::Announces(60 * SECOND), None),
        ]);
        assert_eq!(polled_every(&announced), 60 * SECOND);
    }

    /// The wait ends at the soonest cut, never later than its length.
    #[tokio::test(start_paused = true)]
    async fn the_soonest_cut_ends_the_wait() {
        let cuts = sources(vec![
            Told(Poll::Silent, Some(3 * SECOND)),
            Told(Poll::Silent, Some(SECOND)),
            Told(Poll::Silent, None),
        ]);
        let now = Instant::now();
        assert!(matches!(ask(&cuts, 2 * SECOND), Ask::Until(at) if at == now + SECOND));
        assert!(matches!(ask(&cuts, SECOND / 2), Ask::Until(at) if at == now + SECOND / 2));
    }
}
