//! The rows that gave up, for a browser signed in to the console: on a queue's
//! page, the rows of `[failed] select` newest first, a page at a time, with a search
//! box (`q`: text in a column or in the row's last error), each with its last
//! recorded error — each row's key leading
//! to its attempts page, `/queues/{queue}/attempts?key=K`, which lists every failed
//! attempt recorded for it by every copy and offers to retry or discard it.

use std::collections::HashMap;
use std::fmt::Write;

use super::html::{csrf_field, escape, head, path_segment, time, top_nav};
use super::Viewer;
use crate::db::history::Attempt;

/// How many characters of a column's value a row shows; the row's page
/// (inspect) shows it whole.
const SHOWN_CHARS: usize = 160;

/// A page of the rows that gave up, as the console read them.
#[derive(Debug, Clone, Default)]
pub struct FailedRows {
    /// The search it answers (`q`), empty for none.
    pub search: String,
    /// The key this page starts after (`after`): `None` on the first page.
    pub after: Option<String>,
    /// Each row's columns (a JSON object), and its key as tableq prints it.
    pub rows: Vec<serde_json::Value>,
    pub keys: Vec<String>,
    /// The last recorded error of the rows that have one, by key.
    pub errors: HashMap<String, String>,
    /// The key to start the next page after, when there are more rows.
    pub next: Option<String>,
}

/// A value for a query string.
fn query_part(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// The section of a queue's page: the search form and the rows found, or why they
/// could not be read. `queue` is the queue's name, `since` the charts' window (kept
/// by the search).
pub fn failed_rows_section(
    page: &mut String,
    queue: &str,
    since: &str,
    found: Result<&FailedRows, &str>,
) {
    let name = path_segment(queue);
    let search = found.map(|f| f.search.as_str()).unwrap_or_default();
    let _ = write!(
        page,
        "<h2 id=\"failed-rows\">Failed rows</h2>\
         <form class=\"block\" method=\"get\" action=\"{name}#failed-rows\" id=\"failed-search\">\
         <input type=\"hidden\" name=\"since\" value=\"{since}\">\
         <input type=\"search\" name=\"q\" value=\"{}\" placeholder=\"text in a column or the error\" \
         aria-label=\"search the failed rows\" size=\"30\"> <button>Search</button></form>",
        escape(search)
    );
    let found = match found {
        Ok(found) => found,
        Err(why) => {
            let _ = write!(
                page,
                "<p class=\"error\" data-field=\"failed_error\">{}</p>",
                escape(why)
            );
            return;
        }
    };
    let _ = write!(
        page,
        "<p data-field=\"failed_shown\">{}{}, newest first{}</p>",
        rows_word(found.rows.len()),
        match found.search.is_empty() {
            true => " gave up".to_string(),
            false => format!(" match <q>{}</q>", escape(&found.search)),
        },
        match &found.after {
            Some(_) => format!(
                " (a later page: <a href=\"{name}?since={since}&amp;q={}#failed-rows\">the newest</a>)",
                query_part(&found.search)
            ),
            None => String::new(),
        }
    );
    if !found.rows.is_empty() {
        rows_table(page, &name, found);
    }
    if let Some(next) = &found.next {
        let _ = write!(
            page,
            "<p><a rel=\"next\" data-field=\"failed_next\" \
             href=\"{name}?since={since}&amp;q={}&amp;after={}#failed-rows\">older rows →</a></p>",
            query_part(&found.search),
            query_part(next)
        );
    }
}

fn rows_word(n: usize) -> String {
    format!("{n} row{}", if n == 1 { "" } else { "s" })
}

/// The rows, a line each: the key (a link to its attempts), then every column.
fn rows_table(page: &mut String, name: &str, found: &FailedRows) {
    let columns: Vec<&String> = found
        .rows
        .first()
        .and_then(|row| row.as_object())
        .map(|row| row.keys().collect())
        .unwrap_or_default();
    page.push_str(
        "<div class=\"scroll\"><table id=\"failed\"><thead><tr><th>Key</th><th>Last error</th>",
    );
    for column in &columns {
        let _ = write!(page, "<th>{}</th>", escape(column));
    }
    page.push_str("</tr></thead><tbody>");
    for (row, key) in found.rows.iter().zip(&found.keys) {
        let _ = write!(
            page,
            "<tr class=\"failed-row\" data-key=\"{}\"><th scope=\"row\">\
             <a href=\"{name}/attempts?key={}\" data-field=\"attempts\">{}</a></th>",
            escape(key),
            query_part(key),
            escape(key)
        );
        let error = found.errors.get(key).map(String::as_str).unwrap_or("–");
        let _ = write!(
            page,
            "<td class=\"error\" data-label=\"Last error\" data-field=\"last_error\">{}</td>",
            escape(&shown(&serde_json::Value::String(error.to_string())))
        );
        for column in &columns {
            let value = shown(&row[column.as_str()]);
            let _ = write!(
                page,
                "<td class=\"cell\" data-label=\"{}\" data-column=\"{}\">{}</td>",
                escape(column),
                escape(column),
                escape(&value)
            );
        }
        page.push_str("</tr>");
    }
    page.push_str("</tbody></table></div>");
}

/// A column's value as a cell shows it: text as it is, anything else as JSON;
/// at most [`SHOWN_CHARS`] characters.
fn shown(value: &serde_json::Value) -> String {
    let text = match value {
        serde_json::Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    match text.char_indices().nth(SHOWN_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

/// A row's attempts: each failed attempt recorded for `key` of `queue`, oldest
/// first, or why they could not be read; and, signed in to a queue with
/// `[failed] retry` (`can_change`), the forms that retry or discard it.
pub fn attempts_page(
    queue: &str,
    key: &str,
    attempts: Result<&[Attempt], &str>,
    viewer: &Viewer,
    can_change: bool,
) -> String {
    let mut page = head(&format!("{queue} — key {key}"), false);
    let _ = write!(
        page,
        "{}<p><a href=\"../{}\">← queue {}</a></p><h1>Key <span data-field=\"key\">{}</span></h1>",
        top_nav(viewer, "../../"),
        path_segment(queue),
        escape(queue),
        escape(key)
    );
    match attempts {
        Err(why) => {
            let _ = write!(
                page,
                "<p class=\"error\" data-field=\"attempts_error\">{}</p>",
                escape(why)
            );
        }
        Ok([]) => page.push_str(
            "<p data-field=\"attempts_none\">No failed attempt of this row is recorded \
             (attempts are kept as long as the history's retention).</p>",
        ),
        Ok(attempts) => attempts_table(&mut page, attempts),
    }
    if let (Some(csrf), true) = (&viewer.csrf, can_change) {
        let _ = write!(
            page,
            "<form class=\"block\" method=\"post\" action=\"failed/retry\" id=\"retry-row\">{}\
             <input type=\"hidden\" name=\"key\" value=\"{}\"><button>Retry</button> \
             <button formaction=\"failed/discard\">Discard</button></form>",
            csrf_field(csrf),
            escape(key)
        );
    }
    let _ = write!(
        page,
        "<p><a href=\"inspect?key={}\">Look the row up</a> (where it is now, and its columns)</p>\
         </body></html>",
        query_part(key)
    );
    page
}

/// The attempts, a line each.
fn attempts_table(page: &mut String, attempts: &[Attempt]) {
    page.push_str(
        "<div class=\"scroll\"><table id=\"attempts\"><thead><tr><th class=\"num\">#</th>\
         <th>When (UTC)</th><th>Copy</th><th class=\"num\">Ran</th><th class=\"num\">Status</th>\
         <th>Error</th></tr></thead><tbody>",
    );
    for a in attempts {
        let status = a.status.map(|s| s.to_string()).unwrap_or_default();
        let gave_up = match a.gave_up {
            true => "<br><small data-field=\"gave_up\">gave up after it</small>",
            false => "",
        };
        let _ = write!(
            page,
            "<tr class=\"attempt\" data-attempt=\"{}\"><td class=\"num\" data-label=\"Attempt\">{}</td>\
             <td data-label=\"When\" data-field=\"at\">{}</td><td class=\"cell\" data-label=\"Copy\" \
             data-field=\"copy\">{}</td><td class=\"num\" data-label=\"Ran\" data-field=\"ms\">{} ms</td>\
             <td class=\"num\" data-label=\"Status\" data-field=\"status\">{status}</td>\
             <td class=\"error\" data-label=\"Error\" data-field=\"error\">{}{gave_up}</td></tr>",
            a.attempt,
            a.attempt,
            time(a.at as u64),
            escape(&a.copy),
            a.ms,
            escape(&a.error)
        );
    }
    page.push_str("</tbody></table></div>");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(search: &str) -> FailedRows {
        FailedRows {
            search: search.into(),
            after: None,
            rows: vec![
                serde_json::json!({"id": 12, "note": "card <declined>", "payload": "x".repeat(400)}),
                serde_json::json!({"id": 9, "note": null, "payload": ""}),
            ],
            keys: vec!["12".into(), "9".into()],
            errors: HashMap::from([("12".into(), "card 4242 declined".into())]),
            next: Some("9".into()),
        }
    }

    /// Each row leads to its attempts; its columns are shown (escaped, a long value
    /// cut); the next page keeps the search; the search box says what was asked.
    #[test]
    fn failed_rows_lead_to_their_attempts_and_the_next_page() {
        let mut page = String::new();
        failed_rows_section(&mut page, "mail box", "24h", Ok(&found("card 4")));
        assert!(
            page.contains("<a href=\"mail%20box/attempts?key=12\" data-field=\"attempts\">12</a>"),
            "{page}"
        );
        assert!(page.contains("data-column=\"note\">card &lt;declined&gt;</td>"));
        assert!(page.contains("data-field=\"last_error\">card 4242 declined</td>"));
        assert!(
            page.contains("data-field=\"last_error\">–</td>"),
            "none for 9"
        );
        assert!(page.contains("data-column=\"note\">null</td>"));
        assert!(page.contains(&format!("{}…</td>", "x".repeat(SHOWN_CHARS))));
        assert!(
            page.contains("href=\"mail%20box?since=24h&amp;q=card%204&amp;after=9#failed-rows\""),
            "{page}"
        );
        assert!(page.contains("name=\"q\" value=\"card 4\""));
        assert!(
            page.contains("2 rows match <q>card 4</q>, newest first"),
            "{page}"
        );
    }

    /// A search that finds nothing says so, with no table; an error is said.
    #[test]
    fn no_row_and_an_error_are_said() {
        let mut page = String::new();
        let none = FailedRows {
            search: "zzz".into(),
            ..FailedRows::default()
        };
        failed_rows_section(&mut page, "mail", "1h", Ok(&none));
        assert!(page.contains("0 rows match <q>zzz</q>"), "{page}");
        assert!(!page.contains("<table"));
        let mut page = String::new();
        failed_rows_section(&mut page, "mail", "1h", Err("the database <refused>"));
        assert!(page.contains("data-field=\"failed_error\">the database &lt;refused&gt;<"));
    }

    /// The attempts, oldest first, each with its error; signed in, the forms that
    /// retry and discard the key, carrying the CSRF token.
    #[test]
    fn a_rows_attempts_and_its_retry() {
        let attempts = [Attempt {
            attempt: 1,
            at: 1_800_000_000.25,
            copy: "web-1:4242".into(),
            ms: 31,
            status: Some(3),
            error: "card 4242 declined".into(),
            gave_up: true,
        }];
        let viewer = Viewer {
            console: true,
            csrf: Some("tok".into()),
            notice: None,
        };
        let page = attempts_page("mail", "12", Ok(&attempts), &viewer, true);
        assert!(page.contains("data-attempt=\"1\""), "{page}");
        assert!(page.contains("data-field=\"error\">card 4242 declined<br><small"));
        assert!(page.contains("name=\"csrf\" value=\"tok\""));
        assert!(page.contains("action=\"failed/retry\" id=\"retry-row\""));
        assert!(page.contains("name=\"key\" value=\"12\""));
        let page = attempts_page("mail", "12", Ok(&[]), &Viewer::default(), true);
        assert!(page.contains("attempts_none") && !page.contains("<form class"));
    }
}
