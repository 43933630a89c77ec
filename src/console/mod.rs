//! The console: the status page's actions, off unless tableq was given a token
//! (`--console-token-file`). With it, a script calls
//! `POST /api/queues/{queue}/{pause,resume,failed/retry,failed/discard}` (and
//! `GET /api/queues/{queue}/inspect?key=K`) with `Authorization: Bearer TOKEN`, and
//! a browser signs in with the token at `/sign-in` and acts through the page's
//! forms, each carrying its session's CSRF token. Without a token, every action
//! answers 403 and the page shows no button. Every action is logged at INFO: what,
//! which queue, how many rows, and from where.

pub mod act;
pub mod auth;
pub mod history;
mod pages;
mod request;

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{FromRequestParts, Path, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use tracing::info;

use act::{act, inspect, rows_count, ActError, Acted, Action, Rows};
use auth::{bearer, cleared_cookie, csrf_matches, session_cookie, Sessions, Token};
use request::{form_action, form_fields, json_action, query_value};

use crate::config::queue::failed::Change;
use crate::db::history::minutes::Since;
use crate::telemetry::http::listener::Peer;
use crate::telemetry::http::status::{self, Viewer};
use crate::telemetry::http::{Acting, Viewers};
use crate::telemetry::stats::monitor::Monitor;

/// The console of `monitor`'s queues, acting for whoever holds the first token
/// (`None`: it only reads), its history read by whoever holds either (the second
/// `None`: by anyone), as the metrics endpoint serves it.
pub fn acting(monitor: Arc<Monitor>, (token, read_token): (Option<&str>, Option<&str>)) -> Acting {
    let mut console = Console::new(monitor, token);
    console.read_token = read_token.map(Token::new);
    let console = Arc::new(console);
    Acting {
        can_act: token.is_some(),
        viewers: console.clone(),
        routes: routes(console),
    }
}

/// The console's state: its token (none: read-only), the signed-in browsers, and
/// the queues.
pub struct Console {
    token: Option<Token>,
    /// Reads the history and the copies (`None`: anyone may).
    read_token: Option<Token>,
    sessions: Sessions,
    /// Held while a wrong token waits: one guess at a time.
    guesses: tokio::sync::Mutex<()>,
    pub monitor: Arc<Monitor>,
}

impl Console {
    pub fn new(monitor: Arc<Monitor>, token: Option<&str>) -> Console {
        Console {
            token: token.map(Token::new),
            read_token: None,
            sessions: Sessions::default(),
            guesses: tokio::sync::Mutex::new(()),
            monitor,
        }
    }
}

impl Console {
    /// Whether the request comes from a browser signed in with the acting token.
    pub fn signed_in(&self, headers: &HeaderMap) -> bool {
        self.token.is_some() && self.sessions.of(headers).is_some()
    }
}

impl Viewers for Console {
    /// Who is looking at a page: signed in (with the forms' CSRF token), or not,
    /// and whether signing in is possible at all.
    fn viewer(&self, headers: &HeaderMap) -> Viewer {
        let session = self.token.as_ref().and(self.sessions.of(headers));
        Viewer {
            console: self.token.is_some(),
            notice: session
                .as_ref()
                .and_then(|(id, _)| self.sessions.take_notice(id)),
            csrf: session.map(|(_, s)| s.csrf),
        }
    }
}

/// The console's routes.
pub fn routes(console: Arc<Console>) -> Router {
    Router::new()
        .route("/sign-in", get(sign_in_page).post(sign_in))
        .route("/sign-out", post(sign_out))
        .route("/queues/{queue}", get(queue_page))
        .route("/queues/{queue}/attempts", get(attempts_page))
        .route("/copies", get(fleet_page))
        .route("/queues/{queue}/inspect", get(inspect_page))
        // `{*action}`: `pause`, `resume`, `failed/retry`, `failed/discard`.
        .route("/queues/{queue}/{*action}", post(form))
        .route("/api/queues/{queue}/inspect", get(api_inspect))
        .route("/api/queues/{queue}/{*action}", post(api))
        .merge(history_routes())
        .with_state(console)
}

/// A plain-text answer.
fn text(status: StatusCode, body: impl Into<String>) -> Response {
    let mut body = body.into();
    body.push('\n');
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        body,
    )
        .into_response()
}

const READ_ONLY: &str = "the console is read-only: start tableq with --console-token-file \
    (TABLEQ_CONSOLE_TOKEN_FILE, or the systemd credential console-token) to act from it";

/// Whether the request may act: a bearer token, checked; `Err` the answer if not.
async fn check_bearer(console: &Console, headers: &HeaderMap) -> Result<(), Response> {
    let Some(token) = &console.token else {
        return Err(text(StatusCode::FORBIDDEN, READ_ONLY));
    };
    match bearer(headers) {
        Some(offered) if token.matches(&offered) => Ok(()),
        Some(_) => Err(wrong_token(console).await),
        None => Err((
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "send the console token: Authorization: Bearer TOKEN\n",
        )
            .into_response()),
    }
}

/// A wrong token's answer, after [`auth::WRONG_TOKEN_DELAY`], one at a time.
async fn wrong_token(console: &Console) -> Response {
    let _one_at_a_time = console.guesses.lock().await;
    tokio::time::sleep(auth::WRONG_TOKEN_DELAY).await;
    text(StatusCode::UNAUTHORIZED, "wrong console token")
}

/// `from 127.0.0.1:4242` (and the proxy's `X-Forwarded-For`).
fn origin(peer: Option<&Peer>, headers: &HeaderMap) -> String {
    let peer = peer.map_or("unknown".to_string(), |p| p.0.to_string());
    match headers.get("x-forwarded-for").and_then(|v| v.to_str().ok()) {
        Some(forwarded) => format!("{peer} (X-Forwarded-For: {forwarded})"),
        None => peer,
    }
}

/// What an action request is aimed at, from its path (`/…/queues/{queue}/{*action}`),
/// and where it came from.
struct Target {
    queue: String,
    /// `pause`, `resume`, `failed/retry`, `failed/discard`.
    action: String,
    /// See [`origin`].
    from: String,
}

impl<S: Send + Sync> FromRequestParts<S> for Target {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Target, Response> {
        let Path((queue, action)) = Path::<(String, String)>::from_request_parts(parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let peer = parts.extensions.get::<Peer>().copied();
        let from = origin(peer.as_ref(), &parts.headers);
        Ok(Target {
            queue,
            action,
            from,
        })
    }
}

/// Runs `action` on the target's queue and logs it; the answer's status and what
/// it did.
async fn run(
    console: &Console,
    target: &Target,
    action: &Action,
    by: &str,
) -> Result<Acted, (StatusCode, String)> {
    let (queue, from) = (target.queue.as_str(), target.from.as_str());
    let Some((stats, setup)) = console.monitor.running(queue) else {
        return Err((
            StatusCode::NOT_FOUND,
            format!("no queue {queue} runs in this process"),
        ));
    };
    match act(&setup, &stats, action).await {
        Ok(acted) => {
            info!(
                action = acted.action,
                queue = %acted.queue,
                rows = acted.rows,
                keys = acted.keys,
                from,
                by,
                "console: {}",
                acted.message
            );
            Ok(acted)
        }
        Err(e) => {
            let status = match &e {
                ActError::Bad(_) => StatusCode::BAD_REQUEST,
                ActError::NoFailedSql(_) => StatusCode::CONFLICT,
                ActError::NoSuchGroup { .. } => StatusCode::NOT_FOUND,
                ActError::Database { .. } => StatusCode::BAD_GATEWAY,
            };
            info!(action = action.name(), queue, rows = 0, from, by, error = %e, "console: refused");
            Err((status, e.to_string()))
        }
    }
}

/// `POST /api/queues/{queue}/…`: JSON in, JSON out.
async fn api(
    State(console): State<Arc<Console>>,
    target: Target,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(refused) = check_bearer(&console, &headers).await {
        return refused;
    }
    let action = match json_action(&target.action, &body) {
        Ok(action) => action,
        Err(why) => return json_error(StatusCode::BAD_REQUEST, &why),
    };
    match run(&console, &target, &action, "bearer token").await {
        Ok(acted) => json(StatusCode::OK, &acted),
        Err((status, why)) => json_error(status, &why),
    }
}

/// A JSON answer.
fn json(status: StatusCode, value: &impl serde::Serialize) -> Response {
    let body = serde_json::to_string(value).unwrap_or_default();
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

fn json_error(status: StatusCode, why: &str) -> Response {
    json(status, &serde_json::json!({ "error": why }))
}

async fn api_inspect(
    State(console): State<Arc<Console>>,
    Path(queue): Path<String>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    if let Err(refused) = check_bearer(&console, &headers).await {
        return refused;
    }
    match inspect_queue(&console, &queue, &uri).await {
        Ok((found, exists)) => {
            let status = match exists {
                Some(false) => StatusCode::NOT_FOUND,
                _ => StatusCode::OK,
            };
            json(status, &found)
        }
        Err((status, why)) => json_error(status, &why),
    }
}

/// Looks up `?key=` in `queue`: the row and where it is, and whether it exists.
async fn inspect_queue(
    console: &Console,
    queue: &str,
    uri: &Uri,
) -> Result<(serde_json::Value, Option<bool>), (StatusCode, String)> {
    let Some(key) = query_value(uri.query(), "key") else {
        return Err((StatusCode::BAD_REQUEST, "name the row: ?key=KEY".into()));
    };
    let Some((_, setup)) = console.monitor.running(queue) else {
        return Err((
            StatusCode::NOT_FOUND,
            format!("no queue {queue} runs in this process"),
        ));
    };
    let found = inspect(&setup, &key)
        .await
        .map_err(|e| (StatusCode::BAD_GATEWAY, e.to_string()))?;
    let exists = found["exists"].as_bool();
    Ok((found, exists))
}

async fn sign_in_page(State(console): State<Arc<Console>>) -> Response {
    match console.token {
        None => text(StatusCode::FORBIDDEN, READ_ONLY),
        Some(_) => status::html_response(StatusCode::OK, status::sign_in_page(None)),
    }
}

async fn sign_in(
    State(console): State<Arc<Console>>,
    peer: Option<Extension<Peer>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(token) = &console.token else {
        return text(StatusCode::FORBIDDEN, READ_ONLY);
    };
    let fields = form_fields(&body);
    let offered = fields.get("token").cloned().unwrap_or_default();
    let from = origin(peer.as_ref().map(|p| &p.0), &headers);
    if !token.matches(&offered) {
        let _one_at_a_time = console.guesses.lock().await;
        tokio::time::sleep(auth::WRONG_TOKEN_DELAY).await;
        info!(from, "console: a sign-in with a wrong token");
        let page = status::sign_in_page(Some("That is not the console token."));
        return status::html_response(StatusCode::UNAUTHORIZED, page);
    }
    let id = console.sessions.open();
    info!(from, "console: signed in");
    (
        StatusCode::SEE_OTHER,
        [
            (header::SET_COOKIE, session_cookie(&id, &headers)),
            (header::LOCATION, "./".to_string()),
        ],
    )
        .into_response()
}

async fn sign_out(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some((id, session)) = console.sessions.of(&headers) {
        let fields = form_fields(&body);
        if !csrf_matches(&session, fields.get("csrf").map(String::as_str)) {
            return text(StatusCode::FORBIDDEN, CSRF_REFUSED);
        }
        console.sessions.close(&id);
    }
    (
        StatusCode::SEE_OTHER,
        [
            (header::SET_COOKIE, cleared_cookie()),
            (header::LOCATION, "./".to_string()),
        ],
    )
        .into_response()
}

const CSRF_REFUSED: &str = "refused: the form's CSRF token is missing or not this session's \
    (reload the page and try again)";

/// A form of the page: signed in, with the session's CSRF token; back to the
/// queue's page, which says what it did.
async fn form(
    State(console): State<Arc<Console>>,
    target: Target,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if console.token.is_none() {
        return text(StatusCode::FORBIDDEN, READ_ONLY);
    }
    let Some((id, session)) = console.sessions.of(&headers) else {
        return text(
            StatusCode::UNAUTHORIZED,
            "sign in first, with the console token, at /sign-in",
        );
    };
    let fields = form_fields(&body);
    if !csrf_matches(&session, fields.get("csrf").map(String::as_str)) {
        return text(StatusCode::FORBIDDEN, CSRF_REFUSED);
    }
    let asked = match form_action(&target.action, &fields) {
        Ok(asked) => asked,
        Err(why) => return text(StatusCode::BAD_REQUEST, why),
    };
    if let Some(question) = confirm_first(&console, &target, &asked, &fields, &session.csrf).await {
        return question;
    }
    let notice = match run(&console, &target, &asked, "browser session").await {
        Ok(acted) => acted.message,
        Err((StatusCode::NOT_FOUND, why)) if console.monitor.running(&target.queue).is_none() => {
            return text(StatusCode::NOT_FOUND, why)
        }
        Err((_, why)) => format!("not done: {why}"),
    };
    console.sessions.set_notice(&id, notice);
    // Relative, so that a proxy's path prefix stays: from …/queues/Q/pause, or
    // …/queues/Q/failed/retry, back to …/queues/Q.
    let up = if target.action.starts_with("failed/") {
        "../../"
    } else {
        "../"
    };
    (
        StatusCode::SEE_OTHER,
        [(header::LOCATION, format!("{up}{}", encode(&target.queue)))],
    )
        .into_response()
}

/// A bulk discard from a page — every row that gave up, or a failure kind's — asks
/// first: a page that says how many rows it would discard, whose button posts it
/// again with that count (`confirm`). Posted with the count found now, it goes
/// ahead (`None`); with another (rows gave up or were retried meanwhile), it asks
/// again. A queue or a `[failed]` it cannot count with is left to the action to say.
async fn confirm_first(
    console: &Console,
    target: &Target,
    asked: &Action,
    fields: &HashMap<String, String>,
    csrf: &str,
) -> Option<Response> {
    let Action::Change {
        change: Change::Discard,
        rows: rows @ (Rows::All | Rows::Group(_)),
    } = asked
    else {
        return None;
    };
    let (stats, setup) = console.monitor.running(&target.queue)?;
    let count = rows_count(&setup, &stats, Change::Discard, rows)
        .await
        .ok()?;
    let confirmed = fields.get("confirm").and_then(|n| n.trim().parse().ok());
    if count > 0 && confirmed == Some(count) {
        return None;
    }
    let group = match rows {
        Rows::Group(kind) => Some(kind.as_str()),
        _ => None,
    };
    let page = status::confirm_discard_page(&target.queue, group, count, confirmed, csrf);
    Some(status::html_response(StatusCode::OK, page))
}

/// A queue's name as a path segment.
fn encode(name: &str) -> String {
    percent_encoding::utf8_percent_encode(name, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// The answer to a browser not signed in to the console (how to), or `None`.
fn not_signed_in(console: &Console, headers: &HeaderMap) -> Option<Response> {
    if console.token.is_none() {
        return Some(text(StatusCode::FORBIDDEN, READ_ONLY));
    }
    (!console.signed_in(headers)).then(|| {
        text(
            StatusCode::UNAUTHORIZED,
            "sign in first, with the console token, at /sign-in",
        )
    })
}

/// Whether a page may show the history's aggregates (charts, copies): to anyone,
/// unless tableq was given `--console-read-token-file`; then to a browser signed in.
fn pages_read(console: &Console, headers: &HeaderMap) -> bool {
    console.read_token.is_none() || console.signed_in(headers)
}

async fn queue_page(
    State(console): State<Arc<Console>>,
    Path(queue): Path<String>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let (viewer, reads) = (console.viewer(&headers), pages_read(&console, &headers));
    pages::queue_page(&console.monitor, &queue, &viewer, uri.query(), reads).await
}

async fn attempts_page(
    State(console): State<Arc<Console>>,
    Path(queue): Path<String>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    if let Some(refused) = not_signed_in(&console, &headers) {
        return refused;
    }
    let viewer = console.viewer(&headers);
    match pages::attempts_page(&console.monitor, &queue, &viewer, uri.query()).await {
        Ok(page) => status::html_response(StatusCode::OK, page),
        Err((status, why)) => text(status, why),
    }
}

async fn fleet_page(State(console): State<Arc<Console>>, headers: HeaderMap) -> Response {
    let (viewer, reads) = (console.viewer(&headers), pages_read(&console, &headers));
    pages::fleet_page(&console.monitor, &viewer, reads).await
}

async fn inspect_page(
    State(console): State<Arc<Console>>,
    Path(queue): Path<String>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    if let Some(refused) = not_signed_in(&console, &headers) {
        return refused;
    }
    match inspect_queue(&console, &queue, &uri).await {
        Ok((found, exists)) => {
            let status = match exists {
                Some(false) => StatusCode::NOT_FOUND,
                _ => StatusCode::OK,
            };
            status::html_response(status, status::inspect_page(&queue, &found))
        }
        Err((status, why)) => text(status, why),
    }
}

/// The history's API routes: the aggregates (`history`, `copies`) are open like
/// the status page, unless `--console-read-token-file` was given (then that token
/// or the acting one reads them); row data (`failed`, `attempts`) needs the acting
/// token, as `inspect` does.
fn history_routes() -> Router<Arc<Console>> {
    Router::new()
        .route("/api/queues/{queue}/history", get(api_history))
        .route("/api/queues/{queue}/failed", get(api_failed))
        .route("/api/queues/{queue}/attempts", get(api_attempts))
        .route("/api/copies", get(api_copies))
}

/// Whether the request may read the aggregates: open without a read token.
async fn check_reader(console: &Console, headers: &HeaderMap) -> Result<(), Response> {
    if console.read_token.is_none() || console.signed_in(headers) {
        return Ok(());
    }
    match bearer(headers) {
        Some(offered)
            if console
                .read_token
                .as_ref()
                .is_some_and(|t| t.matches(&offered)) =>
        {
            Ok(())
        }
        Some(_) if console.token.is_some() => check_bearer(console, headers).await,
        Some(_) => Err(wrong_token(console).await),
        _ => Err(json_error(
            StatusCode::UNAUTHORIZED,
            "send the console's read token: Authorization: Bearer TOKEN",
        )),
    }
}

fn answer<T: serde::Serialize>(field: &str, found: Result<T, history::HistoryError>) -> Response {
    match found {
        Ok(value) => json(StatusCode::OK, &serde_json::json!({ field: value })),
        Err(e) => json_error(e.status(), &e.to_string()),
    }
}

async fn api_history(
    State(console): State<Arc<Console>>,
    Path(queue): Path<String>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    if let Err(refused) = check_reader(&console, &headers).await {
        return refused;
    }
    let since = query_value(uri.query(), "since").unwrap_or_else(|| "1h".into());
    let Some(since) = Since::parse(&since) else {
        return json_error(StatusCode::BAD_REQUEST, "since must be 1h, 24h or 7d");
    };
    let found = match history::setup(&console.monitor, &queue) {
        Ok(setup) => history::history(&setup, since).await,
        Err(e) => Err(e),
    };
    answer("buckets", found)
}

async fn api_failed(
    State(console): State<Arc<Console>>,
    Path(queue): Path<String>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    if let Err(refused) = check_bearer(&console, &headers).await {
        return refused;
    }
    let query = history::FailedQuery {
        text: query_value(uri.query(), "q"),
        limit: query_value(uri.query(), "limit")
            .and_then(|l| l.parse().ok())
            .unwrap_or(50),
        after: query_value(uri.query(), "after"),
    };
    let found = match history::setup(&console.monitor, &queue) {
        Ok(setup) => history::failed(&setup, &query).await,
        Err(e) => Err(e),
    };
    match found {
        Ok(page) => json(StatusCode::OK, &page),
        Err(e) => json_error(e.status(), &e.to_string()),
    }
}

async fn api_attempts(
    State(console): State<Arc<Console>>,
    Path(queue): Path<String>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    if let Err(refused) = check_bearer(&console, &headers).await {
        return refused;
    }
    let Some(key) = query_value(uri.query(), "key") else {
        return json_error(StatusCode::BAD_REQUEST, "name the row: ?key=KEY");
    };
    let found = match history::setup(&console.monitor, &queue) {
        Ok(setup) => history::attempts_of(&setup, &key).await,
        Err(e) => Err(e),
    };
    answer("attempts", found)
}

async fn api_copies(State(console): State<Arc<Console>>, headers: HeaderMap) -> Response {
    if let Err(refused) = check_reader(&console, &headers).await {
        return refused;
    }
    answer("copies", history::copies(&console.monitor).await)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The routes are made without a conflict (axum would panic at start).
    #[test]
    fn the_routes_do_not_conflict() {
        let console = Arc::new(Console::new(Arc::new(Monitor::default()), Some("t")));
        let _ = routes(console);
    }
}
