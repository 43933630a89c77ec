//! `[recurring]`: a table of rows that re-arm themselves. Each row carries its own
//! cron expression (and, optionally, its time zone) in columns the select returns;
//! outcome SQL gets `:next_run`, the row's next due time after now, and writes it
//! back (`UPDATE reports SET next_run_at = :next_run WHERE id = :id`). A row whose
//! expression or time zone cannot be read fails, saying which and why.

use std::time::SystemTime;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::config::validate::validator::Validator;
use crate::config::value::cron::{Cron, CronError, Zone};

/// `[recurring]` as written.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawRecurring {
    /// The select's column holding each row's cron expression: 5 fields (minute hour
    /// day-of-month month day-of-week), 6 with seconds first, or a nickname
    /// ("@daily"). Outcome SQL then has :next_run, the row's next due time after now
    /// (UTC, DATETIME(6) text).
    pub cron_column: String,
    /// The select's column holding each row's time zone, an IANA name such as
    /// "Europe/Berlin" (NULL or empty: UTC). Optional: without it every expression is
    /// read in UTC.
    pub timezone_column: Option<String>,
}

/// `[recurring]`, validated: the columns, which the select must return.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecurringConfig {
    pub cron_column: String,
    pub timezone_column: Option<String>,
}

/// One row's schedule: its expression, read, in its time zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowSchedule {
    cron: Cron,
    zone: Zone,
    /// The expression as the row holds it, and its column: for an error's words.
    text: String,
    column: String,
}

/// Why a row's schedule cannot be read: what `:error` says.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RowScheduleError {
    #[error("cron expression {text:?} in column {column}: {why}")]
    Cron {
        text: String,
        column: String,
        why: CronError,
    },
    #[error("column {column} is NULL: each row needs a cron expression ([recurring] cron_column)")]
    NoCron { column: String },
    #[error("time zone {text:?} in column {column}: {why}")]
    Zone {
        text: String,
        column: String,
        why: CronError,
    },
}

impl RecurringConfig {
    /// The schedule of a row whose cron column holds `cron` and whose time zone
    /// column (if any) holds `zone` (`None`: NULL).
    pub fn schedule(
        &self,
        cron: Option<&str>,
        zone: Option<&str>,
    ) -> Result<RowSchedule, RowScheduleError> {
        let column = || self.cron_column.clone();
        let text = cron.ok_or_else(|| RowScheduleError::NoCron { column: column() })?;
        let cron = Cron::parse(text).map_err(|why| RowScheduleError::Cron {
            text: text.to_string(),
            column: column(),
            why,
        })?;
        let zone = match zone.filter(|z| !z.trim().is_empty()) {
            None => Zone::UTC,
            Some(name) => Zone::parse(name).map_err(|why| RowScheduleError::Zone {
                text: name.to_string(),
                column: self.timezone_column.clone().unwrap_or_default(),
                why,
            })?,
        };
        Ok(RowSchedule {
            cron,
            zone,
            text: text.to_string(),
            column: column(),
        })
    }
}

impl RowSchedule {
    /// The row's next due time strictly after `now`, as `:next_run` is bound.
    pub fn next_run(&self, now: SystemTime) -> Result<SystemTime, RowScheduleError> {
        self.cron
            .next_after(now, self.zone)
            .map_err(|why| RowScheduleError::Cron {
                text: self.text.clone(),
                column: self.column.clone(),
                why,
            })
    }
}

/// Validates `[recurring]`: two column names, not empty. Whether the select returns
/// them is [`crate::config::validate::names`]'s to say.
pub(crate) fn validate(v: &mut Validator, raw: &RawRecurring) -> RecurringConfig {
    let named = [
        ("cron_column", Some(&raw.cron_column)),
        ("timezone_column", raw.timezone_column.as_ref()),
    ];
    for (key, column) in named {
        if column.is_some_and(|c| c.trim().is_empty()) {
            v.error(
                &["recurring", key],
                format!(
                    "`recurring.{key}` is empty: name the select's column that holds each \
                     row's {}, e.g. {key} = \"{}\"",
                    if key == "cron_column" {
                        "cron expression"
                    } else {
                        "time zone"
                    },
                    if key == "cron_column" {
                        "cron"
                    } else {
                        "timezone"
                    },
                ),
            );
        }
    }
    RecurringConfig {
        cron_column: raw.cron_column.clone(),
        timezone_column: raw.timezone_column.clone(),
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;
    use crate::config::value::cron::utc_datetime;

    fn reports() -> RecurringConfig {
        RecurringConfig {
            cron_column: "cron".into(),
            timezone_column: Some("tz".into()),
        }
    }

    #[test]
    fn a_rows_next_run_is_read_in_its_own_time_zone() {
        let recurring = reports();
        // 2027-01-04 10:00:00 UTC.
        let now = UNIX_EPOCH + Duration::from_secs(1_799_056_800);
        let berlin = recurring
            .schedule(Some("0 12 * * *"), Some("Europe/Berlin"))
            .expect("a schedule");
        let next = berlin.next_run(now).unwrap();
        assert_eq!(utc_datetime(next), "2027-01-04 11:00:00.000000");
        let utc = recurring.schedule(Some("0 12 * * *"), None).unwrap();
        let next = utc.next_run(now).unwrap();
        assert_eq!(utc_datetime(next), "2027-01-04 12:00:00.000000");
    }

    #[test]
    fn a_bad_row_says_which_column_and_why() {
        let recurring = reports();
        let bad = recurring.schedule(Some("every day"), None).unwrap_err();
        assert_eq!(
            bad.to_string(),
            "cron expression \"every day\" in column cron: it has 2 fields: write 5 (minute \
             hour day-of-month month day-of-week), or 6 with seconds first"
        );
        let zone = recurring
            .schedule(Some("@daily"), Some("Berlin"))
            .unwrap_err();
        assert!(
            zone.to_string()
                .starts_with("time zone \"Berlin\" in column tz: unknown time zone"),
            "{zone}"
        );
        let null = recurring.schedule(None, None).unwrap_err();
        assert!(
            null.to_string().starts_with("column cron is NULL"),
            "{null}"
        );
    }
}
