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

/// The status of a stable code.
pub fn status_of(code: &str) -> StatusCode {
    match code {
        "unauthorized" => StatusCode::UNAUTHORIZED,
        "not_owner" => StatusCode::FORBIDDEN,
        "not_found" => StatusCode::NOT_FOUND,
        "body_too_large" => StatusCode::PAYLOAD_TOO_LARGE,
        "rate_limited" => StatusCode::TOO_MANY_REQUESTS,
        "session_busy" | "nothing_to_fold" | "busy" | "conflict" | "fork" | "shutting_down" => {
            StatusCode::CONFLICT
        }
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
