//! The status page's answers: the page (with a Content-Security-Policy that allows
//! its own style and nothing else) and its data, a page of queues at a time.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

use super::html::{render, STYLE};
use super::queue_page::render_queue;
use super::{PageHistory, Status, Viewer};
use crate::telemetry::stats::monitor::Monitor;

/// The page a request asks for: `page=N` in its query, else the first.
pub fn page_asked(query: Option<&str>) -> usize {
    query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .find_map(|pair| pair.strip_prefix("page="))
        .and_then(|n| n.parse().ok())
        .unwrap_or(1)
}

/// `GET /`: the page, with a Content-Security-Policy that allows its own style and
/// nothing else.
pub fn page_response(monitor: &Monitor, page: usize, viewer: &Viewer) -> Response {
    html_response(StatusCode::OK, render(&Status::of(monitor, page), viewer))
}

/// `GET /queues/{queue}`: the queue's page, with what the console read of its
/// `history`; 404 for a queue this process has not.
pub fn queue_page_response(
    monitor: &Monitor,
    name: &str,
    viewer: &Viewer,
    history: &PageHistory,
) -> Response {
    let Some(status) = Status::of_queue(monitor, name) else {
        let page = format!("no queue {name} runs in this process\n");
        return (
            StatusCode::NOT_FOUND,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            page,
        )
            .into_response();
    };
    let setup = monitor.running(name).map(|(_, setup)| setup);
    html_response(
        StatusCode::OK,
        render_queue(
            &status,
            &status.queues[0],
            setup.as_deref(),
            viewer,
            history,
        ),
    )
}

/// An HTML page: its style allowed by its hash, forms only to this site, no
/// script, no frame, never cached.
pub fn html_response(status: StatusCode, page: String) -> Response {
    let headers = [
        (header::CONTENT_TYPE, "text/html; charset=utf-8".to_string()),
        (header::CONTENT_SECURITY_POLICY, content_security_policy()),
        (header::CACHE_CONTROL, "no-store".to_string()),
        (header::REFERRER_POLICY, "same-origin".to_string()),
    ];
    (status, headers, page).into_response()
}

/// `GET /status.json`: the page's data.
pub fn json_response(monitor: &Monitor, page: usize) -> Response {
    let body = serde_json::to_string(&Status::of(monitor, page)).unwrap_or_default();
    let headers = [
        (header::CONTENT_TYPE, "application/json"),
        (header::CACHE_CONTROL, "no-store"),
    ];
    (headers, body).into_response()
}

/// No script, no outside asset, no frame, forms to this site only; the page's one
/// style by its hash.
pub fn content_security_policy() -> String {
    use base64::Engine;
    use sha2::Digest;
    let hash = sha2::Sha256::digest(STYLE.as_bytes());
    let hash = base64::engine::general_purpose::STANDARD.encode(hash);
    format!(
        "default-src 'none'; style-src 'sha256-{hash}'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::telemetry::http::status::PER_PAGE;

    /// With 5,000 queues a page holds 50 of them and the summary counts them all, so
    /// `/` and `/status.json` stay small (they were megabytes); pages past the last
    /// show the last.
    #[test]
    fn thousands_of_queues_are_shown_a_page_at_a_time() {
        let monitor = Monitor::default();
        for i in 0..5_000 {
            let stats = monitor.start_queue(&format!("q{i:04}"), 2, Duration::from_secs(30));
            if i == 7 {
                stats.set_looping();
            }
        }
        let first = Status::of(&monitor, 1);
        assert_eq!(
            (first.page, first.pages, first.queues.len()),
            (1, 100, PER_PAGE)
        );
        assert_eq!(first.queues[0].name, "q0000");
        assert_eq!(first.summary.queues, 5_000);
        assert_eq!(first.summary.workers, 10_000);
        assert_eq!(first.summary.stopped_claiming, 1);
        let json = serde_json::to_string(&first).unwrap();
        assert!(json.len() < 200_000, "{} bytes", json.len());
        let html = render(&first, &Viewer::default());
        assert!(html.len() < 200_000, "{} bytes", html.len());
        assert!(
            html.contains("page 1 of 100") && html.contains("?page=2"),
            "paged"
        );
        assert!(html.contains("stopped claiming: 1"), "summarised");
        let last = Status::of(&monitor, 1_000);
        assert_eq!((last.page, last.queues[0].name.as_str()), (100, "q4950"));
        assert_eq!(page_asked(Some("page=3")), 3);
        assert_eq!(page_asked(Some("x=1&page=abc")), 1);
        assert_eq!(page_asked(None), 1);
    }
}
