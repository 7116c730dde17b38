//! Who may do what, and the plumbing every route shares: the caller from its
//! bearer token, conversation ids, the owner and room checks, the request
//! body as text, and blocking work off the async workers. Every route module
//! (routes, tasks, feed, compression) uses these; this module uses none of
//! them.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::StatusCode;
use foldline_core::defaults::BODY_DEPTH;

use super::reply::ApiError;
use super::state::App;

/// A request's query parameters, each named at most once: a repeated one
/// (`?format=openai&format=anthropic`) is `400 invalid_input` naming it,
/// rather than one of its values chosen (the edge handler refuses it the
/// same way), and a query that does not decode is `400 invalid_input` too.
pub struct Params(pub std::collections::BTreeMap<String, String>);

impl<S: Send + Sync> FromRequestParts<S> for Params {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let bad = |m: String| ApiError::new(StatusCode::BAD_REQUEST, "invalid_input", m);
        let axum::extract::Query(pairs) =
            axum::extract::Query::<Vec<(String, String)>>::try_from_uri(&parts.uri)
                .map_err(|e| bad(format!("the query string does not decode: {e}")))?;
        let mut q = std::collections::BTreeMap::new();
        for (k, v) in pairs {
            if q.contains_key(&k) {
                return Err(bad(format!("{k} is given more than once")));
            }
            q.insert(k, v);
        }
        Ok(Params(q))
    }
}

/// The member a request's bearer token belongs to.
pub struct Caller(pub String);

impl FromRequestParts<Arc<App>> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, app: &Arc<App>) -> Result<Self, ApiError> {
        let token = parts
            .headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            // The scheme is case-insensitive (RFC 9110, section 11.1).
            .and_then(|v| v.trim_start().split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, t)| t.trim());
        token
            .and_then(|t| app.authenticate(t))
            .map(Caller)
            .ok_or_else(unauthorized)
    }
}

/// The refusal of a request without a member's token (`401 unauthorized`).
pub fn unauthorized() -> ApiError {
    ApiError::new(
        StatusCode::UNAUTHORIZED,
        "unauthorized",
        "a member's bearer token is needed: Authorization: Bearer <token>",
    )
}

/// A conversation id: 1 to 128 of `A-Z a-z 0-9 . _ : -`, and not `.` or
/// `..` (browsers and curl normalize those path segments away).
pub fn check_id(id: &str) -> Result<(), ApiError> {
    if crate::ids::is_conversation(id) {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_input",
            "a conversation id is 1 to 128 of A-Z a-z 0-9 . _ : -, other than . and ..",
        ))
    }
}

/// Refuse anyone but the conversation's owner; `not_found` when it does not exist.
pub fn owned(app: &App, conversation: &str, member: &str) -> Result<(), ApiError> {
    check_id(conversation)?;
    match app.store.owner(conversation)? {
        None => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no conversation {conversation:?}"),
        )),
        Some(o) if o != member => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "not_owner",
            "this conversation belongs to another member",
        )),
        Some(_) => Ok(()),
    }
}

/// Refuse anyone but the conversation's owner and the members of its room;
/// `not_found` when it does not exist.
pub fn admitted(app: &App, conversation: &str, member: &str) -> Result<(), ApiError> {
    match owned(app, conversation, member) {
        Err(e) if e.code == "not_owner" && app.store.in_room(conversation, member)? => Ok(()),
        other => other,
    }
}

/// Run blocking work on the blocking pool.
pub async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f).await.map_err(|e| {
        eprintln!("foldline serve: a request's work panicked: {e}");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "the server failed; the details are in its log",
        )
    })?
}

/// The request body as UTF-8 text: `body_too_large` over the server's
/// limit, `invalid_input` when it cannot be read or is not UTF-8.
pub fn body_text(body: Result<Bytes, BytesRejection>) -> Result<String, ApiError> {
    let body = body.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "body_too_large",
                "the request body is larger than the server's limit",
            )
        } else {
            ApiError::new(StatusCode::BAD_REQUEST, "invalid_input", e.body_text())
        }
    })?;
    let text = String::from_utf8(body.to_vec()).map_err(|_| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_input",
            "the body is not UTF-8",
        )
    })?;
    if nesting(text.as_bytes()) > BODY_DEPTH {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_input",
            format!("the body nests arrays and objects deeper than {BODY_DEPTH}"),
        ));
    }
    // A leading byte order mark is ignored (RFC 8259 allows it; the edge
    // handler's UTF-8 decoding drops it too).
    Ok(match text.strip_prefix('\u{feff}') {
        Some(rest) => rest.to_owned(),
        None => text,
    })
}

/// The deepest nesting of arrays and objects in JSON text, strings skipped:
/// a limit both servers apply before parsing, so they refuse the same
/// bodies (their JSON parsers stop at different depths).
pub fn nesting(text: &[u8]) -> u64 {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0u64, 0u64, false, false);
    for &b in text {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}
