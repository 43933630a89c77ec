//! The status page as HTML: one stylesheet in the page (allowed by its hash in the
//! Content-Security-Policy the endpoint sends), no script, no outside asset, a
//! refresh every few seconds, a table that scrolls sideways on a phone.

use std::fmt::Write;
use std::time::{Duration, UNIX_EPOCH};

use super::sparkline::sparkline;
use super::{
    CircuitOpenStatus, PauseStatus, QueueStatus, ScheduleStatus, Status, Summary, Viewer, PER_PAGE,
};
use crate::telemetry::log::Escaped;
use crate::telemetry::stats::monitor::STARTING;
use crate::telemetry::stats::recent::Percentiles;

/// How often the page reloads itself, in seconds.
pub const REFRESH_SECONDS: u32 = 5;

/// The page's only style, inline; the endpoint allows exactly it by its hash. On a
/// narrow screen each queue becomes a card of labelled lines.
pub const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:1em;color:#222;max-width:100%}\
h1{font-size:1.3em;margin:.2em 0}h2{font-size:1.1em;margin:1.2em 0 .4em}\
.scroll{overflow-x:auto}table{border-collapse:collapse;width:100%}\
th,td{padding:.3em .5em;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}\
thead th{font-size:.85em;font-weight:600}thead th.num{text-align:right}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}\
th[scope=row]{overflow-wrap:anywhere;max-width:20em;font-weight:normal}th[scope=row] a{font-weight:600}\
.note{font-size:.85em;color:#555;overflow-wrap:anywhere}p.note{background:#f5f5f5;padding:.4em .6em}\
.error{color:#b71c1c;overflow-wrap:anywhere}.stopped{color:#888}.legend span{margin-right:1em}\
.done{color:#2e7d32}.failed{color:#c62828}.returned{color:#f9a825}footer{margin-top:1em;color:#666;font-size:.85em}\
nav.top{float:right}form{display:inline;margin:0}form.block{display:block;margin:.4em 0}\
input,button{font:inherit}button{cursor:pointer}.notice{background:#e8f5e9;padding:.4em .6em}\
dl.settings{display:grid;grid-template-columns:max-content 1fr;gap:.2em 1em}dl.settings dd{margin:0;overflow-wrap:anywhere;white-space:pre-wrap}\
pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#f5f5f5;padding:.5em}\
nav.top a{margin-right:.6em}td.cell{overflow-wrap:anywhere;max-width:24em}input[type=search]{max-width:100%}\
.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(16em,1fr));gap:1em}\
figure.chart{margin:0;min-width:0}figcaption{font-weight:600;font-size:.9em;margin-bottom:.2em}\
figcaption .legend{font-weight:normal;font-size:.9em}.legend .key{margin-right:.6em;white-space:nowrap}\
.plot{display:grid;grid-template-columns:auto minmax(0,1fr);column-gap:.3em}.plot svg{width:100%;height:auto;display:block}\
.plot .y{display:flex;flex-direction:column;justify-content:space-between;text-align:right}\
.plot .y,.plot .x{font-size:.75em;color:#555;font-variant-numeric:tabular-nums}\
.plot .x{grid-column:2;display:flex;justify-content:space-between}\
@media (max-width:700px){.scroll table,.scroll tbody,.scroll tr,.scroll td,.scroll th{display:block;max-width:none}\
.scroll thead{display:none}.scroll tbody tr{border-top:2px solid #999;padding-top:.4em}\
td[data-label]{border:0;text-align:left}\
td[data-label]::before{content:attr(data-label) \": \";font-weight:600}}";

/// The headings of a table of queues, a line each (the list, a queue's page).
pub const QUEUE_HEADINGS: &str = "<thead><tr><th>Queue</th>\
    <th class=\"num\" title=\"busy / connected / all\">Workers</th><th>Last 15 min</th>\
    <th class=\"num\">Done</th><th class=\"num\">Failed</th><th class=\"num\">Returned</th>\
    <th class=\"num\">Rolled back</th><th class=\"num\">Waiting</th><th class=\"num\">Oldest waiting</th>\
    <th class=\"num\" title=\"last 5 / 15 min\">Action p50 / p99</th></tr></thead><tbody>";

/// The whole page: the process, what every queue shares, then a line per queue.
pub fn render(status: &Status, viewer: &Viewer) -> String {
    let shared = shared_wake(&status.queues);
    let mut page = head("tableq status", true);
    let _ = write!(
        page,
        "{}<h1>tableq — queues</h1>{}{}{}",
        top_nav(viewer, ""),
        notice(viewer),
        process_line(status),
        summary(&status.summary)
    );
    if let Some(note) = &shared {
        let _ = write!(
            page,
            "<p class=\"note\" data-field=\"shared_note\">Every queue {note}</p>"
        );
    }
    page.push_str(
        "<p class=\"legend\">Last 15 minutes, per minute: <span class=\"done\">done</span>\
         <span class=\"failed\">failed</span><span class=\"returned\">returned</span></p>\
         <div class=\"scroll\"><table id=\"queues\">",
    );
    page.push_str(QUEUE_HEADINGS);
    if status.queues.is_empty() {
        page.push_str("<tr><td colspan=\"10\">No queue is running yet.</td></tr>");
    }
    for queue in &status.queues {
        queue_row(
            &mut page,
            queue,
            status.generated_at,
            shared.is_none(),
            "queues/",
        );
    }
    page.push_str("</tbody></table></div>");
    page.push_str(&pages(status.page, status.pages));
    page.push_str(&footer(status, ""));
    page
}

/// The document's head, with `title`; a page with forms to fill in does not
/// refresh itself.
pub fn head(title: &str, refresh: bool) -> String {
    let refresh = match refresh {
        true => format!("<meta http-equiv=\"refresh\" content=\"{REFRESH_SECONDS}\">"),
        false => String::new(),
    };
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">{refresh}\
         <title>{}</title><style>{STYLE}</style></head><body>",
        escape(title)
    )
}

/// The footer: version, time, the data as JSON.
pub fn footer(status: &Status, up: &str) -> String {
    format!(
        "<footer>tableq {} · read at {} · \
         the same data as JSON: <a href=\"{up}status.json\">status.json</a> · \
         <a href=\"{up}metrics\">metrics</a></footer></body></html>\n",
        escape(status.version),
        time(status.generated_at)
    )
}

/// The fleet's page; sign in (when the console can act), or who is signed in and
/// sign out.
pub fn top_nav(viewer: &Viewer, up: &str) -> String {
    let fleet = format!("<a href=\"{up}copies\" data-field=\"fleet\">Fleet</a>");
    match (&viewer.csrf, viewer.console) {
        (Some(csrf), _) => format!(
            "<nav class=\"top\">{fleet} signed in · <form method=\"post\" action=\"{up}sign-out\">\
             {}<button>Sign out</button></form></nav>",
            csrf_field(csrf)
        ),
        (None, true) => {
            format!("<nav class=\"top\">{fleet} <a href=\"{up}sign-in\">Sign in to act</a></nav>")
        }
        (None, false) => format!("<nav class=\"top\">{fleet}</nav>"),
    }
}

/// The hidden field every form carries.
pub fn csrf_field(csrf: &str) -> String {
    format!(
        "<input type=\"hidden\" name=\"csrf\" value=\"{}\">",
        escape(csrf)
    )
}

/// What the last action did, once.
pub fn notice(viewer: &Viewer) -> String {
    match &viewer.notice {
        Some(text) => format!(
            "<p class=\"notice\" data-field=\"notice\">{}</p>",
            escape(text)
        ),
        None => String::new(),
    }
}

/// The wake note every queue of the page has alike (say, the binary log's grant
/// missing), to say once at the top; `None` when they differ, or for one queue.
fn shared_wake(queues: &[QueueStatus]) -> Option<String> {
    let first = wake_text(queues.first()?);
    let all_alike = queues.len() > 1 && queues.iter().all(|q| wake_text(q) == first);
    (all_alike && first != "polls").then_some(first)
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
    if all.starting > 0 {
        let _ = write!(
            line,
            " · <span data-field=\"starting_queues\">starting: {}</span>",
            all.starting
        );
    }
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

/// A queue's line: its name (a link to its page, `link` leading there) and notes,
/// and its numbers; the wake note too unless every queue shares it.
pub fn queue_row(page: &mut String, q: &QueueStatus, now: u64, with_wake: bool, link: &str) {
    let name = escape(&q.name);
    let class = match q.state {
        "stopped" => "queue stopped",
        _ => "queue",
    };
    let waiting = match q.waiting {
        Some(n) => format!("{n}{}", if q.waiting_capped { "+" } else { "" }),
        None => "–".to_string(),
    };
    let action = action_percentiles(&q.action_recent);
    let notes = queue_notes(q, now, with_wake);
    let (_, mut under_returned) = self::notes(q.circuit, q.leases_lost);
    if q.held_back > 0 {
        let _ = write!(
            under_returned,
            "<br><span class=\"note\" data-field=\"held_back\" title=\"handed back untouched: \
             their [concurrency] key was at its limit\">{} held back</span>",
            q.held_back
        );
    }
    let mut failed = format!("<span data-field=\"failed\">{}</span>", q.failed);
    if let Some(n) = q.gave_up {
        let _ = write!(
            failed,
            "<br><span data-field=\"gave_up\">{n} gave up</span>"
        );
    }
    if !q.failure_groups.is_empty() {
        let kinds = q.failure_groups.len();
        let _ = write!(
            failed,
            "<br><a href=\"{link}{}\" data-field=\"kinds\">{kinds} kind{}</a>",
            path_segment(&q.name),
            if kinds == 1 { "" } else { "s" }
        );
    }
    let _ = write!(
        page,
        "<tr class=\"{class}\" data-queue=\"{name}\"><th scope=\"row\"><a href=\"{link}{}\">{name}</a>{notes}</th>\
         <td class=\"num\" data-label=\"Workers busy / connected / all\" data-field=\"workers\">{} / {} / {}</td>\
         <td data-label=\"Last 15 min\">{}</td>\
         <td class=\"num\" data-label=\"Done\" data-field=\"done\">{}</td>\
         <td class=\"num\" data-label=\"Failed\">{failed}</td>\
         <td class=\"num\" data-label=\"Returned\" data-field=\"returned\">{}{under_returned}</td>\
         <td class=\"num\" data-label=\"Rolled back\" data-field=\"rolled_back\">{}</td>\
         <td class=\"num\" data-label=\"Waiting\" data-field=\"waiting\">{waiting}</td>\
         <td class=\"num\" data-label=\"Oldest waiting\" data-field=\"oldest_waiting\">{}</td>\
         <td class=\"num\" data-label=\"Action p50 / p99\" data-field=\"action\">{action}</td></tr>",
        path_segment(&q.name),
        q.busy,
        q.connected,
        q.workers,
        sparkline(&q.minutes),
        q.done,
        q.returned,
        q.rolled_back,
        seconds(q.oldest_waiting_seconds),
    );
}

/// What a queue's name cell says under it: circuit, pause, schedule, loop, wake-ups.
fn queue_notes(q: &QueueStatus, now: u64, with_wake: bool) -> String {
    let (mut notes, _) = self::notes(q.circuit, q.leases_lost);
    if q.state == "starting" {
        let _ = write!(
            notes,
            "<br><span class=\"note\" data-field=\"starting\">starting: {STARTING}</span>"
        );
    }
    notes.push_str(&circuit_open_note(q.circuit_open.as_ref(), now));
    notes.push_str(&stopped_note(q.stopped_claiming));
    notes.push_str(&paused_note(q.paused.as_ref(), now));
    notes.push_str(&schedule_note(q.schedule.as_ref(), now));
    notes.push_str(&refusing_note(q.database_refuses));
    notes.push_str(&host_note(q.database_host.as_deref()));
    if with_wake && q.state != "starting" {
        notes.push_str(&format!(
            "<br><span class=\"note\" data-field=\"wake\">{}</span>",
            wake_text(q)
        ));
    }
    notes
}

/// A queue's name in a link's path.
pub fn path_segment(name: &str) -> String {
    escape(
        &percent_encoding::utf8_percent_encode(name, percent_encoding::NON_ALPHANUMERIC)
            .to_string(),
    )
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
pub fn in_flight(q: &QueueStatus, now: u64) -> String {
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

/// `wakes on the binary log (12 wake-ups)`, or `polls: why`, escaped.
fn wake_text(q: &QueueStatus) -> String {
    match (q.wake.source, &q.wake.why) {
        ("binlog", _) => format!("wakes on the binary log ({} wake-ups)", q.wake_events),
        (_, Some(why)) => format!("polls: {}", escape(why)),
        _ => "polls".to_string(),
    }
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

/// How much of a schedule's last error the page shows under the queue's name.
const SCHEDULE_ERROR_SHOWN: usize = 120;

/// `every 1m · next in 20 s · last run 40 s ago: done · 2 missed` under a schedule
/// queue's name.
pub fn schedule_note(schedule: Option<&ScheduleStatus>, now: u64) -> String {
    let Some(s) = schedule else {
        return String::new();
    };
    let next = match (s.running, s.next_due_at) {
        (true, _) => "running".to_string(),
        (false, Some(at)) if at > now => {
            format!(
                "next in <time title=\"{}\">{}</time>",
                time(at),
                until(now, at)
            )
        }
        (false, Some(at)) => format!("due {}", ago(now, at)),
        (false, None) => String::new(),
    };
    let last = match (&s.last_finished_at, s.last_outcome.as_deref()) {
        (Some(at), Some("failed")) => {
            let error = s.last_error.as_deref().unwrap_or_default();
            let mut clipped: String = error.chars().take(SCHEDULE_ERROR_SHOWN).collect();
            if error.chars().count() > SCHEDULE_ERROR_SHOWN {
                clipped.push('…');
            }
            format!(
                " · last run {}: <span class=\"error\">failed: {}</span>",
                ago(now, *at),
                escape(&clipped)
            )
        }
        (Some(at), Some(outcome)) => format!(" · last run {}: {}", ago(now, *at), escape(outcome)),
        _ => " · no run yet".to_string(),
    };
    let missed = match (s.missed, s.last_missed_at) {
        (0, _) => String::new(),
        (n, Some(at)) => format!(" · {n} missed, the last {}", ago(now, at)),
        (n, None) => format!(" · {n} missed"),
    };
    format!(
        "<br><span class=\"note\" data-field=\"schedule\">{} · {next}{last}{missed}</span>",
        escape(&s.schedule)
    )
}

/// `20 s`, `5 min`, `3 h`, `2 d` from `now` to `at`.
fn until(now: u64, at: u64) -> String {
    let secs = at.saturating_sub(now);
    match secs {
        0..60 => format!("{secs} s"),
        60..3600 => format!("{} min", secs / 60),
        3600..86_400 => format!("{} h", secs / 3600),
        _ => format!("{} d", secs / 86_400),
    }
}

/// `12 s ago`, `5 min ago`, `3 h ago`, `2 d ago`, with the time itself on hover.
pub fn ago(now: u64, at: u64) -> String {
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
pub fn time(unix: u64) -> String {
    httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(unix))
}

/// Text made safe for HTML, in an element or a quoted attribute; its control
/// characters escaped as the log escapes them (`\n`, `\u{1b}`), so that what a
/// command wrote to stderr cannot reach the page raw.
pub fn escape(text: &str) -> String {
    let mut visible = String::with_capacity(text.len());
    let _ = Escaped(&mut visible).write_str(text);
    html_escaped(&visible)
}

/// `text` for a block that keeps its lines (a `<pre>`, or an element styled
/// `white-space: pre-wrap`): as [`escape`], but its line breaks and tabs kept as
/// they are — JSON and SQL read as they were written, not with `\n` in them.
pub fn escape_block(text: &str) -> String {
    let lines: Vec<String> = text
        .split('\n')
        .map(|line| {
            let line = line.strip_suffix('\r').unwrap_or(line);
            let cells: Vec<String> = line.split('\t').map(escape).collect();
            cells.join("\t")
        })
        .collect();
    lines.join("\n")
}

/// `visible` with the characters HTML gives a meaning replaced.
fn html_escaped(visible: &str) -> String {
    let mut escaped = String::with_capacity(visible.len());
    for c in visible.chars() {
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
        assert_eq!(
            escape("a\u{1b}[31mb\0c\u{7}d\u{8}e\nf"),
            "a\\u{1b}[31mb\\u{0}c\\u{7}d\\u{8}e\\nf",
            "control characters, as the log writes them"
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

    /// A wake note every queue has alike is said once at the top, not on each
    /// line; notes that differ stay on their lines, and they wrap.
    #[test]
    fn a_note_every_queue_shares_is_said_once() {
        use crate::telemetry::stats::monitor::Monitor;
        let monitor = Monitor::default();
        let grant = "user `app` may not read the binary log (ERROR 1227): GRANT REPLICATION \
                     SLAVE, REPLICATION CLIENT ON *.* TO 'app'";
        for name in ["a", "b", "c"] {
            let stats = monitor.start_queue(name, 1, Duration::from_secs(30));
            stats.set_wake("poll", Some(grant.to_string()));
        }
        let page = render(&Status::of(&monitor, 1), &Viewer::default());
        assert_eq!(
            page.matches("may not read the binary log").count(),
            1,
            "{page}"
        );
        assert!(page.contains("data-field=\"shared_note\">Every queue polls: user `app`"));
        assert!(!page.contains("data-field=\"wake\""), "{page}");
        monitor
            .start_queue("d", 1, Duration::from_secs(30))
            .set_wake("binlog", None);
        let page = render(&Status::of(&monitor, 1), &Viewer::default());
        assert_eq!(
            page.matches("may not read the binary log").count(),
            3,
            "{page}"
        );
        assert!(!page.contains("shared_note"));
    }

    fn schedule_status() -> ScheduleStatus {
        ScheduleStatus {
            schedule: "every 1m".into(),
            next_due_at: Some(1_020),
            running: false,
            runs: 4,
            missed: 2,
            last_missed_at: Some(700),
            last_scheduled_at: Some(960),
            last_finished_at: Some(961),
            last_outcome: Some("failed".into()),
            last_error: Some("<exit status 1>".into()),
        }
    }

    #[test]
    fn the_note_says_next_due_last_run_and_missed_with_the_error_escaped() {
        let note = schedule_note(Some(&schedule_status()), 1_000);
        assert!(note.contains(">every 1m · next in <time"), "{note}");
        assert!(note.contains(">20 s</time>"), "{note}");
        assert!(note.contains("failed: &lt;exit status 1&gt;"), "{note}");
        assert!(note.contains(" · 2 missed, the last <time"), "{note}");
        let running = ScheduleStatus {
            running: true,
            missed: 0,
            last_outcome: Some("done".into()),
            ..schedule_status()
        };
        let note = schedule_note(Some(&running), 1_000);
        assert!(note.contains("every 1m · running · last run"), "{note}");
        assert!(note.contains(": done</span>"), "{note}");
        assert_eq!(schedule_note(None, 1_000), "");
    }
}
