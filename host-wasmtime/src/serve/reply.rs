//! HTTP answers: every failure is `{"error": {"code", "message"}}` with a
//! stable code and a status that fits it. Host internals (journal, runtime)
//! are logged, never sent: a member sees the code and a generic message.

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;

use crate::error::HostError;

/// A refused or failed request.
#[derive(Debug)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Stable code.
    pub code: String,
    /// Message for people.
    pub message: String,
    /// Seconds to wait before asking again (429).
    pub retry_after: Option<u64>,
}

impl ApiError {
    /// A refusal with a status and code.
    pub fn new(status: StatusCode, code: &str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code: code.to_owned(),
            message: message.into(),
            retry_after: None,
        }
    }
}

/// The status of a stable code, as both servers answer it (the table is
/// `tests/http/status.json`; the edge handler's `httpStatusOf` is tested
/// against it too).
pub fn status_of(code: &str) -> StatusCode {
    match code {
        "unauthorized" => StatusCode::UNAUTHORIZED,
        "not_owner" | "not_author" => StatusCode::FORBIDDEN,
        "not_found" => StatusCode::NOT_FOUND,
        "body_too_large" | "turn_too_large" | "pinned_too_large" => StatusCode::PAYLOAD_TOO_LARGE,
        "rate_limited" => StatusCode::TOO_MANY_REQUESTS,
        "timeout" => StatusCode::REQUEST_TIMEOUT,
        "method_not_allowed" => StatusCode::METHOD_NOT_ALLOWED,
        "session_busy" | "nothing_to_fold" | "busy" | "conflict" | "fork" | "lease_lost"
        | "shutting_down" => StatusCode::CONFLICT,
        "invalid_input" | "invalid_request" | "wrong_route" | "conflicting_turn" => {
            StatusCode::BAD_REQUEST
        }
        "journal"
        | "io"
        | "trap"
        | "malformed_output"
        | "load_failed"
        | "unsupported_version"
        | "fuel_exhausted"
        | "time_limit"
        | "memory_limit"
        | "model" => StatusCode::INTERNAL_SERVER_ERROR,
        // The rest are the core's refusals of what the journal holds.
        _ => StatusCode::UNPROCESSABLE_ENTITY,
    }
}

impl From<HostError> for ApiError {
    fn from(e: HostError) -> ApiError {
        let code = e.code().to_owned();
        let status = status_of(&code);
        let message = if status == StatusCode::INTERNAL_SERVER_ERROR {
            eprintln!("foldline serve: {e}");
            "the server failed; the details are in its log".to_owned()
        } else {
            e.to_string()
        };
        ApiError {
            status,
            code,
            message,
            retry_after: None,
        }
    }
}

/// The framework's own refusals (an undecodable path, a wrong method, a
/// request timeout, a body over the limit: answered by axum and tower-http
/// with a plain or empty body) rewritten into the one error shape, with the
/// stable code of their status. Answers that are already JSON pass as they
/// are.
pub async fn one_shape(r: Response) -> Response {
    let status = r.status();
    let json = r
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || json {
        return r;
    }
    let (code, message) = match status {
        StatusCode::BAD_REQUEST => (
            "invalid_input",
            "the request's path or query cannot be read (percent-escapes must be UTF-8)",
        ),
        StatusCode::NOT_FOUND => ("not_found", "no such endpoint"),
        StatusCode::METHOD_NOT_ALLOWED => (
            "method_not_allowed",
            "this endpoint does not take that method",
        ),
        StatusCode::REQUEST_TIMEOUT => (
            "timeout",
            "the request took longer than the server's limit; nothing was written",
        ),
        StatusCode::PAYLOAD_TOO_LARGE => (
            "body_too_large",
            "the request body is larger than the server's limit",
        ),
        StatusCode::UNSUPPORTED_MEDIA_TYPE => ("invalid_input", "unsupported content type"),
        s if s.is_client_error() => ("invalid_input", "the request was refused"),
        _ => ("internal", "the server failed; the details are in its log"),
    };
    ApiError::new(status, code, message).into_response()
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({"error": {"code": self.code, "message": self.message}});
        let mut r = (self.status, Json(body)).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            r.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer"),
            );
        }
        if let Some(s) = self.retry_after {
            if let Ok(v) = HeaderValue::from_str(&s.to_string()) {
                r.headers_mut().insert(axum::http::header::RETRY_AFTER, v);
            }
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::status_of;

    /// Every stable code answers the status of the table both servers are
    /// tested against (`tests/http/status.json`; the edge handler's
    /// `httpStatusOf` in js/test/handler.test.mjs).
    #[test]
    fn every_code_answers_the_shared_tables_status() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/http/status.json");
        let table: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let codes = table["codes"].as_object().unwrap();
        assert!(codes.len() >= 40, "{} codes", codes.len());
        for (code, status) in codes {
            assert_eq!(
                u64::from(status_of(code).as_u16()),
                status.as_u64().unwrap(),
                "{code}"
            );
        }
        assert_eq!(
            u64::from(status_of("a_code_nobody_knows").as_u16()),
            table["default"].as_u64().unwrap()
        );
    }
}
