//! A queue's own page, at `/queues/{queue}`: its line as the list shows it, its
//! notes, its failures by kind (each with a full example), its runs under way, its
//! last minutes, its file's settings — and, for a browser signed in to the console,
//! the forms that pause, resume, retry and discard. From memory, like the list.

use std::fmt::Write;

use super::charts::{history_charts, since_query};
use super::failed_rows::{failed_rows_section, FailedRows};
use super::html::{
    ago, csrf_field, escape, escape_block, footer, head, in_flight, notice, path_segment,
    queue_row, time, top_nav, QUEUE_HEADINGS,
};
use super::{QueueStatus, Status, Viewer};
use crate::config::{Mode, QueueConfig};
use crate::db::history::minutes::Since;
use crate::db::history::Bucket;
use crate::telemetry::stats::monitor::Setup;

/// What the console read from the history tables for a queue's page.
#[derive(Debug, Clone)]
pub struct PageHistory {
    /// The charts' window (`?since=`).
    pub since: Since,
    /// The charts' buckets, every copy's; or why there are none (history off, the
    /// database's refusal).
    pub buckets: Result<Vec<Bucket>, String>,
    /// The rows that gave up, for a browser signed in to a queue with `[failed]`
    /// (`None`: not shown), or why they could not be read.
    pub failed: Option<Result<FailedRows, String>>,
}

/// The page of `status`'s one queue, with its `history`.
pub fn render_queue(
    status: &Status,
    q: &QueueStatus,
    setup: Option<&Setup>,
    viewer: &Viewer,
    history: &PageHistory,
) -> String {
    let name = escape(&q.name);
    let now = status.generated_at;
    let mut page = head(&format!("{} — tableq", q.name), viewer.csrf.is_none());
    let _ = write!(
        page,
        "{}<p><a href=\"../\">← every queue</a></p><h1>Queue {name}</h1>{}",
        top_nav(viewer, "../"),
        notice(viewer)
    );
    page.push_str("<div class=\"scroll\"><table id=\"queue\">");
    page.push_str(QUEUE_HEADINGS);
    queue_row(&mut page, q, now, true, "");
    page.push_str("</tbody></table></div>");
    match &history.buckets {
        Ok(buckets) => page.push_str(&history_charts(buckets, history.since, now)),
        Err(why) => {
            let _ = write!(
                page,
                "<h2 id=\"history\">History</h2><p class=\"note\" data-field=\"no_history\">{}</p>",
                escape(why)
            );
        }
    }
    let failed = setup.and_then(|s| s.config.failed.as_ref()).is_some();
    // A group's buttons act on its keys: only when they name rows of [failed].
    let by_key = setup.is_some_and(|s| {
        (s.config.failed.as_ref()).is_some_and(|f| f.rows_are_the_queues(&s.config.select.text))
    });
    if let Some(csrf) = &viewer.csrf {
        page.push_str(&actions(q, csrf, failed));
    }
    if let Some(found) = &history.failed {
        let found = found.as_ref().map_err(String::as_str);
        failed_rows_section(&mut page, &q.name, since_query(history.since), found);
    }
    failure_kinds(&mut page, q, now, viewer.csrf.as_deref().filter(|_| by_key));
    by_label(&mut page, q);
    let _ = write!(
        page,
        "<h2>Runs under way</h2>{}",
        match q.in_flight {
            0 => "<p>None.</p>".to_string(),
            _ => in_flight(q, now),
        }
    );
    minutes(&mut page, q);
    if let Some(setup) = setup {
        let database = setup.database.to_string();
        settings(&mut page, &setup.config, &database, q.wake.source);
    }
    page.push_str(&footer(status, "../"));
    page
}

/// Pause (reason, duration), resume; retry or discard one key; look a row up.
fn actions(q: &QueueStatus, csrf: &str, failed: bool) -> String {
    let name = path_segment(&q.name);
    let csrf = csrf_field(csrf);
    let mut html = format!(
        "<h2>Act</h2><form class=\"block\" method=\"post\" action=\"{name}/pause\" id=\"pause\">{csrf}\
         <input name=\"reason\" placeholder=\"reason\" aria-label=\"reason\"> \
         <input name=\"for\" placeholder=\"for (10m, 2h)\" title=\"how long: 10m, 2h; empty: until resumed\" aria-label=\"for\"> \
         <button>Pause</button></form>\
         <form class=\"block\" method=\"post\" action=\"{name}/resume\" id=\"resume\">{csrf}<button>Resume</button></form>"
    );
    if failed {
        let _ = write!(
            html,
            "<form class=\"block\" method=\"post\" action=\"{name}/failed/retry\" id=\"retry-key\">{csrf}\
             <input name=\"key\" placeholder=\"key(s)\" aria-label=\"key\"> <button>Retry</button> \
             <button formaction=\"{name}/failed/discard\">Discard</button></form>\
             <form class=\"block\" method=\"post\" action=\"{name}/failed/retry\" id=\"retry-all\">{csrf}\
             <input type=\"hidden\" name=\"all\" value=\"1\"><button>Retry every row that gave up</button> \
             <button formaction=\"{name}/failed/discard\">Discard every row that gave up…</button></form>"
        );
    }
    let _ = write!(
        html,
        "<form class=\"block\" method=\"get\" action=\"{name}/inspect\" id=\"inspect\">\
         <input name=\"key\" placeholder=\"key\" aria-label=\"key\"> <button>Inspect</button></form>"
    );
    html
}

/// Items by the queue's `label` column (a job's class), when it has one.
fn by_label(page: &mut String, q: &QueueStatus) {
    if q.by_label.is_empty() {
        return;
    }
    page.push_str(
        "<h2 id=\"labels\">By label</h2><div class=\"scroll\"><table id=\"by-label\"><thead><tr>\
         <th>Label</th><th>Done</th><th>Failed</th><th>Returned</th></tr></thead><tbody>",
    );
    for label in &q.by_label {
        let c = label.counts;
        let _ = write!(
            page,
            "<tr><td data-field=\"label\">{}</td><td class=\"num done\">{}</td>\
             <td class=\"num failed\">{}</td><td class=\"num returned\">{}</td></tr>",
            escape(&label.label),
            c.done,
            c.failed,
            c.returned
        );
    }
    page.push_str("</tbody></table></div>");
}

/// The failures since the process started, by kind; with `csrf` (signed in, and
/// the queue has `[failed]`), a retry and a discard button for each kind's keys.
fn failure_kinds(page: &mut String, q: &QueueStatus, now: u64, csrf: Option<&str>) {
    let groups = &q.failure_groups;
    let total: u64 = groups.iter().map(|g| g.count).sum();
    let _ = write!(
        page,
        "<h2 id=\"failures\">Failures by kind</h2><p data-field=\"failure_total\">{total} failure{}, {} kind{}</p>",
        if total == 1 { "" } else { "s" },
        groups.len(),
        if groups.len() == 1 { "" } else { "s" }
    );
    if groups.is_empty() {
        return;
    }
    page.push_str(
        "<div class=\"scroll\"><table id=\"kinds\"><thead><tr><th>Count</th><th>Last</th><th>First</th><th>Status</th>\
         <th>Kind, and the latest in full</th><th>Latest keys</th><th></th></tr></thead><tbody>",
    );
    let name = path_segment(&q.name);
    for group in groups {
        let status = group.status.map(|s| s.to_string()).unwrap_or_default();
        let keys: String = group
            .keys
            .iter()
            .map(|key| format!("<span data-field=\"key\">{}</span> ", escape(key)))
            .collect();
        let buttons = match csrf {
            Some(csrf) => format!(
                "<form method=\"post\" action=\"{name}/failed/retry\">{}\
                 <input type=\"hidden\" name=\"group\" value=\"{}\"><button>Retry</button> \
                 <button formaction=\"{name}/failed/discard\">Discard</button></form>",
                csrf_field(csrf),
                escape(&group.kind)
            ),
            None => String::new(),
        };
        let _ = write!(
            page,
            "<tr class=\"failure\"><td class=\"num\" data-label=\"Count\" data-field=\"count\">{}</td>\
             <td data-label=\"Last\">{}</td><td data-label=\"First\">{}</td>\
             <td data-label=\"Status\" data-field=\"status\">{status}</td><td class=\"error\" data-label=\"Kind\">\
             <span data-field=\"kind\">{}</span><br><small>e.g. <span data-field=\"error\">{}</span></small></td>\
             <td class=\"cell\" data-label=\"Latest keys\">{keys}</td><td>{buttons}</td></tr>",
            group.count,
            ago(now, group.last_at),
            ago(now, group.first_at),
            escape(&group.kind),
            escape(&group.example)
        );
    }
    page.push_str("</tbody></table></div>");
}

/// The last minutes that had anything, newest first.
fn minutes(page: &mut String, q: &QueueStatus) {
    page.push_str("<h2>Recent minutes</h2>");
    let busy: Vec<_> = q
        .minutes
        .iter()
        .rev()
        .filter(|m| m.done + m.failed + m.returned > 0)
        .collect();
    if busy.is_empty() {
        page.push_str("<p>Nothing in the last 15 minutes.</p>");
        return;
    }
    page.push_str("<table id=\"minutes\"><thead><tr><th>Minute</th><th>Done</th><th>Failed</th><th>Returned</th></tr></thead><tbody>");
    for m in busy {
        let _ = write!(
            page,
            "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            time(m.minute * 60),
            m.done,
            m.failed,
            m.returned
        );
    }
    page.push_str("</tbody></table>");
}

/// What the queue runs with — its file's settings, and tableq's where the file sets
/// none — without its secrets: no URL, header or command is shown, only their kind.
fn settings(page: &mut String, config: &QueueConfig, database: &str, wake: &str) {
    let mode = match &config.mode {
        Mode::Transaction { .. } => "transaction",
        Mode::Lease(_) => "lease",
    };
    let failed = match &config.failed {
        None => "none".to_string(),
        Some(f) => format!(
            "select{}{}",
            if f.retry.is_empty() { "" } else { ", retry" },
            if f.discard.is_empty() {
                ""
            } else {
                ", discard"
            }
        ),
    };
    let rows = [
        ("file", config.file.display().to_string()),
        ("database", database.to_string()),
        ("mode", mode.to_string()),
        ("workers", config.workers.to_string()),
        ("batch", config.batch.to_string()),
        ("poll_interval", poll_interval(config, wake)),
        (
            "database_timeout",
            humantime::format_duration(config.database_timeout).to_string(),
        ),
        (
            "action",
            format!(
                "{} (timeout {})",
                config.action.type_name(),
                humantime::format_duration(config.action.timeout())
            ),
        ),
        (
            "key",
            config
                .key
                .clone()
                .unwrap_or_else(|| "the select's first column".into()),
        ),
        ("select", config.select.text.clone()),
        ("[failed]", failed),
    ];
    page.push_str("<h2>Settings</h2><dl class=\"settings\" id=\"settings\">");
    for (key, value) in rows {
        let _ = write!(
            page,
            "<dt>{key}</dt><dd><code data-field=\"{key}\">{}</code></dd>",
            escape_block(&value)
        );
    }
    page.push_str("</dl>");
}

/// The poll interval in force, and where it comes from: the file, or tableq's
/// default — which on the binary log (`wake` source `binlog`) is a longer one.
fn poll_interval(config: &QueueConfig, wake: &str) -> String {
    let on_binlog = wake == "binlog";
    let (every, other) = match on_binlog {
        true => (config.wake.poll_on_binlog, config.poll_interval),
        false => (config.poll_interval, config.wake.poll_on_binlog),
    };
    let every = humantime::format_duration(every);
    let other = humantime::format_duration(other);
    match (config.wake.poll_interval_set, on_binlog) {
        (true, _) => format!("{every} (set in the file)"),
        (false, true) => format!(
            "{every} (tableq's default while the binary log wakes the queue; {other} when it polls)"
        ),
        (false, false) => format!(
            "{every} (tableq's default while the queue polls; {other} while the binary log wakes it)"
        ),
    }
}

/// The answer of `inspect` for a browser: where the row is, and the row a column
/// a line, each value as it reads best (see [`shown_value`]).
pub fn inspect_page(queue: &str, found: &serde_json::Value) -> String {
    let mut page = head(&format!("{queue} — inspect"), false);
    let whereabouts = found["where"].as_str().unwrap_or_default();
    let _ = write!(
        page,
        "<p><a href=\"../{}\">← queue {}</a></p><h1>Key {}</h1>\
         <p data-field=\"where\">{}</p>",
        path_segment(queue),
        escape(queue),
        escape(found["key"].as_str().unwrap_or_default()),
        escape(whereabouts),
    );
    match found["row"].as_object() {
        None => page.push_str("<p data-field=\"row\">No row to show.</p>"),
        Some(columns) => {
            page.push_str("<table id=\"row\"><tbody>");
            for (column, value) in columns {
                let _ = write!(
                    page,
                    "<tr><th scope=\"row\">{}</th><td><pre data-column=\"{}\">{}</pre></td></tr>",
                    escape(column),
                    escape(column),
                    escape_block(&shown_value(value))
                );
            }
            page.push_str("</tbody></table>");
        }
    }
    page.push_str("</body></html>");
    page
}

/// A column's value for a reader: text as it is, its lines kept — and text that
/// holds a JSON object or array (a payload column) laid out, indented — and any
/// other value as JSON (`null`, numbers).
fn shown_value(value: &serde_json::Value) -> String {
    let serde_json::Value::String(text) = value else {
        return value.to_string();
    };
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(json @ (serde_json::Value::Object(_) | serde_json::Value::Array(_))) => {
            serde_json::to_string_pretty(&json).unwrap_or_else(|_| text.clone())
        }
        _ => text.clone(),
    }
}

/// The question a bulk discard from a page asks first: how many rows it would
/// discard now — every row that gave up, or those of failure kind `group` — with a
/// button that says the count and posts it (`confirm`), and the way back. Asked
/// again when the count changed since the page that asked (`asked_for`).
pub fn confirm_discard_page(
    queue: &str,
    group: Option<&str>,
    count: usize,
    asked_for: Option<usize>,
    csrf: &str,
) -> String {
    let rows = |n: usize| format!("{n} row{}", if n == 1 { "" } else { "s" });
    let of_kind = group
        .map(|g| format!(" of the kind <q>{}</q>", escape(g)))
        .unwrap_or_default();
    let back = format!("../../{}", path_segment(queue));
    let mut page = head(&format!("{queue} — discard?"), false);
    let _ = write!(
        page,
        "<p><a href=\"{back}\">← queue {}</a></p>",
        escape(queue)
    );
    if count == 0 {
        let _ = write!(
            page,
            "<h1>Nothing to discard</h1><p data-field=\"count\">No row{of_kind} gave up now.</p>\
             </body></html>"
        );
        return page;
    }
    let _ = write!(
        page,
        "<h1>Discard {}{of_kind}?</h1>\
         <p data-field=\"count\">Queue {}: <code>[failed] discard</code> runs for every row \
         that gave up{of_kind} now — {}. A discarded row is not worked again.</p>",
        rows(count),
        escape(queue),
        rows(count)
    );
    if let Some(asked) = asked_for.filter(|asked| *asked != count) {
        let _ = write!(
            page,
            "<p class=\"notice\" data-field=\"changed\">The count changed: {} when you \
             asked, {} now.</p>",
            rows(asked),
            rows(count)
        );
    }
    let which = match group {
        Some(g) => format!(
            "<input type=\"hidden\" name=\"group\" value=\"{}\">",
            escape(g)
        ),
        None => "<input type=\"hidden\" name=\"all\" value=\"1\">".to_string(),
    };
    let _ = write!(
        page,
        "<form class=\"block\" method=\"post\" action=\"discard\" id=\"confirm\">{}{which}\
         <input type=\"hidden\" name=\"confirm\" value=\"{count}\">\
         <button>Discard {}</button> <a href=\"{back}\">Cancel</a></form></body></html>",
        csrf_field(csrf),
        rows(count)
    );
    page
}

/// The sign-in form, with what went wrong last.
pub fn sign_in_page(problem: Option<&str>) -> String {
    let mut page = head("Sign in — tableq", false);
    let problem = problem
        .map(|p| {
            format!(
                "<p class=\"error\" data-field=\"problem\">{}</p>",
                escape(p)
            )
        })
        .unwrap_or_default();
    let _ = write!(
        page,
        "<p><a href=\"./\">← every queue</a></p><h1>Sign in to the console</h1>{problem}\
         <p>With the console token (the file given to <code>--console-token-file</code>).</p>\
         <form class=\"block\" method=\"post\" action=\"sign-in\" id=\"sign-in\">\
         <input type=\"password\" name=\"token\" autocomplete=\"current-password\" aria-label=\"token\" size=\"40\"> \
         <button>Sign in</button></form></body></html>"
    );
    page
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(file: &str) -> QueueConfig {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("q.toml");
        std::fs::write(&path, file).expect("the queue file written");
        crate::config::load_file::<crate::action::RawAction>(&path, &|_| None)
            .expect("a valid queue file")
    }

    const QUEUE: &str = r#"
        select = """
        SELECT id
        FROM job
        WHERE done = 0"""
        [action]
        type = "sql"
        sql = "DO :id"
        [on_success]
        sql = "UPDATE job SET done = 1 WHERE id = :id"
    "#;

    /// A row's columns read as written: text with its lines, JSON held in text laid
    /// out — never a `\n` in the page's text; markup escaped.
    #[test]
    fn an_inspected_row_reads_as_written() {
        let found = serde_json::json!({
            "key": "9",
            "where": "gave up (in [failed])",
            "row": {
                "id": 9,
                "payload": "{\"order\":{\"id\":9,\"lines\":[1,2]}}",
                "note": "first line\nsecond <line>",
                "sent_at": null,
            },
        });
        let page = inspect_page("mail", &found);
        assert!(!page.contains("\\n"), "no escaped line break: {page}");
        assert!(
            page.contains("{\n  &quot;order&quot;: {\n    &quot;id&quot;: 9,"),
            "JSON laid out: {page}"
        );
        assert!(page.contains("first line\nsecond &lt;line&gt;"), "{page}");
        assert!(page.contains("data-column=\"sent_at\">null<"), "{page}");
    }

    /// Settings say the poll interval in force, and where it comes from: tableq's
    /// default (5s polling, 1m on the binary log), or the file; the select keeps its
    /// lines.
    #[test]
    fn settings_say_the_poll_interval_in_force_and_whence() {
        let default = config(QUEUE);
        assert_eq!(
            poll_interval(&default, "binlog"),
            "1m (tableq's default while the binary log wakes the queue; 5s when it polls)"
        );
        assert_eq!(
            poll_interval(&default, "poll"),
            "5s (tableq's default while the queue polls; 1m while the binary log wakes it)"
        );
        let set = config(&format!("poll_interval = \"2s\"\n{QUEUE}"));
        assert_eq!(poll_interval(&set, "binlog"), "2s (set in the file)");
        assert_eq!(poll_interval(&set, ""), "2s (set in the file)");
        let mut page = String::new();
        settings(&mut page, &default, "db", "binlog");
        assert!(page.contains("SELECT id\n        FROM job"), "{page}");
        assert!(
            page.contains("data-field=\"poll_interval\">1m (tableq&#39;s default"),
            "{page}"
        );
    }

    /// A bulk discard asks first, saying how many rows; again, saying so, when the
    /// count changed; and has nothing to ask when no row gave up.
    #[test]
    fn a_bulk_discard_says_how_many_rows_first() {
        let page = confirm_discard_page("mail", None, 5, None, "tok");
        assert!(page.contains("<h1>Discard 5 rows?</h1>"), "{page}");
        assert!(page.contains("<button>Discard 5 rows</button>"), "{page}");
        assert!(page.contains("name=\"confirm\" value=\"5\""), "{page}");
        assert!(page.contains("name=\"all\" value=\"1\""), "{page}");
        assert!(page.contains("href=\"../../mail\">Cancel<"), "{page}");
        let page = confirm_discard_page("mail", Some("order # <lost>"), 1, Some(3), "tok");
        assert!(
            page.contains("Discard 1 row of the kind <q>order # &lt;lost&gt;</q>?"),
            "{page}"
        );
        assert!(page.contains("3 rows when you asked, 1 row now"), "{page}");
        assert!(
            page.contains("name=\"group\" value=\"order # &lt;lost&gt;\""),
            "{page}"
        );
        let page = confirm_discard_page("mail", None, 0, Some(2), "tok");
        assert!(page.contains("No row gave up now."), "{page}");
        assert!(!page.contains("<button"), "{page}");
    }
}
