//! When a schedule queue's runs fall due: a cron expression in a time zone, or
//! `every 30s` (multiples of the period since the epoch), and what a finished run
//! makes of the schedule — the next due time, the due times it passed over, and a
//! failed run's retry.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::config::value::cron::{Cron, CronError, Zone};

/// The most due times counted as passed over by one run; past it the count says
/// "at least".
const MOST_COUNTED: u64 = 100_000;

/// A schedule's due times.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum When {
    /// A cron expression, on the clocks of a time zone.
    Cron(Box<Cron>, Zone),
    /// Every this many whole seconds, aligned to multiples since the epoch.
    Every(u64),
}

impl When {
    /// Reads `every 30s` (any whole-second duration `humantime` reads) or a cron
    /// expression in `zone`.
    pub fn parse(text: &str, zone: Zone) -> Result<When, String> {
        let text = text.trim();
        if let Some(period) = text.strip_prefix("every") {
            let period = humantime::parse_duration(period.trim()).map_err(|e| {
                format!(
                    "`every {}`: {e}; write a period such as \"every 30s\" or \"every 5m\"",
                    period.trim()
                )
            })?;
            if period.subsec_nanos() != 0 || period.as_secs() == 0 {
                return Err(format!(
                    "`{text}`: the period must be whole seconds, at least 1s, e.g. \"every 30s\""
                ));
            }
            return Ok(When::Every(period.as_secs()));
        }
        Cron::parse(text)
            .map(|cron| When::Cron(Box::new(cron), zone))
            .map_err(|e| format!("cron expression {text:?}: {e}"))
    }

    /// The first due time strictly after `after`.
    pub fn next_after(&self, after: SystemTime) -> Result<SystemTime, CronError> {
        match self {
            When::Cron(cron, zone) => cron.next_after(after, *zone),
            When::Every(period) => {
                let since = after.duration_since(UNIX_EPOCH).unwrap_or_default();
                let next = (since.as_secs() / period + 1) * period;
                Ok(UNIX_EPOCH + Duration::from_secs(next))
            }
        }
    }

    /// The last due time at or before `until`, looked for back from it (a cron's
    /// by doubling the look back, up to some 34 years); `None` when there is none.
    pub fn latest_until(&self, until: SystemTime) -> Option<SystemTime> {
        if let When::Every(period) = self {
            let secs = until.duration_since(UNIX_EPOCH).ok()?.as_secs();
            return Some(UNIX_EPOCH + Duration::from_secs(secs / period * period));
        }
        let mut back = Duration::from_secs(1);
        while back < Duration::from_secs(1 << 30) {
            let from = until.checked_sub(back)?;
            let mut at = self.next_after(from).ok()?;
            if at <= until {
                // The first after `from` is not over `until`: step on to the last.
                while let Ok(next) = self.next_after(at) {
                    if next > until {
                        break;
                    }
                    at = next;
                }
                return Some(at);
            }
            back *= 2;
        }
        None
    }

    /// The due times in `(after, until]`, counted (at most [`MOST_COUNTED`]), and the
    /// last of them.
    pub fn between(
        &self,
        after: SystemTime,
        until: SystemTime,
    ) -> Result<(u64, Option<SystemTime>), CronError> {
        if let When::Every(period) = self {
            let secs = |t: SystemTime| t.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
            let (first, last) = (secs(after) / period + 1, secs(until) / period);
            let count = last.saturating_sub(first - 1);
            let at = (count > 0).then(|| UNIX_EPOCH + Duration::from_secs(last * period));
            return Ok((count, at));
        }
        let (mut count, mut last) = (0, None);
        let mut at = self.next_after(after)?;
        while at <= until && count < MOST_COUNTED {
            count += 1;
            last = Some(at);
            at = match self.next_after(at) {
                Ok(next) => next,
                Err(_) => break,
            };
        }
        Ok((count, last))
    }
}

/// What a finished run makes of its schedule, as its outcome SQL binds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rearm {
    /// `:next_run`: the due time the schedule waits for next.
    pub next_run: SystemTime,
    /// `:skipped`: due times passed over between the one run and `next_run`.
    pub skipped: u64,
    /// `:retry_at`: a failed run's next try, within its period; `None` on success,
    /// or when the retry would reach the next due time (the run is then missed).
    pub retry_at: Option<SystemTime>,
}

/// What the schedule knows of the run that finished.
#[derive(Debug, Clone, Copy)]
pub struct Finished {
    /// The due time it ran for (`:scheduled_at`).
    pub scheduled: SystemTime,
    /// Now, on the database's clock.
    pub now: SystemTime,
    /// Catching up (`catch_up = "all"`): the due times up to this run one by one.
    pub catch_up_until: Option<SystemTime>,
    /// Its failed tries before this one.
    pub attempts: u32,
    /// `None`: it succeeded. `Some(first)`: it failed; retries wait `first`, doubling.
    pub failed: Option<Duration>,
}

impl When {
    /// The schedule after `run`: the next due time after now — or after the run's
    /// own while catching up — and the due times passed over; for a failure, a retry
    /// while one fits before the next due time.
    pub fn rearm(&self, run: Finished) -> Result<Rearm, CronError> {
        let following = self.next_after(run.scheduled)?;
        if let Some(first) = run.failed {
            let doubled = first.saturating_mul(1 << run.attempts.min(16));
            // Whole seconds, rounded up (as the row keeps it), before it is compared.
            let retry_at = ceil_second(run.now + doubled.min(Duration::from_secs(60)));
            if retry_at < following {
                return Ok(Rearm {
                    next_run: following,
                    skipped: 0,
                    retry_at: Some(retry_at),
                });
            }
        }
        if run.catch_up_until.is_some_and(|until| following <= until) {
            return Ok(Rearm {
                next_run: following,
                skipped: 0,
                retry_at: None,
            });
        }
        let next_run = self.next_after(run.now.max(run.scheduled))?;
        let (skipped, _) = self.between(run.scheduled, run.now)?;
        Ok(Rearm {
            next_run,
            skipped,
            retry_at: None,
        })
    }
}

/// `at`, rounded up to the whole second (a retry never earlier than its backoff).
pub fn ceil_second(at: SystemTime) -> SystemTime {
    let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    let whole = since.as_secs() + u64::from(since.subsec_nanos() > 0);
    UNIX_EPOCH + Duration::from_secs(whole)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::value::cron::utc_datetime;

    fn at(secs: u64, millis: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(secs * 1000 + millis)
    }

    fn run(scheduled: SystemTime, now: SystemTime) -> Finished {
        Finished {
            scheduled,
            now,
            catch_up_until: None,
            attempts: 0,
            failed: None,
        }
    }

    #[test]
    fn every_is_aligned_to_multiples_of_its_period_since_the_epoch() {
        let every = When::parse("every 30s", Zone::UTC).unwrap();
        assert_eq!(every, When::Every(30));
        assert_eq!(
            every.next_after(at(1_000_000, 1)).unwrap(),
            at(1_000_020, 0)
        );
        assert_eq!(
            every.next_after(at(1_000_020, 0)).unwrap(),
            at(1_000_050, 0)
        );
        assert_eq!(
            When::parse("every 5m", Zone::UTC).unwrap(),
            When::Every(300)
        );
    }

    #[test]
    fn bad_periods_and_expressions_say_what_to_write() {
        for bad in ["every 500ms", "every 0s", "every soon"] {
            let why = When::parse(bad, Zone::UTC).unwrap_err();
            assert!(why.contains("every 30s"), "{bad}: {why}");
        }
        let why = When::parse("61 * * * *", Zone::UTC).unwrap_err();
        assert!(why.starts_with("cron expression \"61 * * * *\""), "{why}");
    }

    #[test]
    fn a_run_on_time_waits_for_the_next_due_time_and_skips_none() {
        let every = When::Every(1);
        let rearm = every.rearm(run(at(100, 0), at(100, 40))).unwrap();
        assert_eq!(rearm.next_run, at(101, 0));
        assert_eq!((rearm.skipped, rearm.retry_at), (0, None));
    }

    #[test]
    fn a_run_that_outlasts_its_period_skips_the_due_times_it_covers() {
        let every = When::Every(1);
        let rearm = every.rearm(run(at(100, 0), at(103, 500))).unwrap();
        assert_eq!(rearm.next_run, at(104, 0));
        assert_eq!(rearm.skipped, 3, "101, 102 and 103 passed while it ran");
        let cron = When::parse("*/10 * * * * *", Zone::UTC).unwrap();
        let rearm = cron.rearm(run(at(100, 0), at(125, 0))).unwrap();
        assert_eq!(rearm.next_run, at(130, 0));
        assert_eq!(rearm.skipped, 2, "110 and 120");
    }

    #[test]
    fn catching_up_runs_each_due_time_until_the_mark_then_the_next_after_now() {
        let every = When::Every(10);
        let catching = Finished {
            catch_up_until: Some(at(130, 0)),
            ..run(at(100, 0), at(131, 0))
        };
        let rearm = every.rearm(catching).unwrap();
        assert_eq!((rearm.next_run, rearm.skipped), (at(110, 0), 0));
        let last = Finished {
            catch_up_until: Some(at(130, 0)),
            ..run(at(130, 0), at(131, 0))
        };
        assert_eq!(every.rearm(last).unwrap().next_run, at(140, 0));
    }

    #[test]
    fn a_failure_retries_with_backoff_until_the_next_due_time_then_is_missed() {
        let every = When::Every(60);
        let failed = |attempts, now| Finished {
            attempts,
            failed: Some(Duration::from_secs(1)),
            ..run(at(60, 0), now)
        };
        let first = every.rearm(failed(0, at(61, 0))).unwrap();
        assert_eq!(first.retry_at, Some(at(62, 0)));
        let fourth = every.rearm(failed(3, at(70, 0))).unwrap();
        assert_eq!(fourth.retry_at, Some(at(78, 0)), "1s doubled three times");
        // A retry rounded up onto the next due time is no retry: the due time is
        // missed, and the next one runs.
        let rounded = When::Every(3).rearm(Finished {
            failed: Some(Duration::from_secs(1)),
            ..run(at(21, 0), at(22, 200))
        });
        assert_eq!(rounded.unwrap().retry_at, None, "24 is the next due time");
        let late = every.rearm(failed(5, at(100, 0))).unwrap();
        assert_eq!(
            late.retry_at, None,
            "100 + 32 reaches the next due time, 120"
        );
        assert_eq!((late.next_run, late.skipped), (at(120, 0), 0));
    }

    #[test]
    fn the_latest_due_time_is_found_back_from_any_instant() {
        let cron = When::parse("0 0 1 * *", Zone::UTC).unwrap(); // monthly
        let every = When::Every(10);
        // 1970-03-15: the latest monthly time is 1970-03-01.
        let mid_march = at(73 * 86_400 + 3_600, 0);
        assert_eq!(cron.latest_until(mid_march), Some(at(59 * 86_400, 0)));
        assert_eq!(every.latest_until(at(125, 300)), Some(at(120, 0)));
        assert_eq!(
            every.latest_until(at(120, 0)),
            Some(at(120, 0)),
            "at or before"
        );
        let seconds = When::parse("* * * * * *", Zone::UTC).unwrap();
        assert_eq!(
            seconds.latest_until(at(10_000_000, 500)),
            Some(at(10_000_000, 0))
        );
    }

    #[test]
    fn between_counts_cron_and_period_times_alike() {
        let cron = When::parse("* * * * * *", Zone::UTC).unwrap();
        let every = When::Every(1);
        for when in [&cron, &every] {
            let (count, last) = when.between(at(100, 500), at(105, 0)).unwrap();
            assert_eq!((count, last), (5, Some(at(105, 0))));
            assert_eq!(when.between(at(100, 0), at(100, 900)).unwrap(), (0, None));
        }
        assert_eq!(utc_datetime(at(105, 0)), "1970-01-01 00:01:45.000000");
    }
}
