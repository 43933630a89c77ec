//! `tableq pause`, as a queue's workers see it: whether the queue is paused, read
//! from the queue's database ([`crate::db::pause`]) by one worker for all, at most
//! once per `poll_interval` — before the first claim, then whenever a worker comes
//! to claim and the last read is that old. A paused queue's workers idle as on an
//! empty queue: the watcher's look every `poll_interval` is the pause read instead
//! of a claim, the others sleep, and nothing is locked. A pause reaches every copy
//! within `poll_interval` (plus the turn a worker is in); on the binary log, a change
//! of `tableq_paused` is read at once, and looked at again [`SECOND_LOOKS`] later if
//! the change is not visible yet. A pause or resume from this copy's console holds
//! here before the console answers ([`Pausing::set_here`]).
//!
//! A worker looks at the pause after its last wait (the write gate, the circuit's
//! cool-down) and again as it sends the claim ([`Pausing::unless_paused`]), so no
//! claim leaves once this copy knows the queue is paused — whoever learned it. A
//! read that started before what is known now (another worker's newer read, a pause
//! from the console) changes nothing.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;
use tracing::{debug, info};

use crate::db::pause::{is_denied, Paused, TABLE};
use crate::db::DbError;
use crate::duration::rounded;
use crate::engine::wake::idle::SECOND_LOOKS;
use crate::lock::lock;
use crate::telemetry::stats::QueueStats;

/// What a worker's read of the pause came to.
#[derive(Debug)]
pub enum Read {
    Found(Option<Paused>),
    Failed(DbError),
    /// No session could be opened: the claim will say why.
    NoSession,
}

impl Read {
    /// Whether the read failed on the database itself (not on a grant): the worker
    /// is reconnecting, as after a failed claim, and says so when it is back.
    pub fn lost_the_database(&self) -> bool {
        matches!(self, Read::Failed(e) if !e.server_code().is_some_and(is_denied))
    }
}

impl From<Result<Option<Paused>, DbError>> for Read {
    fn from(read: Result<Option<Paused>, DbError>) -> Read {
        match read {
            Ok(found) => Read::Found(found),
            Err(e) => Read::Failed(e),
        }
    }
}

/// Shared by a queue's workers.
#[derive(Debug)]
pub struct Pausing {
    every: Duration,
    state: Mutex<State>,
}

/// A read of the pause, started: its place among the reads and the pauses from
/// this copy, so that an older one's answer does not undo a newer one's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket(u64);

#[derive(Debug)]
struct State {
    paused: Option<Paused>,
    /// Reads started and pauses set here, counted: the next ticket.
    started: u64,
    /// The ticket of what `paused` says (a read's, or a pause set here).
    known_as_of: u64,
    next_read: Instant,
    /// After the binary log said the table changed, the next of [`SECOND_LOOKS`]
    /// for a read that still found what the last one did (none left: its length).
    second_looks: usize,
    /// The queue was resumed (here or read) since a worker last took it.
    resumed: bool,
    /// The user may not read the table: said once.
    said_unreadable: bool,
}

impl Pausing {
    /// Read every `every` (the queue's `poll_interval`); the first read is due now.
    pub fn new(every: Duration) -> Pausing {
        Pausing {
            every,
            state: Mutex::new(State {
                paused: None,
                started: 0,
                known_as_of: 0,
                next_read: Instant::now(),
                second_looks: SECOND_LOOKS.len(),
                resumed: false,
                said_unreadable: false,
            }),
        }
    }

    /// Whether this worker reads the pause now (`Some`: the read's ticket, for
    /// [`Pausing::found`]): the last read is `poll_interval` old. The worker told so
    /// has the next read pushed `poll_interval` on, so one reads for all.
    pub fn due(&self) -> Option<Ticket> {
        let mut state = lock(&self.state);
        let now = Instant::now();
        if state.next_read > now {
            return None;
        }
        state.next_read = now + self.every;
        state.started += 1;
        Some(Ticket(state.started))
    }

    /// Runs `claiming` (the claim is counted, and about to be sent) unless the
    /// queue is paused as this copy knows now; false, and nothing run, if it is. One
    /// lock with [`Pausing::set_here`]: once the console's pause is set, no claim
    /// starts.
    pub fn unless_paused(&self, claiming: impl FnOnce()) -> bool {
        let state = lock(&self.state);
        if state.paused.is_some() {
            return false;
        }
        claiming();
        true
    }

    /// The queue was paused (`Some`) or resumed from this copy (its console), and
    /// the change is written: it holds here at once, and a read that started
    /// before it changes nothing.
    pub fn set_here(&self, paused: Option<Paused>, stats: &QueueStats) {
        let mut state = lock(&self.state);
        said_change(&state.paused, &paused);
        stats.set_paused(paused.clone());
        state.started += 1;
        state.known_as_of = state.started;
        state.resumed |= state.paused.is_some() && paused.is_none();
        state.paused = paused;
    }

    /// Whether the queue was resumed since this was last asked: the one worker told
    /// settles what the pause left behind (a schedule's due times, missed).
    pub fn take_resumed(&self) -> bool {
        std::mem::take(&mut lock(&self.state).resumed)
    }

    /// Makes the next read due now: the binary log says `tableq_paused` may have
    /// changed. The log can announce a commit a moment before other sessions see it:
    /// a read that still finds what the last one did is made again shortly.
    pub fn read_now(&self) {
        let mut state = lock(&self.state);
        state.next_read = Instant::now();
        state.second_looks = 0;
    }

    /// How long until the next read is due (zero if it is).
    pub fn until_next_read(&self) -> Duration {
        let state = lock(&self.state);
        state.next_read.saturating_duration_since(Instant::now())
    }

    /// Whether the queue is paused, as last read.
    pub fn is_paused(&self) -> bool {
        lock(&self.state).paused.is_some()
    }

    /// Takes what the read of `ticket` found: a change is logged, and shown in
    /// `stats`. A read that failed changes nothing; it is counted as a database
    /// error, except when the user may not read the table (told once). A read older
    /// than what is known changes nothing either.
    pub fn found(&self, ticket: Ticket, read: Read, stats: &QueueStats) {
        let mut state = lock(&self.state);
        match read {
            Read::Found(_) if ticket.0 <= state.known_as_of => {
                debug!("a read of the pause older than what is known now: left aside");
            }
            Read::Found(paused) => {
                state.known_as_of = ticket.0;
                said_change(&state.paused, &paused);
                stats.set_paused(paused.clone());
                // The same as before, though the log said the table changed: perhaps
                // not visible yet (a pause as much as a resume).
                let soon = SECOND_LOOKS
                    .get(state.second_looks)
                    .filter(|_| state.paused == paused);
                match soon {
                    Some(soon) => {
                        state.next_read = Instant::now() + *soon;
                        state.second_looks += 1;
                    }
                    None => state.second_looks = SECOND_LOOKS.len(),
                }
                state.resumed |= state.paused.is_some() && paused.is_none();
                state.paused = paused;
            }
            Read::Failed(e) if e.server_code().is_some_and(is_denied) => {
                if !std::mem::replace(&mut state.said_unreadable, true) {
                    info!(error = %e, "cannot read whether the queue is paused: `tableq pause` \
                        does not reach this copy until the user may read the table {TABLE} \
                        (GRANT SELECT ON the queue's database's {TABLE})");
                }
            }
            Read::Failed(e) => {
                // As a claim's failure would be (the claim that follows on a new
                // session says more if the database is gone).
                stats.observed.record_db_error(e.kind());
                debug!(error = %e, "could not read whether the queue is paused");
            }
            Read::NoSession => {}
        }
    }
}

/// Says a change from `was` to `now`, if it is one.
fn said_change(was: &Option<Paused>, now: &Option<Paused>) {
    match (was, now) {
        (None, Some(now)) => said_paused(now),
        (Some(_), None) => info!("the queue is resumed: it claims again"),
        _ => {}
    }
}

fn said_paused(paused: &Paused) {
    let until = paused.until.map(|until| {
        let left = until
            .duration_since(std::time::SystemTime::now())
            .unwrap_or_default();
        format!("for {} more", rounded(left))
    });
    info!(reason = %paused.reason, by = %paused.by,
        until = until.as_deref().unwrap_or("until `tableq resume`"),
        "the queue is paused: it claims nothing until resumed; nothing is locked meanwhile");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A read of the pause, due now, that finds `read`.
    fn reads(pausing: &Pausing, read: Read, stats: &QueueStats) {
        let ticket = pausing.due().expect("the read is due");
        pausing.found(ticket, read, stats);
    }

    fn paused() -> Read {
        Read::Found(Some(Paused {
            reason: "disk full".into(),
            by: "root@localhost".into(),
            // The same row each read: a read that finds it again finds no change.
            since: std::time::UNIX_EPOCH + Duration::from_secs(1_800_000_000),
            until: None,
        }))
    }

    /// A read that still finds the queue paused after the binary log said the pause
    /// changed is made again after each of the second looks, then every
    /// poll_interval.
    #[tokio::test(start_paused = true)]
    async fn a_change_not_yet_visible_is_read_again_shortly() {
        let (pausing, stats) = (Pausing::new(Duration::from_secs(5)), QueueStats::default());
        reads(&pausing, paused(), &stats);
        assert_eq!(pausing.until_next_read(), Duration::from_secs(5));
        pausing.read_now();
        for soon in SECOND_LOOKS {
            reads(&pausing, paused(), &stats);
            assert_eq!(pausing.until_next_read(), soon);
            tokio::time::advance(soon).await;
        }
        reads(&pausing, paused(), &stats);
        assert_eq!(pausing.until_next_read(), Duration::from_secs(5));
        // Resumed at the first read: no second look.
        pausing.read_now();
        reads(&pausing, Read::Found(None), &stats);
        assert!(!pausing.is_paused());
        assert_eq!(pausing.until_next_read(), Duration::from_secs(5));
    }

    /// The other way too: a pause the log announced, not yet visible to the first
    /// read, is read again shortly — not a poll_interval later.
    #[tokio::test(start_paused = true)]
    async fn a_pause_not_yet_visible_is_read_again_shortly() {
        let (pausing, stats) = (Pausing::new(Duration::from_secs(5)), QueueStats::default());
        reads(&pausing, Read::Found(None), &stats);
        pausing.read_now();
        reads(&pausing, Read::Found(None), &stats);
        assert_eq!(pausing.until_next_read(), SECOND_LOOKS[0]);
        tokio::time::advance(SECOND_LOOKS[0]).await;
        reads(&pausing, paused(), &stats);
        assert!(pausing.is_paused());
        assert_eq!(pausing.until_next_read(), Duration::from_secs(5));
    }

    /// A pause set here holds at once: no claim starts after it, and a read that
    /// started before it (and finds the queue as it was) does not undo it; nor does
    /// an older read undo a newer one's answer.
    #[tokio::test(start_paused = true)]
    async fn what_is_known_is_not_undone_by_an_older_read() {
        let (pausing, stats) = (Pausing::new(Duration::from_secs(5)), QueueStats::default());
        let mut claims = 0;
        assert!(pausing.unless_paused(|| claims += 1));
        let before = pausing.due().expect("the first read is due");
        let Read::Found(found) = paused() else {
            unreachable!()
        };
        pausing.set_here(found, &stats);
        assert!(!pausing.unless_paused(|| claims += 1), "held at once");
        assert_eq!(claims, 1);
        pausing.found(before, Read::Found(None), &stats);
        assert!(pausing.is_paused(), "the older read is left aside");
        assert!(stats.paused().is_some());

        pausing.read_now();
        let older = pausing.due().expect("due");
        pausing.read_now();
        let newer = pausing.due().expect("due");
        pausing.found(newer, Read::Found(None), &stats);
        pausing.found(older, paused(), &stats);
        assert!(!pausing.is_paused(), "the newer read's answer stands");
        assert!(pausing.unless_paused(|| claims += 1));
        assert_eq!(claims, 2);
    }
}
