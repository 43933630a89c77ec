//! A duration as a message says it: to the millisecond under a second, to a tenth
//! of a second under ten, then in whole seconds (`651ms`, `1.7s`, `42s`, `2m 5s`),
//! never `651ms 193us 796ns`. The one helper every log line and error uses.

use std::time::Duration;

/// `wait` rounded to a precision a person reads.
pub fn rounded(wait: Duration) -> String {
    let millis = wait.as_secs_f64() * 1000.0;
    if millis < 999.5 {
        format!("{}ms", millis.round())
    } else if millis < 9_950.0 {
        format!("{:.1}s", millis / 1000.0)
    } else {
        let seconds = Duration::from_secs((millis / 1000.0).round() as u64);
        humantime::format_duration(seconds).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `651ms 193us 796ns` reads `651ms`; `1s 651ms` reads `1.7s`.
    #[test]
    fn durations_are_rounded_to_what_a_person_reads() {
        let said = |nanos: u64| rounded(Duration::from_nanos(nanos));
        assert_eq!(said(651_193_796), "651ms");
        assert_eq!(said(0), "0ms");
        assert_eq!(said(999_400_000), "999ms");
        assert_eq!(said(999_600_000), "1.0s");
        assert_eq!(said(1_651_193_796), "1.7s");
        assert_eq!(said(9_960_000_000), "10s");
        assert_eq!(said(42_400_000_000), "42s");
        assert_eq!(said(125_300_000_000), "2m 5s");
        assert_eq!(said(3_723_000_000_000), "1h 2m 3s");
    }
}
