//! Member compression's routes (seed 002): a member's own opt-ins, their
//! recorded passes, and the settings projection the model would see.
//!
//! | Route | What |
//! |---|---|
//! | `GET /api/members/me/compression` | availability, the caller's preferences and the effective state |
//! | `PUT /api/members/me/compression` | set the caller's preferences (`{"master", "toolResult", "plainSpeak", "promptTrim"}`, absent = off); runs started after it use them |
//! | `GET /api/members/me/compression/stats` | the caller's recorded passes, summed by tool and status (content-dark) |
//! | `GET /api/conversations/{id}/settings` | the projection block, effective state and plain-speak fragment for the caller in that conversation |
//!
//! With `MEMBER_COMPRESSION_ENABLED` off the surface does not exist: the
//! member routes answer `404 not_available`. Availability never opts anyone
//! in; everyone starts with everything off.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use foldline_core::member::seams::{MemberInput, MemberManifest};
use foldline_core::member::settings::{self, Preferences, SettingsRequest, SettingsResponse};
use serde_json::json;

use super::access::{admitted, blocking, body_text, Caller};
use super::reply::ApiError;
use super::state::App;

type Shared = State<Arc<App>>;

fn surface(app: &App) -> Result<(), ApiError> {
    if app.config.compression.surface {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "not_available",
            "member compression is not available on this server (MEMBER_COMPRESSION_ENABLED)",
        ))
    }
}

/// The caller's view: availability, preferences, effective state.
fn view(app: &App, p: Preferences) -> Response {
    let a = app.config.compression;
    Json(json!({
        "availability": a,
        "preferences": p,
        "state": settings::effective(&a, &p),
    }))
    .into_response()
}

/// `GET /api/members/me/compression`.
pub async fn get_preferences(
    State(app): Shared,
    Caller(member): Caller,
) -> Result<Response, ApiError> {
    blocking(move || {
        surface(&app)?;
        let p = app.store.preferences(&member)?;
        Ok(view(&app, p))
    })
    .await
}

/// `PUT /api/members/me/compression`.
pub async fn put_preferences(
    State(app): Shared,
    Caller(member): Caller,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let text = body_text(body)?;
    // Through a JSON value: a field given twice is the last one given, as
    // in message bodies and as the edge handler's `JSON.parse` reads it.
    let p: Preferences = serde_json::from_str::<serde_json::Value>(&text)
        .and_then(serde_json::from_value)
        .map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_input",
            format!("compression preferences: {e} (fields: master, toolResult, plainSpeak, promptTrim; true or false)"),
        )
    })?;
    blocking(move || {
        surface(&app)?;
        app.store.set_preferences(&member, &p)?;
        Ok(view(&app, p))
    })
    .await
}

/// `GET /api/members/me/compression/stats`.
pub async fn stats(State(app): Shared, Caller(member): Caller) -> Result<Response, ApiError> {
    blocking(move || {
        surface(&app)?;
        Ok(Json(json!({"passes": app.store.stats(&member)?})).into_response())
    })
    .await
}

/// `GET /api/conversations/{id}/settings`: what the model would see.
pub async fn projection(
    State(app): Shared,
    Caller(member): Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    blocking(move || {
        admitted(&app, &id, &member)?;
        let input = run_state(&app, &id, &member)?.unwrap_or_default();
        let r: SettingsResponse = app.driver.foldline().call(
            "settings",
            &SettingsRequest {
                availability: input.availability,
                preferences: input.preferences,
                message: None,
            },
        )?;
        Ok(Json(r).into_response())
    })
    .await
}

/// The member state a run in `conversation` uses: the preferences the
/// answer holding the session captured at its start, else the member's
/// current ones. `None` when the surface is off (nothing is shaped).
///
/// # Errors
/// Storage failures.
pub fn run_state(
    app: &App,
    conversation: &str,
    member: &str,
) -> crate::error::Result<Option<MemberInput>> {
    let availability = app.config.compression;
    if !availability.surface {
        return Ok(None);
    }
    let now = (app.driver.clock)();
    let captured = match app.store.answer(conversation, now)? {
        Some(answer) => app.store.captured(conversation, &answer)?,
        None => None,
    };
    let preferences = match captured {
        Some(p) => p,
        None => app.store.preferences(member)?,
    };
    Ok(Some(MemberInput {
        availability,
        preferences,
    }))
}

/// Capture the caller's preferences for the answer that just took the
/// session.
///
/// # Errors
/// Storage failures.
pub fn capture(
    app: &App,
    conversation: &str,
    answer: &str,
    member: &str,
) -> crate::error::Result<()> {
    if app.config.compression.surface {
        let p = app.store.preferences(member)?;
        app.store.capture(conversation, answer, &p)?;
    }
    Ok(())
}

/// Record what a context's passes did, once per pass, for the caller.
///
/// # Errors
/// Storage failures.
pub fn record(
    app: &App,
    conversation: &str,
    member: &str,
    m: Option<&MemberManifest>,
) -> crate::error::Result<()> {
    match m {
        Some(m) if !m.passes.is_empty() => app.store.record_passes(member, conversation, &m.passes),
        _ => Ok(()),
    }
}
