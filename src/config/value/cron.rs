//! A cron expression, and the next time it names after an instant, in a time zone.
//!
//! The expressions are those of `croner` (4.x, a maintained crate that follows Vixie
//! cron and the Open Cron Pattern Specification): 5 fields (`min hour dom mon dow`),
//! or 6 with seconds first (`sec min hour dom mon dow`); names of months and days;
//! the nicknames `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`, `@hourly`;
//! and croner's `L`, `W`, `#` and `?`. When day-of-month and day-of-week are both
//! restricted, a day matching either one matches, as in Vixie cron (croner's `+`
//! before the day of week asks for both). Time zones are IANA names (`chrono-tz`).
//!
//! Across a change of the clocks (see the tests, on Europe/Berlin's dates of 2027),
//! as croner does it:
//! - clocks go forward (a gap, 02:00 → 03:00): a time inside the gap written as a
//!   fixed time (`30 2 * * *`) comes at the first instant after the gap (03:00
//!   local), once; a field written with `*` or a step (`*/15 2 * * *`) has no times
//!   in the gap: they are skipped.
//! - clocks go back (a repeat, 03:00 → 02:00): a fixed time comes once, at its first
//!   pass; a field written with `*` or a step comes in both passes.
//!
//! The next time is always after the given instant, in real time.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use chrono::{DateTime, Datelike, TimeZone, Timelike, Utc};
use chrono_tz::Tz;
use croner::parser::{CronParser, Seconds, Year};

/// A cron expression, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cron {
    cron: croner::Cron,
}

/// A time zone: an IANA name, or UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Zone(Tz);

/// Why an expression or a time zone cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CronError {
    /// It is empty.
    #[error("it is empty: write 5 fields (minute hour day-of-month month day-of-week), or 6 with seconds first")]
    Empty,
    /// It has the wrong number of fields.
    #[error("it has {0} fields: write 5 (minute hour day-of-month month day-of-week), or 6 with seconds first")]
    Fields(usize),
    /// A field (or the whole) is not cron: croner's words.
    #[error("{0}")]
    Invalid(String),
    /// No time matches it (`0 0 30 2 *`).
    #[error("no time matches it (it names no day that exists, or none before the year 5000)")]
    Never,
    /// Not a time zone this build knows.
    #[error("unknown time zone {0:?}: use an IANA name such as \"Europe/Berlin\", or \"UTC\"")]
    Zone(String),
}

impl Cron {
    /// Parses `text`: 5 fields, 6 with seconds first, or a nickname (`@daily`).
    pub fn parse(text: &str) -> Result<Cron, CronError> {
        let fields = text.split_whitespace().count();
        let nickname = text.trim_start().starts_with('@');
        match fields {
            0 => return Err(CronError::Empty),
            5 | 6 => {}
            1 if nickname => {}
            n => return Err(CronError::Fields(n)),
        }
        let parser = CronParser::builder()
            .seconds(Seconds::Optional)
            .year(Year::Disallowed)
            .build();
        let cron = parser.parse(text).map_err(|e| {
            let said = e.to_string();
            CronError::Invalid(said.trim_end_matches('.').to_string())
        })?;
        Ok(Cron { cron })
    }

    /// The first time the expression names strictly after `after`, on the clocks of
    /// `zone`.
    pub fn next_after(&self, after: SystemTime, zone: Zone) -> Result<SystemTime, CronError> {
        let start = utc(after).with_timezone(&zone.0);
        let next = self
            .cron
            .find_next_occurrence(&start, false)
            .map_err(|_| CronError::Never)?;
        let next = next.with_timezone(&Utc);
        let micros = u64::try_from(next.timestamp_micros()).map_err(|_| CronError::Never)?;
        Ok(UNIX_EPOCH + Duration::from_micros(micros))
    }
}

impl Zone {
    pub const UTC: Zone = Zone(Tz::UTC);

    /// The time zone called `name` (an IANA name: `Europe/Berlin`, `UTC`).
    pub fn parse(name: &str) -> Result<Zone, CronError> {
        name.trim()
            .parse::<Tz>()
            .map(Zone)
            .map_err(|_| CronError::Zone(name.to_string()))
    }

    /// Its IANA name (`Europe/Berlin`, `UTC`).
    pub fn name(&self) -> &'static str {
        self.0.name()
    }
}

/// `at` as UTC `DATETIME(6)` text: `2027-03-28 01:00:00.000000`.
pub fn utc_datetime(at: SystemTime) -> String {
    let t = utc(at);
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02}.{:06}",
        t.year(),
        t.month(),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.nanosecond() / 1000 % 1_000_000
    )
}

/// The instant of UTC `DATETIME` text (`2027-03-28 01:00:00.250000`, or with a
/// `T`, with or without fractions); `None` for other text or a time before 1970.
pub fn parse_utc_datetime(text: &str) -> Option<SystemTime> {
    let text = text.trim().replacen('T', " ", 1);
    let t = chrono::NaiveDateTime::parse_from_str(&text, "%Y-%m-%d %H:%M:%S%.f").ok()?;
    let micros = u64::try_from(t.and_utc().timestamp_micros()).ok()?;
    Some(UNIX_EPOCH + Duration::from_micros(micros))
}

/// `at` on the UTC calendar (the epoch for a time before it).
fn utc(at: SystemTime) -> DateTime<Utc> {
    let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    let micros = i64::try_from(since.as_micros()).unwrap_or(i64::MAX);
    Utc.timestamp_micros(micros).single().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The instant of a UTC `DATETIME(6)` text, for fixed dates.
    fn at(text: &str) -> SystemTime {
        let t = chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f")
            .unwrap_or_else(|e| panic!("{text}: {e}"));
        let micros = t.and_utc().timestamp_micros();
        UNIX_EPOCH + Duration::from_micros(micros as u64)
    }

    /// The next `n` times of `cron` after `from` (UTC text), in `zone`, as UTC text.
    fn next(cron: &str, zone: &str, from: &str, n: usize) -> Vec<String> {
        let cron = Cron::parse(cron).unwrap_or_else(|e| panic!("{cron}: {e}"));
        let zone = Zone::parse(zone).expect("a zone");
        let mut times = Vec::new();
        let mut after = at(from);
        for _ in 0..n {
            after = cron.next_after(after, zone).expect("a next time");
            times.push(utc_datetime(after));
        }
        times
    }

    #[test]
    fn six_fields_put_seconds_first_and_five_have_none() {
        let from = "2027-01-04 10:00:00.250000";
        assert_eq!(
            next("*/20 * * * * *", "UTC", from, 3),
            [
                "2027-01-04 10:00:20.000000",
                "2027-01-04 10:00:40.000000",
                "2027-01-04 10:01:00.000000"
            ]
        );
        assert_eq!(
            next("15 30 9 * * *", "UTC", from, 1),
            ["2027-01-05 09:30:15.000000"]
        );
        assert_eq!(
            next("*/20 * * * *", "UTC", from, 2),
            ["2027-01-04 10:20:00.000000", "2027-01-04 10:40:00.000000"]
        );
        assert_eq!(
            next("@daily", "UTC", from, 1),
            ["2027-01-05 00:00:00.000000"]
        );
    }

    #[test]
    fn the_next_time_is_strictly_after_the_instant() {
        let exact = "2027-01-04 10:00:01.000000";
        assert_eq!(
            next("* * * * * *", "UTC", exact, 1),
            ["2027-01-04 10:00:02.000000"]
        );
        let just_after = "2027-01-04 10:00:01.000001";
        assert_eq!(
            next("* * * * * *", "UTC", just_after, 1),
            ["2027-01-04 10:00:02.000000"]
        );
    }

    #[test]
    fn day_of_month_and_day_of_week_restricted_together_match_either() {
        // 2027-01-01 is a Friday; the 13th a Wednesday; Mondays are the 4th, 11th.
        let from = "2027-01-01 12:00:00";
        assert_eq!(
            next("0 0 13 * MON", "UTC", from, 3),
            [
                "2027-01-04 00:00:00.000000",
                "2027-01-11 00:00:00.000000",
                "2027-01-13 00:00:00.000000"
            ]
        );
        // One restricted: only it counts.
        assert_eq!(
            next("0 0 13 * *", "UTC", from, 1),
            ["2027-01-13 00:00:00.000000"]
        );
        // croner's `+`: both.
        assert_eq!(
            next("0 0 13 * +WED", "UTC", from, 1),
            ["2027-01-13 00:00:00.000000"]
        );
    }

    /// Europe/Berlin, 2027-03-28: at 02:00 CET (01:00 UTC) the clocks go to 03:00 CEST.
    #[test]
    fn clocks_going_forward_move_a_fixed_time_past_the_gap_and_skip_steps_in_it() {
        let from = "2027-03-27 12:00:00";
        // 02:30 does not exist that night: the first instant after the gap, 03:00
        // CEST (01:00 UTC), once; the next day 02:30 CEST again.
        assert_eq!(
            next("30 2 * * *", "Europe/Berlin", from, 2),
            ["2027-03-28 01:00:00.000000", "2027-03-29 00:30:00.000000"]
        );
        // Every 30 minutes: 01:30 CET, then 03:00 CEST — no times in the gap.
        assert_eq!(
            next("*/30 * * * *", "Europe/Berlin", "2027-03-28 00:10:00", 3),
            [
                "2027-03-28 00:30:00.000000",
                "2027-03-28 01:00:00.000000",
                "2027-03-28 01:30:00.000000"
            ]
        );
    }

    /// Europe/Berlin, 2027-10-31: at 03:00 CEST (01:00 UTC) the clocks go back to
    /// 02:00 CET, so 02:00–02:59 happens twice.
    #[test]
    fn clocks_going_back_run_a_fixed_time_once_and_steps_in_both_passes() {
        let from = "2027-10-30 12:00:00";
        // 02:30 CEST (00:30 UTC) only, not 02:30 CET (01:30 UTC) too.
        assert_eq!(
            next("30 2 * * *", "Europe/Berlin", from, 2),
            ["2027-10-31 00:30:00.000000", "2027-11-01 01:30:00.000000"]
        );
        // Every 30 minutes through both passes: 02:00 and 02:30 CEST, then CET.
        assert_eq!(
            next("*/30 * * * *", "Europe/Berlin", "2027-10-30 23:50:00", 5),
            [
                "2027-10-31 00:00:00.000000",
                "2027-10-31 00:30:00.000000",
                "2027-10-31 01:00:00.000000",
                "2027-10-31 01:30:00.000000",
                "2027-10-31 02:00:00.000000"
            ]
        );
    }

    #[test]
    fn bad_expressions_and_zones_say_why() {
        assert_eq!(Cron::parse("  "), Err(CronError::Empty));
        assert_eq!(Cron::parse("* * * *"), Err(CronError::Fields(4)));
        assert_eq!(Cron::parse("* * * * * * 2027"), Err(CronError::Fields(7)));
        let Err(CronError::Invalid(why)) = Cron::parse("61 * * * *") else {
            panic!("61 minutes parsed")
        };
        assert!(!why.is_empty() && !why.ends_with('.'), "{why}");
        assert!(matches!(
            Cron::parse("@sometimes"),
            Err(CronError::Invalid(_))
        ));
        let never = Cron::parse("0 0 30 2 *").expect("parses");
        assert_eq!(
            never.next_after(at("2027-01-01 00:00:00"), Zone::UTC),
            Err(CronError::Never)
        );
        assert_eq!(
            Zone::parse("Mars/Olympus"),
            Err(CronError::Zone("Mars/Olympus".into()))
        );
        assert!(CronError::Fields(4)
            .to_string()
            .contains("6 with seconds first"));
    }
}
