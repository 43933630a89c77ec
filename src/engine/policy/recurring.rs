//! Rows that re-arm, as a queue runs: `[recurring]` rows and a schedule's row.
//!
//! `[recurring]`: before a row's action, its cron expression (and time zone) are
//! read: a row whose schedule cannot be read, or names no time to come, fails with
//! why (`cron expression "…" in column cron: …`), its action not run, and
//! `[on_failure]` records it. After the action, the row's next due time strictly
//! after now becomes `:next_run`.
//!
//! A schedule (`schedule = "…"`): after the run, the schedule's next due time
//! (`:next_run`), the due times the run passed over (`:skipped`) and, for a failure,
//! a retry within the period (`:retry_at`) — see
//! [`crate::config::queue::schedule::When::rearm`].
//!
//! "Now" is the database's clock, as the background count last read it (this
//! process's until then): a row claimed as due by the database's clock is not
//! re-armed to the due time it just ran for.

use std::time::{Instant, SystemTime};

use crate::action::{NextRun, Outcome, Rearmed};
use crate::config::queue::recurring::RowSchedule;
use crate::config::queue::schedule::{Finished, ScheduleConfig};
use crate::db::Item;
use crate::engine::queue::QueueRuntime;

/// What is known before the action of a row that re-arms.
pub enum Rearming {
    /// A `[recurring]` row's own schedule.
    Row(Box<RowSchedule>),
    /// A schedule's run: its due time, its failed tries, its catch-up mark, and
    /// the database's clock at the claim (`:run_at`) with when that was here.
    Schedule {
        scheduled: SystemTime,
        attempts: u32,
        catch_up_until: Option<SystemTime>,
        claimed: Option<(SystemTime, Instant)>,
    },
}

impl QueueRuntime {
    /// For a row that re-arms, what its re-arming needs (item scope: one row; the
    /// loader refuses `[recurring]` and schedules in batch scope). `Err`: the
    /// failure the row gets instead of its action.
    pub fn rearm(&self, items: &[Item]) -> Result<Option<Rearming>, Outcome> {
        let [item] = items else {
            return Ok(None);
        };
        if self.config.schedule.is_some() {
            return Ok(schedule_run(item));
        }
        let Some(recurring) = &self.config.recurring else {
            return Ok(None);
        };
        let failure =
            |e: crate::config::queue::recurring::RowScheduleError| Outcome::failure(e.to_string());
        let schedule = item.schedule(recurring).map_err(failure)?;
        // An expression that names no time to come (`0 0 30 2 *`) fails now too.
        schedule.next_run(self.database_now()).map_err(failure)?;
        Ok(Some(Rearming::Row(Box::new(schedule))))
    }

    /// Gives `outcome` the row's `:next_run` (and a schedule's `:skipped` and
    /// `:retry_at`).
    pub fn rearmed(&self, rearming: Option<&Rearming>, outcome: &mut Outcome) {
        let now = self.database_now();
        let rearmed = match (rearming, &self.config.schedule) {
            (Some(Rearming::Row(schedule)), _) => schedule
                .next_run(now)
                .ok()
                .and_then(NextRun::at)
                .map(Rearmed::next),
            (Some(run), Some(schedule)) => self.schedule_rearmed(schedule, run, now, outcome),
            (_, _) => None,
        };
        outcome.rearmed = rearmed.map(Box::new);
    }

    /// At a lease's claim, the row's re-arming as if its run were done now: the
    /// lease SQL's `:next_run` and `:skipped` (a schedule with `overlap = true`
    /// re-arms its row at the claim).
    pub fn claimed_rearm(&self, item: &Item) -> Option<Rearmed> {
        let rearming = self.rearm(std::slice::from_ref(item)).ok()??;
        let mut outcome = Outcome::success();
        self.rearmed(Some(&rearming), &mut outcome);
        outcome.rearmed.map(|rearmed| *rearmed)
    }

    /// A schedule's row after its run.
    fn schedule_rearmed(
        &self,
        schedule: &ScheduleConfig,
        run: &Rearming,
        now: SystemTime,
        outcome: &Outcome,
    ) -> Option<Rearmed> {
        let Rearming::Schedule {
            scheduled,
            attempts,
            catch_up_until,
            claimed,
        } = *run
        else {
            return None;
        };
        // The database's clock: its own at the claim and the time since, rather
        // than an estimate that a copy's clock could put seconds off.
        let now = claimed.map_or(now, |(run_at, here)| run_at + here.elapsed());
        let finished = Finished {
            scheduled,
            now,
            catch_up_until,
            attempts,
            failed: (!outcome.succeeded()).then_some(self.config.error_backoff),
        };
        let rearm = schedule.when.rearm(finished).ok()?;
        Some(Rearmed {
            next_run: NextRun::at(rearm.next_run)?,
            skipped: u32::try_from(rearm.skipped).unwrap_or(u32::MAX),
            retry_at: rearm.retry_at.and_then(NextRun::at),
        })
    }

    /// The queue was resumed: a schedule's due times that passed while it was
    /// paused are missed, not run (said, and left to the next claim, if the
    /// database cannot be reached).
    pub async fn resumed(&self) {
        let Some(schedule) = &self.config.schedule else {
            return;
        };
        let skipped = async {
            let seat = self.database.seat().await;
            let timeout = self.config.database_timeout;
            let (mut conn, _place) = self.database.connect_seated(seat, timeout).await?;
            crate::db::schedules::skip_missed(&mut conn, &self.config.name, schedule).await
        };
        if let Err(error) = skipped.await {
            tracing::warn!(queue = %self.config.name, %error,
                "could not count the due times passed while paused as missed; the oldest runs");
        }
    }

    /// Now, on the database's clock as last read; this process's before any reading.
    fn database_now(&self) -> SystemTime {
        let now = SystemTime::now();
        match self.stats.observed.backlog().clock {
            Some(clock) => clock.unix_now(now),
            None => now,
        }
    }
}

/// A schedule's run, read from its row.
fn schedule_run(item: &Item) -> Option<Rearming> {
    Some(Rearming::Schedule {
        scheduled: item.utc_time_of(crate::config::queue::schedule::KEY)?,
        attempts: item
            .text_of("attempts")
            .and_then(|a| a.parse().ok())
            .unwrap_or(0),
        catch_up_until: item.utc_time_of("catch_up_until"),
        claimed: item
            .utc_time_of("run_at")
            .map(|run_at| (run_at, Instant::now())),
    })
}
