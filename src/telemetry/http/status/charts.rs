//! A queue's history as charts, drawn on the server: throughput (done, failed,
//! gave up), the action's p95 and the backlog, over the last hour, day or week.
//! Each chart is an inline SVG with attributes only (no style attribute, no script:
//! the page's Content-Security-Policy allows it, and it works offline); its axis
//! labels are HTML beside it, so they stay readable however narrow the screen. Every
//! data point is a `<circle data-at="…" data-value="…">` (with a `<title>` for the
//! pointer), each line a `<polyline data-series="…" data-points-count="…">`.

use std::fmt::Write;

use super::html::escape;
use crate::db::history::minutes::Since;
use crate::db::history::Bucket;

/// The plot's size in the SVG's own units; it scales to its box's width.
const WIDTH: f64 = 300.0;
const HEIGHT: f64 = 100.0;
/// Room above and below the lines, so a point at 0 or at the top shows whole.
const PAD: f64 = 4.0;

/// How far back the charts look: the page's `?since=1h|24h|7d`; the last hour
/// when absent or not one of them.
pub fn since_asked(query: Option<&str>) -> Since {
    query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .find_map(|pair| pair.strip_prefix("since="))
        .and_then(Since::parse)
        .unwrap_or(Since::Hour)
}

const EVERY_SINCE: [Since; 3] = [Since::Hour, Since::Day, Since::Week];

/// As the query and the API write it.
pub fn since_query(since: Since) -> &'static str {
    match since {
        Since::Hour => "1h",
        Since::Day => "24h",
        Since::Week => "7d",
    }
}

/// As the page says it: the window, and its buckets.
fn since_words(since: Since) -> (&'static str, &'static str) {
    match since {
        Since::Hour => ("1 h", "per minute"),
        Since::Day => ("24 h", "per 5 minutes"),
        Since::Week => ("7 d", "per hour"),
    }
}

/// One line of a chart: its name (the legend's, and `data-series`), its colour,
/// and its points, `(at, value)`, oldest first.
struct Series {
    name: &'static str,
    colour: &'static str,
    points: Vec<(u64, f64)>,
}

impl Series {
    /// The line of `value` over `buckets`, leaving out the buckets without one.
    fn of(
        name: &'static str,
        colour: &'static str,
        buckets: &[Bucket],
        value: fn(&Bucket) -> Option<f64>,
    ) -> Series {
        let points = buckets
            .iter()
            .filter_map(|b| value(b).map(|v| (b.at, v)))
            .collect();
        Series {
            name,
            colour,
            points,
        }
    }
}

/// A chart's frame: its id, its title, how its values read, and the time it spans.
struct Frame<'a> {
    id: &'a str,
    title: String,
    unit: fn(f64) -> String,
    from: u64,
    to: u64,
}

/// The history section: which window, the links to the others, and the three
/// charts of `buckets` (every copy's, merged) up to `now`.
pub fn history_charts(buckets: &[Bucket], since: Since, now: u64) -> String {
    let mut html = String::from("<h2 id=\"history\">History</h2><p class=\"since\">Over the last ");
    let links: Vec<String> = EVERY_SINCE
        .iter()
        .map(|&other| match other == since {
            true => format!("<b data-field=\"since\">{}</b>", since_words(other).0),
            false => format!(
                "<a href=\"?since={}#history\">{}</a>",
                since_query(other),
                since_words(other).0
            ),
        })
        .collect();
    let per = since_words(since).1;
    let _ = write!(html, "{} · every copy, {per} (UTC)</p>", links.join(" · "));
    if buckets
        .iter()
        .all(|b| b.done + b.failed + b.returned + b.held_back == 0 && b.backlog.is_none())
    {
        html.push_str(
            "<p data-field=\"no_history\">Nothing recorded yet in this window: each copy writes \
             its minutes once a minute.</p>",
        );
        return html;
    }
    let from = now.saturating_sub(since.minutes().0 * 60);
    let frame = |id, title: &str, unit| Frame {
        id,
        title: format!("{title} {per}"),
        unit,
        from,
        to: now,
    };
    html.push_str("<div class=\"charts\">");
    let throughput = [
        Series::of("done", "#2e7d32", buckets, |b| Some(b.done as f64)),
        Series::of("failed", "#c62828", buckets, |b| Some(b.failed as f64)),
        Series::of("gave up", "#6a1b9a", buckets, |b| Some(b.gave_up as f64)),
    ];
    chart(
        &mut html,
        &frame("chart-throughput", "Items", count),
        &throughput,
    );
    let p95 = [Series::of("p95", "#1565c0", buckets, |b| b.p95_ms)];
    chart(&mut html, &frame("chart-p95", "Action p95", millis), &p95);
    let backlog = [Series::of("backlog", "#ef6c00", buckets, |b| {
        b.backlog.map(|n| n as f64)
    })];
    chart(
        &mut html,
        &frame("chart-backlog", "Backlog", count),
        &backlog,
    );
    html.push_str("</div>");
    html
}

/// One chart: its caption and legend, the y axis's labels, the plot, the times
/// under it.
fn chart(html: &mut String, frame: &Frame, series: &[Series]) {
    let highest = series
        .iter()
        .flat_map(|s| s.points.iter().map(|(_, v)| *v))
        .fold(0.0, f64::max);
    let top = nice_ceiling(highest);
    let count: usize = series.iter().map(|s| s.points.len()).sum();
    let legend: String = series
        .iter()
        .map(|s| {
            format!(
                "<span class=\"key\"><svg viewBox=\"0 0 10 10\" width=\"10\" height=\"10\" \
                 aria-hidden=\"true\"><rect width=\"10\" height=\"10\" fill=\"{}\"/></svg> {}</span>",
                s.colour, s.name
            )
        })
        .collect();
    let _ = write!(
        html,
        "<figure class=\"chart\" id=\"{}\" data-points-count=\"{count}\"><figcaption>{} \
         <span class=\"legend\">{legend}</span></figcaption><div class=\"plot\"><div class=\"y\" \
         aria-hidden=\"true\"><span>{}</span><span>{}</span><span>{}</span></div>",
        frame.id,
        escape(&frame.title),
        (frame.unit)(top),
        (frame.unit)(top / 2.0),
        (frame.unit)(0.0)
    );
    let _ = write!(
        html,
        "<svg viewBox=\"0 0 {WIDTH} {HEIGHT}\" role=\"img\" aria-label=\"{}\">",
        escape(&frame.title)
    );
    for y in [PAD, HEIGHT / 2.0, HEIGHT - PAD] {
        let _ = write!(
            html,
            "<line x1=\"0\" x2=\"{WIDTH}\" y1=\"{y}\" y2=\"{y}\" stroke=\"#ddd\" stroke-width=\"0.5\"/>"
        );
    }
    for line in series {
        plot(html, frame, line, top);
    }
    let middle = frame.from + (frame.to - frame.from) / 2;
    let _ = write!(
        html,
        "</svg><div class=\"x\" aria-hidden=\"true\"><span>{}</span><span>{}</span>\
         <span>{}</span></div></div></figure>",
        clock(frame.from, frame.to - frame.from),
        clock(middle, frame.to - frame.from),
        clock(frame.to, frame.to - frame.from)
    );
}

/// A series' line and its points, scaled to `top`.
fn plot(html: &mut String, frame: &Frame, series: &Series, top: f64) {
    let span = (frame.to.saturating_sub(frame.from)).max(1) as f64;
    let at = |(t, v): (u64, f64)| {
        let x = (t.saturating_sub(frame.from) as f64 / span).min(1.0) * WIDTH;
        let y = HEIGHT - PAD - v / top * (HEIGHT - 2.0 * PAD);
        (x, y)
    };
    let points: Vec<String> = series
        .points
        .iter()
        .map(|p| {
            let (x, y) = at(*p);
            format!("{x:.1},{y:.1}")
        })
        .collect();
    // Gave up is most often failed again (every failure gave up): dashed, so the
    // line under it shows through.
    let dashed = match series.name {
        "gave up" => " stroke-dasharray=\"3 2\"",
        _ => "",
    };
    let _ = write!(
        html,
        "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.2\"{dashed} data-series=\"{}\" \
         data-points-count=\"{}\" points=\"{}\"/>",
        series.colour,
        series.name,
        points.len(),
        points.join(" ")
    );
    for point in &series.points {
        let (x, y) = at(*point);
        let _ = write!(
            html,
            "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"1.6\" fill=\"{}\" data-series=\"{}\" \
             data-at=\"{}\" data-value=\"{}\"><title>{} UTC: {} {}</title></circle>",
            series.colour,
            series.name,
            point.0,
            point.1,
            clock(point.0, 0),
            series.name,
            (frame.unit)(point.1)
        );
    }
}

/// The smallest of 1, 2, 5 × 10ⁿ at or above `value` (1 for nothing).
fn nice_ceiling(value: f64) -> f64 {
    if value <= 1.0 {
        return 1.0;
    }
    let scale = 10f64.powf(value.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|step| step * scale)
        .find(|nice| *nice >= value)
        .unwrap_or(10.0 * scale)
}

/// A count, short: `40`, `1.5k`, `2M`.
fn count(value: f64) -> String {
    match value {
        v if v >= 1e6 => format!("{}M", trim(v / 1e6)),
        v if v >= 1e3 => format!("{}k", trim(v / 1e3)),
        v => trim(v),
    }
}

/// A time in milliseconds, short: `40 ms`, `1.5 s`.
fn millis(value: f64) -> String {
    match value {
        v if v >= 1_000.0 => format!("{} s", trim(v / 1_000.0)),
        v => format!("{} ms", trim(v)),
    }
}

/// At most one decimal, none when it is `.0`.
fn trim(value: f64) -> String {
    let text = format!("{value:.1}");
    text.strip_suffix(".0").unwrap_or(&text).to_string()
}

/// `13:05` (UTC); over a window longer than a day, `Mon 13:00`.
fn clock(unix: u64, window: u64) -> String {
    let (days, seconds) = (unix / 86_400, unix % 86_400);
    let hm = format!("{:02}:{:02}", seconds / 3_600, seconds % 3_600 / 60);
    if window <= 86_400 {
        return hm;
    }
    // 1 January 1970 was a Thursday.
    let day = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][(days % 7) as usize];
    format!("{day} {hm}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket(at: u64, done: u64, failed: u64, p95: Option<f64>) -> Bucket {
        Bucket {
            at,
            done,
            failed,
            gave_up: failed / 2,
            p95_ms: p95,
            backlog: Some(done * 10),
            ..Bucket::default()
        }
    }

    /// Each bucket is a point a test can find, at its time with its value, and each
    /// line says how many points it has; a bucket without a p95 is left out of that
    /// line, not drawn at 0.
    #[test]
    fn every_bucket_is_a_point_with_its_time_and_value() {
        let now = 1_800_000_000;
        let buckets = [
            bucket(now - 120, 40, 4, Some(12.5)),
            bucket(now - 60, 10, 0, None),
        ];
        let html = history_charts(&buckets, Since::Hour, now);
        assert_eq!(html.matches("<svg viewBox=\"0 0 300 100\"").count(), 3);
        let done = format!(
            "data-series=\"done\" data-at=\"{}\" data-value=\"40\"",
            now - 120
        );
        assert!(html.contains(&done), "{html}");
        assert!(html.contains("data-series=\"failed\" data-points-count=\"2\""));
        assert!(html.contains("data-series=\"p95\" data-points-count=\"1\""));
        assert!(html.contains("data-series=\"p95\" data-at=\"1799999880\" data-value=\"12.5\""));
        assert!(html.contains("id=\"chart-throughput\" data-points-count=\"6\""));
        assert!(html.contains("id=\"chart-backlog\" data-points-count=\"2\""));
        assert!(!html.contains("style="), "no style attribute: {html}");
        // The y axis reaches 50 (the busiest bucket, 40, rounded up nicely).
        assert!(
            html.contains("<span>50</span><span>25</span><span>0</span>"),
            "{html}"
        );
        assert!(html.contains("<b data-field=\"since\">1 h</b>"));
        assert!(html.contains("<a href=\"?since=24h#history\">24 h</a>"));
    }

    /// Points sit where their time is: the window's start at the left edge, now at
    /// the right; the highest at the top.
    #[test]
    fn points_sit_at_their_time_and_height() {
        let now = 1_800_000_000;
        let buckets = [bucket(now - 3_600, 100, 0, None), bucket(now, 0, 0, None)];
        let html = history_charts(&buckets, Since::Hour, now);
        assert!(html.contains("points=\"0.0,4.0 300.0,96.0\""), "{html}");
    }

    #[test]
    fn the_window_is_read_from_the_query() {
        assert_eq!(since_asked(None), Since::Hour);
        assert_eq!(since_asked(Some("q=x&since=7d")), Since::Week);
        assert_eq!(since_asked(Some("since=24h")), Since::Day);
        assert_eq!(since_asked(Some("since=1y")), Since::Hour);
        assert_eq!(since_query(Since::Day), "24h");
    }

    #[test]
    fn axis_labels_are_short() {
        assert_eq!(nice_ceiling(0.0), 1.0);
        assert_eq!(nice_ceiling(40.0), 50.0);
        assert_eq!(nice_ceiling(101.0), 200.0);
        assert_eq!(nice_ceiling(1_000.0), 1_000.0);
        assert_eq!(count(1_500.0), "1.5k");
        assert_eq!(count(25.0), "25");
        assert_eq!(millis(2_500.0), "2.5 s");
        assert_eq!(millis(0.5), "0.5 ms");
        assert_eq!(clock(1_800_000_000, 3_600), "08:00");
        assert_eq!(clock(1_800_000_000, 604_800), "Fri 08:00");
    }

    /// With nothing recorded, the section says so rather than drawing empty axes.
    #[test]
    fn nothing_recorded_is_said() {
        let html = history_charts(&[], Since::Week, 1_800_000_000);
        assert!(html.contains("data-field=\"no_history\""), "{html}");
        assert!(!html.contains("<svg"));
        assert!(html.contains("<b data-field=\"since\">7 d</b>"));
    }
}
