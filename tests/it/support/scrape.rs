//! Reading one value out of a Prometheus scrape.

/// The value of the sample `series` (`name{labels}` exactly as exported), if the
/// scrape has it.
pub fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|line| {
        let value = line.strip_prefix(series)?.strip_prefix(' ')?;
        value.split_whitespace().next()?.parse().ok()
    })
}
