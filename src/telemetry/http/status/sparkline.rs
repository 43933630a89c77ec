//! A small inline SVG chart of done, failed and returned items per minute: one line
//! each, drawn with attributes only (no style attribute, so a strict CSP allows it).

use std::fmt::Write;

use crate::telemetry::stats::observed::Minute;

const WIDTH: f64 = 150.0;
const HEIGHT: f64 = 30.0;

/// The chart of `minutes`, oldest at the left.
pub fn sparkline(minutes: &[Minute]) -> String {
    let highest = minutes
        .iter()
        .flat_map(|m| [m.done, m.failed, m.returned])
        .max()
        .unwrap_or(0)
        .max(1);
    let mut svg = format!(
        r#"<svg class="spark" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="done, failed and returned per minute, last {} minutes">"#,
        minutes.len()
    );
    type Line = (&'static str, fn(&Minute) -> u64);
    let lines: [Line; 3] = [
        ("#2e7d32", |m| m.done),
        ("#c62828", |m| m.failed),
        ("#f9a825", |m| m.returned),
    ];
    for (colour, value) in lines {
        let points = points(minutes, highest, value);
        let _ = write!(
            svg,
            r#"<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{points}"/>"#
        );
    }
    svg.push_str("</svg>");
    svg
}

fn points(minutes: &[Minute], highest: u64, value: fn(&Minute) -> u64) -> String {
    let step = WIDTH / (minutes.len().max(2) - 1) as f64;
    minutes
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let x = i as f64 * step;
            let y = HEIGHT - 1.0 - (value(m) as f64 / highest as f64) * (HEIGHT - 2.0);
            format!("{x:.1},{y:.1}")
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_three_lines_scaled_to_the_busiest_minute() {
        let minutes = [
            Minute::default(),
            Minute {
                done: 10,
                failed: 5,
                ..Minute::default()
            },
        ];
        let svg = sparkline(&minutes);
        assert_eq!(svg.matches("<polyline").count(), 3);
        assert!(svg.contains(r#"points="0.0,29.0 150.0,1.0""#), "{svg}");
        assert!(svg.contains(r#"points="0.0,29.0 150.0,15.0""#), "{svg}");
        assert!(!svg.contains("style="));
    }
}
