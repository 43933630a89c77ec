//! The database's clock, as seen from here: how far its `NOW()` (in its own time
//! zone, as DATETIME columns are written) and its unix time are from this process's
//! clock. With it, a row's "waiting since" value gives an age by the database's
//! clock without asking the database each time.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Value};

use super::connect::QUICK_TIMEOUT;
use super::deadline::within;
use super::error::DbError;
use super::session::Session;

/// The database's clock against this process's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DbClock {
    /// `NOW(6)` read as if it were UTC, minus this process's unix time, in µs.
    local_offset_micros: i64,
    /// `UNIX_TIMESTAMP(NOW(6))` minus this process's unix time, in µs.
    unix_offset_micros: i64,
}

impl DbClock {
    /// Reads the clock on `session`, then commits (the session has autocommit off).
    pub async fn read(session: &mut Session) -> Result<DbClock, DbError> {
        let clock = DbClock::read_on(session.parts().0).await?;
        session.commit().await?;
        Ok(clock)
    }

    /// Reads the clock on `conn`.
    pub async fn read_on(conn: &mut Conn) -> Result<DbClock, DbError> {
        let query = conn.query_first::<(Value, Value), _>("SELECT NOW(6), UNIX_TIMESTAMP(NOW(6))");
        let here = unix_micros(SystemTime::now());
        let row = within("the database's clock", QUICK_TIMEOUT, query).await?;
        let (now, unix) = row.unwrap_or((Value::NULL, Value::NULL));
        Ok(DbClock::offsets(&now, &unix, here))
    }

    /// The clock from `NOW(6)` and `UNIX_TIMESTAMP(NOW(6))` read at `here`.
    pub fn from_values(now: &Value, unix: &Value, here: SystemTime) -> DbClock {
        DbClock::offsets(now, unix, unix_micros(here))
    }

    fn offsets(now: &Value, unix: &Value, here: i64) -> DbClock {
        DbClock {
            local_offset_micros: datetime_micros(now).unwrap_or(here) - here,
            unix_offset_micros: number_micros(unix).unwrap_or(here) - here,
        }
    }

    /// How long ago `since` was, by the database's clock, at `now` here: `since` is
    /// a DATETIME or TIMESTAMP (in the database's time zone) or a unix time in
    /// seconds. `None` for NULL or a value that is neither; a time to come is zero.
    pub fn age(&self, since: &Value, now: SystemTime) -> Option<Duration> {
        let here = unix_micros(now);
        let (then, db_now) = match since {
            Value::Date(..) => (datetime_micros(since)?, here + self.local_offset_micros),
            Value::Bytes(text) if !looks_like_number(text) => {
                (datetime_micros(since)?, here + self.local_offset_micros)
            }
            _ => (number_micros(since)?, here + self.unix_offset_micros),
        };
        Some(Duration::from_micros(
            db_now.saturating_sub(then).max(0) as u64
        ))
    }
}

impl DbClock {
    /// `now` here, on the database's clock (its unix time), as last read: a little
    /// late rather than early, by the time the reading's question took to arrive.
    pub fn unix_now(&self, now: SystemTime) -> SystemTime {
        let micros = unix_micros(now).saturating_add(self.unix_offset_micros);
        UNIX_EPOCH + Duration::from_micros(micros.max(0) as u64)
    }
}

/// This process's clock in µs since the epoch.
fn unix_micros(at: SystemTime) -> i64 {
    let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    i64::try_from(since.as_micros()).unwrap_or(i64::MAX)
}

fn looks_like_number(text: &[u8]) -> bool {
    std::str::from_utf8(text).is_ok_and(|t| t.trim().parse::<f64>().is_ok())
}

/// A unix time (seconds, maybe fractional) in µs.
fn number_micros(value: &Value) -> Option<i64> {
    let seconds = match value {
        Value::Int(n) => *n as f64,
        Value::UInt(n) => *n as f64,
        Value::Float(n) => f64::from(*n),
        Value::Double(n) => *n,
        Value::Bytes(text) => std::str::from_utf8(text).ok()?.trim().parse().ok()?,
        _ => return None,
    };
    Some((seconds * 1e6).round() as i64)
}

/// A DATETIME (binary, or as text `YYYY-MM-DD HH:MM:SS[.ffffff]`) in µs since the
/// epoch, reading it as if it were UTC.
fn datetime_micros(value: &Value) -> Option<i64> {
    let (y, mo, d, h, mi, s, us) = match value {
        Value::Date(y, mo, d, h, mi, s, us) => (*y, *mo, *d, *h, *mi, *s, *us),
        Value::Bytes(text) => parse_datetime(std::str::from_utf8(text).ok()?)?,
        _ => return None,
    };
    let days = days_from_civil(i64::from(y), u32::from(mo), u32::from(d));
    let seconds = days * 86_400 + i64::from(h) * 3600 + i64::from(mi) * 60 + i64::from(s);
    Some(seconds * 1_000_000 + i64::from(us))
}

type Parts = (u16, u8, u8, u8, u8, u8, u32);

fn parse_datetime(text: &str) -> Option<Parts> {
    let (date, time) = text
        .trim()
        .split_once([' ', 'T'])
        .unwrap_or((text.trim(), "0:0:0"));
    let mut date = date.split('-').map(str::parse::<u32>);
    let (y, mo, d) = (date.next()?.ok()?, date.next()?.ok()?, date.next()?.ok()?);
    let (time, fraction) = time.split_once('.').unwrap_or((time, ""));
    let mut time = time.split(':').map(str::parse::<u32>);
    let (h, mi, s) = (time.next()?.ok()?, time.next()?.ok()?, time.next()?.ok()?);
    let us = if fraction.is_empty() {
        0
    } else {
        format!("{fraction:0<6}").get(..6)?.parse().ok()?
    };
    Some((y as u16, mo as u8, d as u8, h as u8, mi as u8, s as u8, us))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_by_the_database_clock() {
        // The database's clock runs 10 s ahead, its time zone 2 h east of UTC.
        let clock = DbClock {
            local_offset_micros: (2 * 3600 + 10) * 1_000_000,
            unix_offset_micros: 10_000_000,
        };
        let now = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        // 1_800_000_000 is 2027-01-15 08:00:00 UTC; 10:00:10 there, 90 s earlier:
        let since = Value::Date(2027, 1, 15, 9, 58, 40, 0);
        assert_eq!(clock.age(&since, now), Some(Duration::from_secs(90)));
        let text = Value::Bytes(b"2027-01-15 09:58:40.500000".to_vec());
        assert_eq!(clock.age(&text, now), Some(Duration::from_millis(89_500)));
        let unix = Value::Int(1_800_000_000 - 50);
        assert_eq!(clock.age(&unix, now), Some(Duration::from_secs(60)));
        let decimal = Value::Bytes(b"1799999990.25".to_vec());
        assert_eq!(
            clock.age(&decimal, now),
            Some(Duration::from_micros(19_750_000))
        );
        assert_eq!(clock.age(&Value::NULL, now), None);
        let future = Value::Int(1_900_000_000);
        assert_eq!(clock.age(&future, now), Some(Duration::ZERO));
    }
}
