//! `[recurring]` as a queue runs. Before a row's action, its cron expression (and
//! time zone) are read: a row whose schedule cannot be read, or names no time to
//! come, fails with why (`cron expression "…" in column cron: …`), its action not
//! run, and `[on_failure]` records it. After the action, the row's next due time
//! strictly after now becomes `:next_run`. "Now" is the database's clock, as the
//! background count last read it (this process's until then): a row claimed as due
//! by the database's clock is not re-armed to the due time it just ran for.

use std::time::SystemTime;

use crate::action::{NextRun, Outcome};
use crate::config::queue::recurring::RowSchedule;
use crate::db::Item;
use crate::engine::queue::QueueRuntime;

impl QueueRuntime {
    /// With `[recurring]`, the schedule of the row of `items` (item scope: one row;
    /// the loader refuses `[recurring]` in batch scope). `Err`: the failure the row
    /// gets instead of its action.
    pub fn rearm(&self, items: &[Item]) -> Result<Option<RowSchedule>, Outcome> {
        let (Some(recurring), [item]) = (&self.config.recurring, items) else {
            return Ok(None);
        };
        let failure =
            |e: crate::config::queue::recurring::RowScheduleError| Outcome::failure(e.to_string());
        let schedule = item.schedule(recurring).map_err(failure)?;
        // An expression that names no time to come (`0 0 30 2 *`) fails now too.
        schedule.next_run(self.database_now()).map_err(failure)?;
        Ok(Some(schedule))
    }

    /// Gives `outcome` the row's `:next_run`: its next due time after now.
    pub fn rearmed(&self, schedule: Option<&RowSchedule>, outcome: &mut Outcome) {
        if let Some(schedule) = schedule {
            let next = schedule.next_run(self.database_now());
            outcome.next_run = next.ok().and_then(NextRun::at);
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
