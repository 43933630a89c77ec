//! The status page as HTML: one stylesheet in the page (allowed by its hash in the
//! Content-Security-Policy the endpoint sends), no script, no outside asset, a
//! refresh every few seconds, a table that scrolls sideways on a phone.

use std::fmt::Write;
use std::time::{Duration, UNIX_EPOCH};

use super::sparkline::sparkline;
use super::{CircuitOpenStatus, PauseStatus, QueueStatus, Status, Summary, PER_PAGE};
use crate::telemetry::stats::recent::Percentiles;

/// How often the page reloads itself, in seconds.
pub const REFRESH_SECONDS: u32 = 5;

/// The page's only style, inline; the endpoint allows exactly it by its hash. On a
/// narrow screen each queue becomes a card of labelled lines.
pub const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:1em;color:#222}\
h1{font-size:1.3em}.scroll{overflow-x:auto}table{border-collapse:collapse;min-width:100%}\
th,td{padding:.3em .6em;border-bottom:1px solid #ddd;text-align:left;white-space:nowrap}\
td.num{text-align:right;font-variant-numeric:tabular-nums}tr.failures td{white-space:normal;background:#fafafa}\
.failures table{min-width:0}.failures td{border:0;font-size:.9em}.error{color:#b71c1c}\
.stopped{color:#888}.legend span{margin-right:1em}.done{color:#2e7d32}.failed{color:#c62828}\
.returned{color:#f9a825}footer{margin-top:1em;color:#666;font-size:.85em}\
@media (max-width:700px){.scroll table,.scroll tbody,.scroll tr,.scroll td,.scroll th{display:block;min-width:0}\
.scroll thead{display:none}tr.queue{border-top:2px solid #999;padding-top:.4em}\
td[data-label]{border:0;text-align:left;white-space:normal}\
td[data-label]::before{content:attr(data-label) \": \";font-weight:600}.failures tr{border-bottom:1px solid #ddd}.failures tr:first-child{display:none}}";

/// The whole page.
pub fn render(status: &Status) -> String {
    let mut page = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta http-equiv=\"refresh\" content=\"{REFRESH_SECONDS}\">\
         <title>tableq status</title><style>{STYLE}</style></head><body>\
         <h1>tableq — queues</h1>\
         <p class=\"legend\">Last 15 minutes, per minute: <span class=\"done\">done</span>\
         <span class=\"failed\">failed</span><span class=\"returned\">returned</span></p>\
         {}{}<div class=\"scroll\"><table id=\"queues\"><thead><tr><th>Queue</th>\
         <th>Workers<br>busy / connected / all</th><th>Last 15 min</th><th>Done</th>\
         <th>Failed</th><th>Returned</th><th>Rolled back</th><th>Waiting</th>\
         <th>Oldest waiting</th><th>Action p50 / p99<br>last 5 / 15 min</th></tr></thead><tbody>",
        process_line(status),
        summary(&status.summary)
    );
    if status.queues.is_empty() {
        page.push_str("<tr><td colspan=\"10\">No queue is running yet.</td></tr>");
    }
    for queue in &status.queues {
        queue_rows(&mut page, queue, status.generated_at);
    }
    page.push_str("</tbody></table></div>");
    page.push_str(&pages(status.page, status.pages));
    let _ = writeln!(
        page,
        "<footer>tableq {} · read at {} · refreshes every {REFRESH_SECONDS} s · \
         the same data as JSON: <a href=\"status.json\">status.json</a> · \
         <a href=\"metrics\">metrics</a></footer></body></html>",
        escape(status.version),
        time(status.generated_at)
    );
    page
}

/// The whole process in one line: queues, workers busy, and how many need a look.
fn summary(all: &Summary) -> String {
    let mut line = format!(
        "<p id=\"summary\"><span data-field=\"queues\">{} queue{}</span>, {} running · \
         workers busy / all: {} / {}",
        all.queues,
        if all.queues == 1 { "" } else { "s" },
        all.running,
        all.busy,
        all.workers
    );
    if all.circuit_not_closed > 0 {
        let _ = write!(
            line,
            " · <span class=\"failed\">circuit not closed: {}</span>",
            all.circuit_not_closed
        );
    }
    if all.stopped_claiming > 0 {
        let _ = write!(
            line,
            " · <span class=\"failed\">stopped claiming: {}</span>",
            all.stopped_claiming
        );
    }
    if all.paused > 0 {
        let _ = write!(
            line,
            " · <span data-field=\"paused_queues\">paused: {}</span>",
            all.paused
        );
    }
    line.push_str("</p>");
    line
}

/// Links to the pages before and after, when the queues fill more than one.
fn pages(page: usize, pages: usize) -> String {
    if pages <= 1 {
        return String::new();
    }
    let mut nav = String::from("<nav id=\"pages\">");
    if page > 1 {
        let _ = write!(
            nav,
            "<a href=\"?page={}\" rel=\"prev\">← previous</a> · ",
            page - 1
        );
    }
    let _ = write!(nav, "page {page} of {pages} ({PER_PAGE} queues a page)");
    if page < pages {
        let _ = write!(
            nav,
            " · <a href=\"?page={}\" rel=\"next\">next →</a>",
            page + 1
        );
    }
    nav.push_str("</nav>");
    nav
}

/// A queue's row, then the row of its last failures.
fn queue_rows(page: &mut String, q: &QueueStatus, now: u64) {
    let name = escape(&q.name);
    let class = if q.running { "queue" } else { "queue stopped" };
    let waiting = match q.waiting {
        Some(n) => format!("{n}{}", if q.waiting_capped { "+" } else { "" }),
        None => "–".to_string(),
    };
    let action = action_percentiles(&q.action_recent);
    let (mut circuit, leases_lost) = notes(q.circuit, q.leases_lost);
    circuit.push_str(&circuit_open_note(q.circuit_open.as_ref(), now));
    circuit.push_str(&stopped_note(q.stopped_claiming));
    circuit.push_str(&paused_note(q.paused.as_ref(), now));
    circuit.push_str(&refusing_note(q.database_refuses));
    circuit.push_str(&host_note(q.database_host.as_deref()));
    circuit.push_str(&wake_note(q));
    let gave_up = match q.gave_up {
        Some(n) => format!("<br><span data-field=\"gave_up\">{n} gave up</span>"),
        None => String::new(),
    };
    let _ = write!(
        page,
        "<tr class=\"{class}\" data-queue=\"{name}\"><th scope=\"row\">{name}{circuit}</th>\
         <td data-label=\"Workers busy / connected / all\" data-field=\"workers\">{} / {} / {}</td>\
         <td data-label=\"Last 15 min\">{}</td>\
         <td class=\"num\" data-label=\"Done\" data-field=\"done\">{}</td>\
         <td class=\"num\" data-label=\"Failed\"><span data-field=\"failed\">{}</span>{gave_up}</td>\
         <td class=\"num\" data-label=\"Returned\" data-field=\"returned\">{}{leases_lost}</td>\
         <td class=\"num\" data-label=\"Rolled back\" data-field=\"rolled_back\">{}</td>\
         <td class=\"num\" data-label=\"Waiting\" data-field=\"waiting\">{waiting}</td>\
         <td class=\"num\" data-label=\"Oldest waiting\" data-field=\"oldest_waiting\">{}</td>\
         <td data-label=\"Action p50 / p99\" data-field=\"action\">{action}</td></tr>",
        q.busy,
        q.connected,
        q.workers,
        sparkline(&q.minutes),
        q.done,
        q.failed,
        q.returned,
        q.rolled_back,
        seconds(q.oldest_waiting_seconds),
    );
    failures(page, &name, q, now);
}

/// `since 2 min ago: 3 of the last 5 items failed …; next probe in 25 s` under an
/// open circuit.
fn circuit_open_note(open: Option<&CircuitOpenStatus>, now: u64) -> String {
    let Some(open) = open else {
        return String::new();
    };
    let probe = match open.next_probe_at {
        Some(at) if at > now => format!("next probe in {} s", at - now),
        Some(_) => "next probe due now".to_string(),
        None => "a probe is under way".to_string(),
    };
    format!(
        "<br><span data-field=\"circuit_open\">since {}: {}; {probe}</span>",
        ago(now, open.since_at),
        escape(&open.reason)
    )
}

/// `In flight: 2 — 42 (started 12 s ago; progress: 40%) · …`: the oldest runs of
/// the action under way.
fn in_flight(q: &QueueStatus, now: u64) -> String {
    if q.in_flight == 0 {
        return String::new();
    }
    let runs: Vec<String> = q
        .in_flight_runs
        .iter()
        .map(|run| {
            let more = run.items.saturating_sub(run.keys.len());
            let keys = escape(&run.keys.join(", "));
            let keys = match more {
                0 => keys,
                more => format!("{keys} and {more} more"),
            };
            let progress = match &run.progress {
                Some(line) => format!("; progress: {}", escape(line)),
                None => String::new(),
            };
            format!(
                "<span data-field=\"run\">{keys} (started {}{progress})</span>",
                ago(now, run.started_at)
            )
        })
        .collect();
    format!(
        "<p>In flight: <span data-field=\"in_flight\">{}</span> — {}</p>",
        q.in_flight,
        runs.join(" · ")
    )
}

/// What a queue's row says only when it happens: its circuit not closed, leases
/// lost (lease mode).
fn notes(circuit: &str, leases_lost: u64) -> (String, String) {
    let circuit = match circuit {
        "closed" => String::new(),
        state => format!(
            "<br><span class=\"failed\" data-field=\"circuit\">circuit {}</span>",
            state.replace('_', "-")
        ),
    };
    let leases_lost = match leases_lost {
        0 => String::new(),
        1 => "<br><span data-field=\"leases_lost\">1 lease lost</span>".to_string(),
        lost => format!("<br><span data-field=\"leases_lost\">{lost} leases lost</span>"),
    };
    (circuit, leases_lost)
}

/// `stopped claiming: looping` under a queue's name when it stopped by itself.
fn stopped_note(stopped_claiming: Option<&str>) -> String {
    match stopped_claiming {
        None => String::new(),
        Some(why) => format!(
            "<br><span class=\"failed\" data-field=\"stopped_claiming\">stopped claiming: {}</span>",
            escape(why)
        ),
    }
}

/// `wakes on the binary log (12 wake-ups)`, or `polls: why`, under a queue's name.
fn wake_note(q: &QueueStatus) -> String {
    let text = match (q.wake.source, &q.wake.why) {
        ("binlog", _) => format!("wakes on the binary log ({} wake-ups)", q.wake_events),
        (_, Some(why)) => format!("polls: {}", escape(why)),
        _ => "polls".to_string(),
    };
    format!("<br><span data-field=\"wake\">{text}</span>")
}

/// `database read-only: claims when it takes writes` under a queue's name while
/// its database refuses writes.
fn refusing_note(refusing: Option<&str>) -> String {
    match refusing {
        None => String::new(),
        Some(why) => format!(
            "<br><span class=\"failed\" data-field=\"database_refuses\">database {}: claims \
             when it takes writes</span>",
            escape(why)
        ),
    }
}

/// `database host db2:3306` under a queue's name when its URL lists several hosts.
fn host_note(host: Option<&str>) -> String {
    match host {
        None => String::new(),
        Some(host) => format!(
            "<br><span data-field=\"database_host\">database host {}</span>",
            escape(host)
        ),
    }
}

/// `paused (reason) by who, 5 min ago, until …` under a queue's name while it is
/// paused by `tableq pause`.
fn paused_note(paused: Option<&PauseStatus>, now: u64) -> String {
    let Some(paused) = paused else {
        return String::new();
    };
    let reason = match paused.reason.as_str() {
        "" => String::new(),
        reason => format!(" ({})", escape(reason)),
    };
    let until = match paused.until_at {
        Some(at) => format!(", until {}", time(at)),
        None => ", until resumed".to_string(),
    };
    format!(
        "<br><span data-field=\"paused\">paused{reason} by {}, {}{until}</span>",
        escape(&paused.by),
        ago(now, paused.since_at)
    )
}

/// The row under a queue's: its runs under way, then its last failures grouped by
/// error text (collapsed: the summary says how many and how many kinds); each group
/// with its count, when it last and first happened, and a few keys.
fn failures(page: &mut String, name: &str, q: &QueueStatus, now: u64) {
    let groups = &q.failure_groups;
    let _ = write!(
        page,
        "<tr class=\"failures\" data-failures=\"{name}\"><td colspan=\"10\">{}",
        in_flight(q, now)
    );
    if groups.is_empty() {
        page.push_str("No recent failures.</td></tr>");
        return;
    }
    let total: usize = groups.iter().map(|g| g.count).sum();
    let _ = write!(
        page,
        "<details><summary>Last {total} failure{}, {} kind{}</summary><table><tr><th>Count</th>\
         <th>Last</th><th>First</th><th>Status</th><th>Error</th><th>Keys</th></tr>",
        if total == 1 { "" } else { "s" },
        groups.len(),
        if groups.len() == 1 { "" } else { "s" }
    );
    for group in groups {
        let status = group.status.map(|s| s.to_string()).unwrap_or_default();
        let keys: String = group
            .keys
            .iter()
            .map(|key| format!("<span data-field=\"key\">{}</span> ", escape(key)))
            .collect();
        let _ = write!(
            page,
            "<tr class=\"failure\"><td class=\"num\" data-label=\"Count\" data-field=\"count\">{}</td>\
             <td data-label=\"Last\">{}</td><td data-label=\"First\">{}</td>\
             <td data-label=\"Status\" data-field=\"status\">{status}</td>\
             <td class=\"error\" data-label=\"Error\" data-field=\"error\">{}</td>\
             <td data-label=\"Keys\">{keys}</td></tr>",
            group.count,
            ago(now, group.last_at),
            ago(now, group.first_at),
            escape(&group.error)
        );
    }
    page.push_str("</table></details></td></tr>");
}

/// `12 s ago`, `5 min ago`, `3 h ago`, `2 d ago`, with the time itself on hover.
fn ago(now: u64, at: u64) -> String {
    let secs = now.saturating_sub(at);
    let text = match secs {
        0..60 => format!("{secs} s ago"),
        60..3600 => format!("{} min ago", secs / 60),
        3600..86_400 => format!("{} h ago", secs / 3600),
        _ => format!("{} d ago", secs / 86_400),
    };
    format!("<time title=\"{}\">{text}</time>", time(at))
}

/// `host web-1 · pid 4242 · up 3h 2m`: which copy this is, as several run side by
/// side.
fn process_line(status: &Status) -> String {
    let uptime = status
        .uptime_seconds
        .map(|s| {
            format!(
                " · up {}",
                humantime::format_duration(Duration::from_secs(s))
            )
        })
        .unwrap_or_default();
    format!(
        "<p id=\"process\">host <b data-field=\"host\">{}</b> · pid <span data-field=\"pid\">{}</span>{uptime}</p>",
        escape(&status.host),
        status.pid
    )
}

/// `12 ms`, `2.5 s`, `3m 20s`; `–` for nothing yet.
/// Each window's `p50 / p99`, a line each: `5 min: 340 ms / 1.2 s`.
fn action_percentiles(windows: &[Percentiles]) -> String {
    let lines: Vec<String> = windows
        .iter()
        .map(|w| {
            format!(
                "<span data-field=\"action_{}m\">{} min: {} / {}</span>",
                w.minutes,
                w.minutes,
                seconds(w.p50_seconds),
                seconds(w.p99_seconds)
            )
        })
        .collect();
    lines.join("<br>")
}

fn seconds(value: Option<f64>) -> String {
    match value {
        None => "–".to_string(),
        // A sub-millisecond action is not "0 ms".
        Some(s) if s < 0.00995 => format!("{:.1} ms", s * 1000.0),
        Some(s) if s < 1.0 => format!("{} ms", (s * 1000.0).round()),
        Some(s) if s < 60.0 => format!("{s:.1} s"),
        Some(s) => humantime::format_duration(Duration::from_secs(s as u64)).to_string(),
    }
}

/// A unix time as an HTTP date (UTC).
fn time(unix: u64) -> String {
    httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(unix))
}

/// Text made safe for HTML, in an element or a quoted attribute.
fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '&' => escaped.push_str("&amp;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            c => escaped.push(c),
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn says_an_open_circuit_and_lost_leases_only_when_they_happen() {
        assert_eq!(notes("closed", 0), (String::new(), String::new()));
        let half_open = crate::telemetry::stats::CircuitState::HalfOpen.name();
        let (circuit, lost) = notes(half_open, 2);
        assert!(
            circuit.contains("data-field=\"circuit\">circuit half-open<"),
            "{circuit}"
        );
        assert!(
            lost.contains("data-field=\"leases_lost\">2 leases lost<"),
            "{lost}"
        );
        assert!(notes("closed", 1).1.contains(">1 lease lost<"));
        assert_eq!(stopped_note(None), "");
        assert!(stopped_note(Some("looping")).contains(">stopped claiming: looping<"));
    }

    #[test]
    fn escapes_what_a_row_holds_and_formats_times() {
        assert_eq!(
            escape("<b a=\"1\">&'"),
            "&lt;b a=&quot;1&quot;&gt;&amp;&#39;"
        );
        assert_eq!(seconds(Some(0.0125)), "13 ms");
        assert_eq!(seconds(Some(0.00042)), "0.4 ms");
        assert_eq!(seconds(Some(2.5)), "2.5 s");
        assert_eq!(seconds(Some(200.0)), "3m 20s");
        assert_eq!(seconds(None), "–");
        assert!(ago(1_000, 988).contains(">12 s ago<"));
        assert!(ago(10_000, 9_700).contains(">5 min ago<"));
        assert!(ago(100_000, 89_200).contains(">3 h ago<"));
    }
}
