//! The fleet, at `/copies`: every copy of tableq that writes to the history of this
//! copy's databases, by its heartbeat — host, pid, version, since when, last seen,
//! its queues, its runs under way, its console — and which are gone (silent for
//! three heartbeats). One line per copy; on a phone each becomes a card.

use std::fmt::Write;

use super::html::{ago, escape, head, top_nav};
use super::Viewer;
use crate::db::history::CopyStatus;

/// The page: `copies` as read (or why they could not be), this copy marked
/// (`this`: its host and pid), times relative to `now`.
pub fn fleet_page(
    copies: Result<&[CopyStatus], &str>,
    this: (&str, u32),
    viewer: &Viewer,
    now: u64,
) -> String {
    let mut page = head("The fleet — tableq", true);
    let _ = write!(
        page,
        "{}<p><a href=\"./\">← every queue</a></p><h1>The fleet</h1>",
        top_nav(viewer, "")
    );
    let copies = match copies {
        Ok(copies) => copies,
        Err(why) => {
            let _ = write!(
                page,
                "<p class=\"error\" data-field=\"copies_error\">{}</p></body></html>",
                escape(why)
            );
            return page;
        }
    };
    let gone = copies.iter().filter(|c| c.gone).count();
    let _ = write!(
        page,
        "<p data-field=\"copies_count\">{} cop{} by heartbeat (every 10 s), {gone} gone \
         (silent for 30 s; forgotten after an hour).</p>",
        copies.len(),
        if copies.len() == 1 { "y" } else { "ies" }
    );
    if copies.is_empty() {
        page.push_str("</body></html>");
        return page;
    }
    page.push_str(
        "<div class=\"scroll\"><table id=\"copies\"><thead><tr><th>Copy</th><th>Version</th>\
         <th>Started</th><th>Last seen</th><th class=\"num\">In flight</th><th>Queues</th>\
         <th>Console</th></tr></thead><tbody>",
    );
    for copy in copies {
        copy_row(&mut page, copy, this, now);
    }
    page.push_str("</tbody></table></div></body></html>");
    page
}

/// One copy's line.
fn copy_row(page: &mut String, copy: &CopyStatus, this: (&str, u32), now: u64) {
    let (class, state) = match copy.gone {
        true => (
            "copy stopped",
            "<br><span class=\"failed\" data-field=\"gone\">gone</span>",
        ),
        false => ("copy", ""),
    };
    let mine = match (copy.host.as_str(), copy.pid) == this {
        true => " <small data-field=\"this\">(this copy)</small>",
        false => "",
    };
    let console = match &copy.console {
        Some(address) => {
            // A URL as the copy wrote it (`http://10.0.0.5:7436`), or a bare address.
            let url = match address.starts_with("http://") || address.starts_with("https://") {
                true => address.clone(),
                false => format!("http://{address}/"),
            };
            format!("<a href=\"{}\">{}</a>", escape(&url), escape(address))
        }
        None => "–".to_string(),
    };
    let _ = write!(
        page,
        "<tr class=\"{class}\" data-copy=\"{}:{}\"><th scope=\"row\"><span data-field=\"host\">{}</span> \
         · pid <span data-field=\"pid\">{}</span>{mine}{state}</th>\
         <td data-label=\"Version\" data-field=\"version\">{}</td>\
         <td data-label=\"Started\">{}</td><td data-label=\"Last seen\" data-field=\"last_seen\">{}</td>\
         <td class=\"num\" data-label=\"In flight\" data-field=\"in_flight\">{}</td>\
         <td class=\"cell\" data-label=\"Queues\" data-field=\"queues\">{}</td>\
         <td class=\"cell\" data-label=\"Console\">{console}</td></tr>",
        escape(&copy.host),
        copy.pid,
        escape(&copy.host),
        copy.pid,
        escape(&copy.version),
        ago(now, copy.started),
        ago(now, copy.last_seen),
        copy.in_flight,
        escape(&copy.queues.join(", "))
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn copy(host: &str, pid: u32, gone: bool) -> CopyStatus {
        CopyStatus {
            host: host.into(),
            pid,
            version: "0.9.0".into(),
            started: 1_000,
            last_seen: if gone { 1_900 } else { 1_995 },
            queues: vec!["mail".into(), "sms".into()],
            in_flight: 3,
            console: (!gone).then(|| format!("{}10.0.0.5:7436", ["", "http://"][pid as usize % 2])),
            gone,
        }
    }

    /// Every copy a line; the gone one says so, this copy is marked, a console is a
    /// link.
    #[test]
    fn every_copy_is_a_line_and_the_gone_say_so() {
        let copies = [
            copy("web-1", 42, false),
            copy("web-2", 7, true),
            copy("web-3", 9, false),
        ];
        let page = fleet_page(Ok(&copies), ("web-1", 42), &Viewer::default(), 2_000);
        assert!(
            page.contains("3 copies by heartbeat (every 10 s), 1 gone"),
            "{page}"
        );
        assert_eq!(page.matches("<tr class=\"copy").count(), 3);
        assert!(page.contains("<tr class=\"copy stopped\" data-copy=\"web-2:7\">"));
        assert_eq!(page.matches("data-field=\"gone\"").count(), 1);
        assert_eq!(page.matches("(this copy)").count(), 1);
        assert!(page.contains("<a href=\"http://10.0.0.5:7436/\">10.0.0.5:7436</a>"));
        let url = "<a href=\"http://10.0.0.5:7436\">http://10.0.0.5:7436</a>";
        assert!(page.contains(url), "a URL as written: {page}");
        assert!(page.contains("data-field=\"queues\">mail, sms<"));
        let page = fleet_page(Err("history is off"), ("a", 1), &Viewer::default(), 0);
        assert!(page.contains("data-field=\"copies_error\">history is off<"));
    }
}
