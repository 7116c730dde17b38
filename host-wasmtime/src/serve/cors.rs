//! Calls from pages of other origins (`--allow-origin`): a chat client
//! served from elsewhere (`foldline/client` given the server's `baseUrl`)
//! sends each request with a bearer token, so the browser asks first (a preflight `OPTIONS`)
//! and reads an answer only when it names the page's origin. tower-http's
//! `CorsLayer` over every route, with the origins the server was given;
//! given none, no CORS header at all: pages of the server's own origin only,
//! as before. The edge handler's twin is `js/src/handler/cors.ts`.

use std::time::Duration;

use axum::http::{header, HeaderName, HeaderValue, Method};
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::error::{HostError, Result};

/// What a page may send: its token, its body's type, an idempotency key, the
/// ETag of the timeline it holds, the last task event it saw.
const REQUEST_HEADERS: [HeaderName; 5] = [
    header::AUTHORIZATION,
    header::CONTENT_TYPE,
    HeaderName::from_static("idempotency-key"),
    header::IF_NONE_MATCH,
    HeaderName::from_static("last-event-id"),
];

/// What a page may read beside a body: the timeline's ETag, whether an
/// append was a replay, when to ask again after `429`.
const ANSWER_HEADERS: [HeaderName; 3] = [
    header::ETAG,
    HeaderName::from_static("idempotent-replayed"),
    header::RETRY_AFTER,
];

/// How long a browser may keep a preflight's answer.
const PREFLIGHT_KEPT: Duration = Duration::from_secs(600);

/// The layer for `origins` (each `scheme://host[:port]` as a browser sends
/// it, or `*` for any), `None` for none.
///
/// # Errors
/// `invalid_input` naming an origin of another form.
pub fn layer(origins: &[String]) -> Result<Option<CorsLayer>> {
    if origins.is_empty() {
        return Ok(None);
    }
    let listed = origins
        .iter()
        .filter(|o| *o != "*")
        .map(|o| origin(o))
        .collect::<Result<Vec<_>>>()?;
    let allow = if listed.len() < origins.len() {
        AllowOrigin::any()
    } else {
        AllowOrigin::list(listed)
    };
    Ok(Some(
        CorsLayer::new()
            .allow_origin(allow)
            .allow_methods([Method::GET, Method::POST, Method::PUT, Method::DELETE])
            .allow_headers(REQUEST_HEADERS)
            .expose_headers(ANSWER_HEADERS)
            .max_age(PREFLIGHT_KEPT),
    ))
}

/// `text` as a browser's `Origin` header says it: `http` or `https`, `://`,
/// a host and an optional port (letters, digits, `-._:[]`), nothing after;
/// in lower case, as browsers send it. The edge handler checks the same.
fn origin(text: &str) -> Result<HeaderValue> {
    let lower = text.to_ascii_lowercase();
    let authority = lower
        .strip_prefix("https://")
        .or_else(|| lower.strip_prefix("http://"))
        .unwrap_or_default();
    let fits = !authority.is_empty()
        && !authority.ends_with(':')
        && authority
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._:[]".contains(&b));
    match fits.then(|| HeaderValue::from_str(&lower)) {
        Some(Ok(v)) => Ok(v),
        _ => Err(HostError::Input(format!(
            "allowed origin {text:?} is not an origin: scheme://host[:port] as a browser sends it (http or https, nothing after the port), or * for any"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::{layer, origin};

    /// What is taken as an origin, and as which, is the table both servers
    /// are tested against (`tests/http/origins.json`; the edge handler's in
    /// js/test/handler.test.mjs).
    #[test]
    fn origins_are_taken_as_the_shared_table_says() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/http/origins.json");
        let table: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        for (given, taken) in table["accepted"].as_object().unwrap() {
            assert_eq!(origin(given).unwrap().to_str().unwrap(), taken, "{given}");
        }
        for given in table["refused"].as_array().unwrap() {
            let given = given.as_str().unwrap();
            let e = origin(given).unwrap_err();
            assert_eq!(e.code(), "invalid_input", "{given}");
            // One bad origin beside `*` is refused too.
            assert!(layer(&["*".into(), given.into()]).is_err(), "{given}");
        }
        assert!(layer(&[]).unwrap().is_none());
        assert!(layer(&["*".into()]).unwrap().is_some());
    }
}
