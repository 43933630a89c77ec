//! Who may act: the bearer of the console token (`Authorization: Bearer TOKEN`, for
//! scripts), or a browser signed in with it — a session cookie (HttpOnly,
//! SameSite=Strict) and, on every form, the session's CSRF token. Tokens are
//! compared in constant time; a wrong one is answered after a pause, one at a
//! time, so guessing costs a second a guess whatever the number of connections.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::http::{header, HeaderMap};
use base64::Engine;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::lock::lock;

/// The session cookie's name.
pub const COOKIE: &str = "tableq_session";
/// How long a browser stays signed in.
pub const SESSION_LIFETIME: Duration = Duration::from_secs(12 * 3600);
/// Sessions kept at once; the oldest makes room.
const MAX_SESSIONS: usize = 1000;
/// How long a wrong token waits for its answer.
pub const WRONG_TOKEN_DELAY: Duration = Duration::from_secs(1);

/// The console token, as its file holds it (surrounding whitespace trimmed).
pub struct Token(Vec<u8>);

impl Token {
    pub fn new(text: &str) -> Token {
        Token(text.trim().as_bytes().to_vec())
    }

    /// Whether `offered` is the token, in time that does not depend on where they
    /// differ (both are hashed first, so neither does it depend on their lengths).
    pub fn matches(&self, offered: &str) -> bool {
        let want = Sha256::digest(&self.0);
        let got = Sha256::digest(offered.trim().as_bytes());
        bool::from(want.as_slice().ct_eq(got.as_slice())) && !self.0.is_empty()
    }
}

/// A signed-in browser.
#[derive(Debug, Clone)]
pub struct Session {
    /// What every form of this session carries.
    pub csrf: String,
    until: Instant,
    /// What the last action did, said once on the next page.
    pub notice: Option<String>,
}

/// The signed-in browsers, by session id.
#[derive(Default)]
pub struct Sessions(Mutex<HashMap<String, Session>>);

impl Sessions {
    /// A new session: its id (the cookie's value).
    pub fn open(&self) -> String {
        let id = random_token();
        let mut sessions = lock(&self.0);
        let now = Instant::now();
        sessions.retain(|_, s| s.until > now);
        if sessions.len() >= MAX_SESSIONS {
            let oldest = sessions
                .iter()
                .min_by_key(|(_, s)| s.until)
                .map(|(id, _)| id.clone());
            sessions.remove(&oldest.unwrap_or_default());
        }
        let session = Session {
            csrf: random_token(),
            until: now + SESSION_LIFETIME,
            notice: None,
        };
        sessions.insert(id.clone(), session);
        id
    }

    /// The session the request's cookie names, if it is one and has not run out.
    pub fn of(&self, headers: &HeaderMap) -> Option<(String, Session)> {
        let id = cookie(headers, COOKIE)?;
        let sessions = lock(&self.0);
        let session = sessions.get(&id).filter(|s| s.until > Instant::now())?;
        Some((id, session.clone()))
    }

    /// Takes the session's notice, to show it once.
    pub fn take_notice(&self, id: &str) -> Option<String> {
        lock(&self.0).get_mut(id)?.notice.take()
    }

    pub fn set_notice(&self, id: &str, notice: String) {
        if let Some(session) = lock(&self.0).get_mut(id) {
            session.notice = Some(notice);
        }
    }

    pub fn close(&self, id: &str) {
        lock(&self.0).remove(id);
    }
}

/// The `Set-Cookie` of session `id`; `Secure` when the request came over HTTPS (a
/// reverse proxy says so with `X-Forwarded-Proto`).
pub fn session_cookie(id: &str, headers: &HeaderMap) -> String {
    let secure = match forwarded_https(headers) {
        true => "; Secure",
        false => "",
    };
    format!(
        "{COOKIE}={id}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}{secure}",
        SESSION_LIFETIME.as_secs()
    )
}

/// The `Set-Cookie` that ends the session in the browser.
pub fn cleared_cookie() -> String {
    format!("{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0")
}

fn forwarded_https(headers: &HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("https"))
}

/// The token of `Authorization: Bearer TOKEN`, if the request has one.
pub fn bearer(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim().to_string())
}

/// The value of cookie `name`.
fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.to_string())
}

/// Whether the form's CSRF token is the session's, compared in constant time.
pub fn csrf_matches(session: &Session, offered: Option<&str>) -> bool {
    let Some(offered) = offered else {
        return false;
    };
    bool::from(session.csrf.as_bytes().ct_eq(offered.as_bytes()))
}

/// 32 random bytes from the operating system, URL-safe.
fn random_token() -> String {
    let mut bytes = [0u8; 32];
    // The system's generator does not fail on Linux once booted; were it to, the
    // fastrand fallback is still unguessable from outside for a session's life.
    if getrandom::fill(&mut bytes).is_err() {
        bytes.iter_mut().for_each(|b| *b = fastrand::u8(..));
    }
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_matches_itself_only_and_an_empty_one_nothing() {
        let token = Token::new("s3cret\n");
        assert!(token.matches("s3cret"));
        assert!(!token.matches("s3cres"));
        assert!(!token.matches("s3cret-and-more"));
        assert!(!token.matches(""));
        assert!(!Token::new("").matches(""));
    }

    #[test]
    fn a_session_is_found_by_its_cookie_and_checks_its_csrf_token() {
        let sessions = Sessions::default();
        let id = sessions.open();
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            format!("a=1; {COOKIE}={id}").parse().unwrap(),
        );
        let (found, session) = sessions.of(&headers).unwrap();
        assert_eq!(found, id);
        assert!(csrf_matches(&session, Some(&session.csrf)));
        assert!(!csrf_matches(&session, Some("forged")));
        assert!(!csrf_matches(&session, None));
        sessions.close(&id);
        assert!(sessions.of(&headers).is_none());
        let cookie = session_cookie(&id, &HeaderMap::new());
        assert!(cookie.contains("HttpOnly; SameSite=Strict") && !cookie.contains("Secure"));
    }
}
