//! `GET /api/conversations/{id}/timeline[?limit=N][&before=S][&wait=ms]`:
//! the chat timeline, or one page of it (the latest `limit` items at
//! positions below `before`; the answer's `earlier` asks for the page
//! before), with an `ETag` naming the journal position and declarations it
//! was drawn at. A client that sends the tag back in `If-None-Match` gets
//! `304` while nothing was written, without the timeline being drawn again;
//! with `wait` (at most 25,000 ms) the `304` waits until something is
//! written or the time is up — a chat page follows the conversation at the
//! cost of one position read per write, however long the conversation; the
//! pages that wake on one write share one drawing (`serve/drawn.rs`).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE, ETAG, IF_NONE_MATCH};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use foldline_core::defaults::TIMELINE_KEPT_BYTES;
use sha2::Digest as _;

use super::access::{admitted, blocking, Caller, Params};
use super::drawn::Answer;
use super::feed::{due, nap, number, still_admitted, wait_deadline, waiter};
use super::reply::ApiError;
use super::state::App;
use crate::driver::Page;
use crate::error::HostError;

/// The route.
pub async fn timeline(
    State(app): State<Arc<App>>,
    Caller(member): Caller,
    Path(id): Path<String>,
    Params(q): Params,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let page = Page {
        limit: number(&q, "limit")?,
        before: number(&q, "before")?,
    };
    let deadline = wait_deadline(&q)?;
    let known = headers
        .get(IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let (a, c, m) = (app.clone(), id.clone(), member.clone());
    blocking(move || admitted(&a, &c, &m)).await?;
    if let Some(known) = known {
        let mut written = waiter(&app, &id, &member, deadline)?;
        let mut waited = false;
        loop {
            let (a, c) = (app.clone(), id.clone());
            let now = blocking(move || Ok(tag(&a, a.driver.position(&c)?))).await?;
            if !matches(&known, &now) {
                break;
            }
            if due(&app, deadline) {
                return Ok(tagged(StatusCode::NOT_MODIFIED.into_response(), &now));
            }
            nap(&app, &mut written, deadline).await;
            waited = true;
        }
        if waited {
            still_admitted(&app, &id, &member).await?;
        }
    }
    // One drawing per page and write: requests for the same page wait on
    // its slot while the first draws, then answer from it.
    let slot = app.drawn.slot(&id, page);
    let mut kept = slot.lock().await;
    let (a, c) = (app.clone(), id.clone());
    let now = blocking(move || Ok(tag(&a, a.driver.position(&c)?))).await?;
    if let Some(k) = kept.as_ref().filter(|k| k.tag == now) {
        return Ok(answer(k.body.clone(), &k.tag));
    }
    let a = app.clone();
    let (t, seq) = blocking(move || Ok(a.driver.timeline_at(&id, page)?)).await?;
    let body = Bytes::from(serde_json::to_vec(&t).map_err(|e| HostError::Input(e.to_string()))?);
    let drawn = tag(&app, seq);
    let r = answer(body.clone(), &drawn);
    *kept = (body.len() as u64 <= TIMELINE_KEPT_BYTES).then_some(Answer { tag: drawn, body });
    Ok(r)
}

/// A timeline's JSON with its tag.
fn answer(body: Bytes, tag: &str) -> Response {
    tagged(
        ([(CONTENT_TYPE, "application/json")], body).into_response(),
        tag,
    )
}

/// The tag of a timeline drawn at `seq` under this server's declarations
/// (another declaration draws other dividers from the same journal).
fn tag(app: &App, seq: u64) -> String {
    let under = sha2::Sha256::digest(app.driver.fingerprints().as_bytes());
    let short: String = under[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("\"{seq}-{short}\"")
}

/// Whether an `If-None-Match` list names `tag` (weak or strong, or `*`).
fn matches(list: &str, tag: &str) -> bool {
    list.split(',')
        .map(|t| t.trim().trim_start_matches("W/"))
        .any(|t| t == tag || t == "*")
}

/// `r` with its tag, to be revalidated on every use.
fn tagged(mut r: Response, tag: &str) -> Response {
    if let Ok(v) = HeaderValue::from_str(tag) {
        r.headers_mut().insert(ETAG, v);
    }
    r.headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("private, no-cache"));
    r
}
