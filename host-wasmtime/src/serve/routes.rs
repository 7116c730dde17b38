//! The routes: authentication, ownership, and one handler per endpoint.
//! Driver and journal calls are blocking (SQLite, wasmtime), so each runs on
//! tokio's blocking pool.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRequest, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use foldline_core::format::Format;
use foldline_core::turn::Route;
use serde_json::json;
use tower_http::timeout::TimeoutLayer;

use super::access::{admitted, blocking, body_text, check_id, owned, Caller, Params};
use super::compression;
use super::reply::ApiError;
use super::state::App;
use super::tasks;
use crate::driver::ContextOptions;
use crate::error::HostError;
use crate::import::Incoming;
use crate::journal::Journal;

type Shared = State<Arc<App>>;

/// The router of every endpoint.
pub fn router(app: Arc<App>) -> Router {
    let timed = Router::new()
        .route("/api/conversations/{id}/condense", post(tasks::condense))
        .route("/api/conversations/{id}/answer", post(answer_start))
        .route(
            "/api/conversations/{id}/answer/{answer}",
            delete(answer_end),
        )
        .route("/api/conversations/{id}/context", get(context))
        .route("/api/conversations/{id}/verify", get(verify))
        .route("/api/health", get(health))
        .route("/api/members/me", get(me))
        .route("/api/conversations/{id}/members", get(room))
        .route(
            "/api/conversations/{id}/settings",
            get(compression::projection),
        )
        .route(
            "/api/members/me/compression",
            get(compression::get_preferences).put(compression::put_preferences),
        )
        .route("/api/members/me/compression/stats", get(compression::stats))
        .route(
            "/api/conversations/{id}/members/{member}",
            axum::routing::put(room_admit).delete(room_dismiss),
        )
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            app.config.request_timeout,
        ));
    let web = if app.config.web {
        Router::new()
            .route(
                "/",
                get(|| async { page("text/html; charset=utf-8", CHAT_HTML) }),
            )
            .route(
                "/chat.js",
                get(|| async { page("text/javascript; charset=utf-8", CHAT_JS) }),
            )
    } else {
        Router::new()
    };
    let routes = Router::new()
        .merge(web)
        .route(
            "/api/conversations/{id}/tasks/{task}/events",
            get(tasks::events),
        )
        // Appends keep their own deadline, checked before anything is
        // written: a timeout either wrote nothing or did not happen.
        .route("/api/conversations/{id}/messages", post(append))
        .route(
            "/api/conversations/{id}/messages/{turn}",
            axum::routing::put(correct),
        )
        // A long poll keeps its own deadline (at most 25 s).
        .route("/api/conversations/{id}/events", get(super::feed::events))
        .route(
            "/api/conversations/{id}/timeline",
            get(super::timeline::timeline),
        )
        .merge(timed)
        .fallback(|| async {
            ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such endpoint")
        })
        .layer(DefaultBodyLimit::max(app.config.body_limit))
        .layer(axum::middleware::map_response(super::reply::one_shape));
    // Outermost: a preflight is answered before any route, and every answer
    // (a refusal too) names the page's origin when it may call.
    let routes = match app.cors.clone() {
        Some(cors) => routes.layer(cors),
        None => routes,
    };
    routes.with_state(app)
}

/// The reference chat page (`js/examples/chat`, built by
/// `js/scripts/build-chat.mjs`; tests/run checks it is current).
const CHAT_HTML: &str = include_str!("../../web/index.html");
/// The page's one script (the npm package's `foldline/client` inside).
const CHAT_JS: &str = include_str!("../../web/chat.js");

/// What the chat page may load and do: its own script and inline style,
/// calls to its own server and nothing else, never inside another site's
/// frame (a page that takes a member's token and their `/compact` must not
/// be overlaid by one).
const PAGE_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

fn page(content_type: &'static str, body: &'static str) -> axum::response::Response {
    use axum::http::header;
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
            (header::CONTENT_SECURITY_POLICY, PAGE_POLICY),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
        body,
    )
        .into_response()
}

/// The messages of `text` (OpenAI-style messages only, at least one, each
/// one a compaction could take under the server's declaration), after a
/// system turn of an Anthropic request's `system` when there is one,
/// numbered from 1 and sent by the authenticated `member` (never by
/// whatever the body says), with their route and how many of them (0 or 1)
/// are the request's prompt (its leading system or developer message, an
/// Anthropic request's `system` included); parsed once, numbered again
/// where written.
fn admit_messages(
    a: &App,
    conv: &str,
    (text, incoming, system): (&str, Incoming, Option<&serde_json::Value>),
    member: &str,
) -> Result<(Route, Vec<foldline_core::event::Event>, usize), ApiError> {
    let route = Route {
        conversation: conv.to_owned(),
        chat: String::new(),
        sender: String::new(),
    };
    let mut probe = crate::import::parse_messages_as(text, &route, 0, incoming)?;
    if let Some(system) = system {
        let turn = crate::import::anthropic_system(system, &route)?;
        probe.splice(0..0, turn);
        crate::import::renumber(&mut probe, &route, 0);
    }
    if probe.is_empty() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_input",
            "no messages in the body",
        ));
    }
    let check = foldline_core::validate::EventsCheck {
        route: route.clone(),
        events: probe,
        declaration: Some(a.driver.declaration().clone()),
        pinned: Vec::new(),
    };
    foldline_core::validate::check_events(&check).map_err(HostError::Core)?;
    let mut messages = check.events;
    // A batch that opens with a system or developer message (a client
    // posting its prompt with each turn, in any format) holds a prompt
    // the conversation may hold already: written once.
    let prompt = usize::from(matches!(messages.first(),
        Some(foldline_core::event::Event::Message(m))
            if matches!(m.role, foldline_core::turn::Role::System | foldline_core::turn::Role::Developer)));
    for e in &mut messages {
        if let foldline_core::event::Event::Message(m) = e {
            m.sender = member.to_owned();
        }
    }
    Ok((route, messages, prompt))
}

/// `GET /api/health`: `{"ok": true}` once the journal answers a read — a
/// load balancer's or an orchestrator's probe, so no token; a journal that
/// does not answer is the `journal` error (`500`).
async fn health(State(app): Shared) -> Result<Response, ApiError> {
    blocking(move || Ok(app.driver.journal().read_events_page("health", 0, 1)?)).await?;
    Ok(Json(json!({"ok": true})).into_response())
}

/// `GET /api/members/me`: who the bearer token belongs to, `{"id"}` — what
/// a chat page needs to offer Edit on the member's own messages only.
async fn me(Caller(member): Caller) -> Response {
    Json(json!({"id": member})).into_response()
}

/// An append past its deadline: `408 timeout`, nothing written.
fn timed_out() -> ApiError {
    ApiError::new(
        StatusCode::REQUEST_TIMEOUT,
        "timeout",
        "the request took longer than the server's limit; nothing was written",
    )
}

/// `POST …/messages[?format=openai-responses|anthropic|ai-sdk]`: one
/// OpenAI-style message, or an array of them; with a format, OpenAI
/// Responses API items, Anthropic messages or AI SDK model messages.
///
/// The request timeout is a deadline, for reading the body too, checked
/// before the conversation is claimed or written: past it the answer is
/// `408 timeout` and nothing was written; once writing began it completes
/// and answers `201`, however late — never a timeout for a write that
/// happened.
async fn append(
    State(app): Shared,
    Caller(member): Caller,
    Path(id): Path<String>,
    Params(q): Params,
    headers: axum::http::HeaderMap,
    request: axum::extract::Request,
) -> Result<Response, ApiError> {
    let deadline = std::time::Instant::now() + app.config.request_timeout;
    check_id(&id)?;
    let incoming = match q.get("format") {
        None => Incoming::OpenAi,
        Some(name) => name.parse::<Incoming>()?,
    };
    let key = idempotency_key(&headers)?;
    // The body is read under the deadline too: one sent a byte at a time
    // held its connection and up to `--body-limit` bytes for good.
    let body = tokio::time::timeout_at(deadline.into(), Bytes::from_request(request, &()))
        .await
        .map_err(|_| timed_out())?;
    let text = body_text(body)?;
    // An Anthropic body may come in a request's shape, `{system, messages}`.
    let (text, system) = match incoming {
        Incoming::Anthropic => match crate::import::anthropic_request(&text)? {
            Some((system, messages)) => (messages, system),
            None => (text, None),
        },
        _ => (text, None),
    };
    let text = if text.trim_start().starts_with('{') {
        format!("[{text}]")
    } else {
        text
    };
    let (a, conv) = (app.clone(), id.clone());
    let done = blocking(move || {
        // Checked before claiming, so bad input creates nothing.
        let (route, messages, prompt) =
            admit_messages(&a, &conv, (&text, incoming, system.as_ref()), &member)?;
        if std::time::Instant::now() > deadline {
            return Err(timed_out());
        }
        if a.store.claim(&conv, &member)? != member && !a.store.in_room(&conv, &member)? {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "not_owner",
                "this conversation belongs to another member, who has not let you into its room",
            ));
        }
        // A request's prompt joins the conversation's pinned turns once: a
        // client posting it with each turn (an Anthropic request's shape,
        // or messages that open with it) does not write it again.
        a.append(&conv, key.as_deref(), prompt == 1, |after, held| {
            let mut batch = messages[usize::from(held)..].to_vec();
            crate::import::renumber(&mut batch, &route, after);
            Ok(batch)
        })
    })
    .await?;
    let mut r = (
        StatusCode::CREATED,
        Json(json!({"seq": done.seq, "appended": done.count})),
    )
        .into_response();
    if done.replayed {
        r.headers_mut().insert(
            "idempotent-replayed",
            axum::http::HeaderValue::from_static("true"),
        );
        return Ok(r);
    }
    app.wrote(&id);
    // The automatic check runs after the answer, off the request's path.
    app.schedule(&id);
    Ok(r)
}

/// `PUT …/messages/{turn}`: a member corrects what a message they sent
/// says — body `{"content": …}`, a string or OpenAI content parts — as a
/// `correction` event (the journal keeps the original), checked as every
/// correction is (`Driver::correct`: the turn it makes, a covered turn's
/// amendment) and numbered after the turn's latest. `200 {"seq",
/// "correctionSeq"}`; a turn the conversation does not show a model is
/// `404 not_found`, another member's `403 not_author`. The deadline is
/// checked before writing, as an append's is.
async fn correct(
    State(app): Shared,
    Caller(member): Caller,
    Path((id, turn)): Path<(String, String)>,
    request: axum::extract::Request,
) -> Result<Response, ApiError> {
    let deadline = std::time::Instant::now() + app.config.request_timeout;
    check_id(&id)?;
    let body = tokio::time::timeout_at(deadline.into(), Bytes::from_request(request, &()))
        .await
        .map_err(|_| timed_out())?;
    let parts = correction_parts(&body_text(body)?)?;
    let (a, conv) = (app.clone(), id.clone());
    let done = blocking(move || {
        admitted(&a, &conv, &member)?;
        if std::time::Instant::now() > deadline {
            return Err(timed_out());
        }
        a.driver
            .correct(&conv, &turn, parts, Some(&member))
            .map_err(|e| match e {
                HostError::Input(m) => ApiError::new(StatusCode::NOT_FOUND, "not_found", m),
                e => e.into(),
            })
    })
    .await?;
    app.wrote(&id);
    // A covered turn's correction is an amendment the next compaction absorbs.
    app.schedule(&id);
    Ok(Json(json!({"seq": done.seq, "correctionSeq": done.correction_seq})).into_response())
}

/// The parts of a correction's body, `{"content": …}`: what an OpenAI-style
/// message's content converts to (the edge handler reads it alike).
fn correction_parts(text: &str) -> Result<Vec<foldline_core::turn::Part>, ApiError> {
    let bad = |m: String| ApiError::new(StatusCode::BAD_REQUEST, "invalid_input", m);
    let body: serde_json::Value =
        serde_json::from_str(text).map_err(|e| bad(format!("the body is not JSON: {e}")))?;
    let Some(fields) = body.as_object() else {
        return Err(bad(r#"a correction's body is {"content": …}"#.into()));
    };
    if let Some(other) = fields.keys().find(|k| *k != "content") {
        return Err(bad(format!(
            "a correction's body holds content only, not {other:?}"
        )));
    }
    let Some(content) = fields
        .get("content")
        .filter(|c| c.is_string() || c.is_array())
    else {
        return Err(bad(
            "content is a string or an array of content parts".into()
        ));
    };
    let route = Route {
        conversation: "c".into(),
        chat: String::new(),
        sender: String::new(),
    };
    let message = json!([{"role": "user", "content": content}]).to_string();
    match crate::import::parse_messages_as(&message, &route, 0, Incoming::OpenAi)?
        .into_iter()
        .next()
    {
        Some(foldline_core::event::Event::Message(m)) => Ok(m.parts),
        _ => Err(bad("content converts to no message".into())),
    }
}

/// The request's `Idempotency-Key`, when it has one: 1 to 128 of
/// `A-Z a-z 0-9 . _ : -`.
fn idempotency_key(headers: &axum::http::HeaderMap) -> Result<Option<String>, ApiError> {
    let Some(v) = headers.get("idempotency-key") else {
        return Ok(None);
    };
    let k = v.to_str().unwrap_or("");
    if !crate::ids::is_key(k) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_input",
            "an Idempotency-Key is 1 to 128 of A-Z a-z 0-9 . _ : -",
        ));
    }
    Ok(Some(k.to_owned()))
}

/// `?format=`: read as the core reads a format (`Format` with its aliases,
/// so `ai-sdk` is `aiSdk` here as in every runtime); absent is `foldline`.
fn format_of(q: &BTreeMap<String, String>) -> Result<Format, ApiError> {
    let Some(name) = q.get("format") else {
        return Ok(Format::Foldline);
    };
    name.parse().map_err(|e: foldline_core::Error| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_input",
            format!("format: {}", e.message),
        )
    })
}

/// Run `f` on the blocking pool once `member` is found to be the
/// conversation's owner or in its room.
async fn as_member(
    app: Arc<App>,
    member: String,
    id: String,
    f: impl FnOnce(&App, &str) -> Result<Response, ApiError> + Send + 'static,
) -> Result<Response, ApiError> {
    blocking(move || {
        admitted(&app, &id, &member)?;
        f(&app, &id)
    })
    .await
}

/// `GET …/members`: the owner and the room's members (any of them may ask).
async fn room(
    State(app): Shared,
    Caller(member): Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    as_member(app, member, id, |app, id| {
        Ok(Json(json!({
            "owner": app.store.owner(id)?,
            "members": app.store.room(id)?,
        }))
        .into_response())
    })
    .await
}

/// `PUT …/members/{member}`: the owner lets a member of the server into
/// the room (they then read and post; only the owner condenses).
async fn room_admit(
    State(app): Shared,
    Caller(caller): Caller,
    Path((id, member)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    blocking(move || {
        owned(&app, &id, &caller)?;
        if !app.is_member(&member) {
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                "not_found",
                format!("no member {member:?} on this server"),
            ));
        }
        if member != caller {
            app.store.admit(&id, &member)?;
        }
        Ok(StatusCode::NO_CONTENT.into_response())
    })
    .await
}

/// `DELETE …/members/{member}`: the owner takes a member out of the room.
async fn room_dismiss(
    State(app): Shared,
    Caller(caller): Caller,
    Path((id, member)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    blocking(move || {
        owned(&app, &id, &caller)?;
        if !app.store.dismiss(&id, &member)? {
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                "not_found",
                format!("{member:?} is not in this room"),
            ));
        }
        Ok(StatusCode::NO_CONTENT.into_response())
    })
    .await
}

/// `GET …/context?format=…[&messages=true]`.
async fn context(
    State(app): Shared,
    Caller(member): Caller,
    Path(id): Path<String>,
    Params(q): Params,
) -> Result<Response, ApiError> {
    let format = format_of(&q)?;
    let only_messages = q.get("messages").is_some_and(|v| v == "true" || v == "1");
    let caller = member.clone();
    as_member(app, member, id, move |app, id| {
        let s = app.driver.context(
            id,
            ContextOptions {
                format,
                member: compression::run_state(app, id, &caller)?,
                ..ContextOptions::default()
            },
        )?;
        compression::record(app, id, &caller, s.manifest.member.as_ref())?;
        Ok(if only_messages {
            Json(serde_json::to_value(&s.messages).map_err(|e| HostError::Input(e.to_string()))?)
                .into_response()
        } else {
            Json(s).into_response()
        })
    })
    .await
}

/// `GET …/verify`: `{"ok": true, "resolution"}` or `{"ok": false, "error"}`.
async fn verify(
    State(app): Shared,
    Caller(member): Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    as_member(app, member, id, |app, id| {
        Ok(match app.driver.resolve(id) {
            Ok(r) => Json(json!({
                "ok": true,
                "resolution": r,
                "progress": app.driver.journal().progress(id)?,
            }))
            .into_response(),
            Err(HostError::Core(e)) => Json(json!({
                "ok": false,
                "error": {"code": e.code.as_str(), "message": e.message}
            }))
            .into_response(),
            Err(e) => return Err(e.into()),
        })
    })
    .await
}

/// `POST …/answer`: an agent run takes the session (the conversation's
/// writer lease), so no compaction interleaves with it.
async fn answer_start(
    State(app): Shared,
    Caller(member): Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let caller = member.clone();
    as_member(app, member, id, move |app, id| {
        let busy = |why: &str| ApiError::new(StatusCode::CONFLICT, "busy", why);
        let answer = app.next_id("answer");
        let now = (app.driver.clock)();
        let ttl = app.config.answer_lease.as_millis() as u64;
        let holder = format!("answer:{answer}");
        if app
            .driver
            .journal()
            .acquire_lease(id, &holder, now, ttl)?
            .is_none()
        {
            return Err(busy(if app.answering(id)? {
                "another answer holds the session"
            } else {
                "a compaction is running; ask again in a moment"
            }));
        }
        if !app.store.start_answer(id, &answer, now, now + ttl)? {
            app.driver.journal().release_lease(id, &holder)?;
            return Err(busy("another answer holds the session"));
        }
        // The member's compression state enters the run once, here.
        compression::capture(app, id, &answer, &caller)?;
        Ok((
            StatusCode::CREATED,
            Json(json!({"answer": answer, "expiresInMs": ttl})),
        )
            .into_response())
    })
    .await
}

/// `DELETE …/answer/{answer}`: give the session back.
async fn answer_end(
    State(app): Shared,
    Caller(member): Caller,
    Path((id, answer)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let a = app.clone();
    let conv = id.clone();
    blocking(move || {
        admitted(&a, &conv, &member)?;
        if !a.store.end_answer(&conv, &answer)? {
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                "not_found",
                format!("no answer {answer:?} holds this session"),
            ));
        }
        a.driver
            .journal()
            .release_lease(&conv, &format!("answer:{answer}"))?;
        Ok(())
    })
    .await?;
    // Messages that arrived during the answer may have made compaction due.
    app.schedule(&id);
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[cfg(test)]
mod tests {
    #[test]
    fn dot_segments_and_other_characters_are_not_ids() {
        for bad in [".", "..", "", "a b", "a/b", &"x".repeat(129)] {
            assert!(super::check_id(bad).is_err(), "{bad:?}");
        }
        for good in ["c1", "a.b", "...", "x:y-z_1"] {
            assert!(super::check_id(good).is_ok(), "{good:?}");
        }
    }
}
