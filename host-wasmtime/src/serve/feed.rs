//! `GET /api/conversations/{id}/events?after=N[&limit=L][&wait=ms]`: the
//! conversation's member-visible events after journal position `N`, at
//! most `L` (and at most 1,000: `more` says the page was full, ask again
//! from `last`), with the chain's
//! `accepted` and `retired` boundary ids, for a client that keeps its own
//! copy and projects the timeline locally (with the same `.wasm`:
//! `timeline(events, accepted, retired)`). Long poll: with `wait` (at most 25,000 ms) the answer
//! waits until something new is written or the time is up. What a member must
//! not see is taken out: a failed compaction's audit reason (its typed kind
//! and the generic notice stay); packets are not events and never sent.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use foldline_core::defaults::{FEED_PAGE_EVENTS, LONG_POLL_MS};
use foldline_core::event::Event;
use serde_json::json;
use tokio::time::Instant;

use super::access::{admitted, blocking, unauthorized, Caller, Params};
use super::reply::ApiError;
use super::state::App;
use super::wakes::Waiter;
use crate::journal::StoredEvent;

/// An event as a member may see it.
pub fn member_visible(mut s: StoredEvent) -> StoredEvent {
    if let Event::CompactionFailed(f) = &mut s.event {
        f.reason = String::new();
    }
    s
}

/// A whole number written in decimal digits only, at most 2^53 − 1, as the
/// edge handler reads one (a JavaScript number past it is no longer the one
/// asked for; no position or page is that large): `+5`, ` 5` or `5.0` are
/// not one, though Rust's integer parsing would take the first.
pub fn safe_whole(v: &str) -> Option<u64> {
    const SAFE: u64 = (1 << 53) - 1;
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    v.parse().ok().filter(|n| *n <= SAFE)
}

/// A whole-number query parameter, if given ([`safe_whole`]), so both
/// servers refuse the same.
pub fn number(q: &BTreeMap<String, String>, name: &str) -> Result<Option<u64>, ApiError> {
    q.get(name).map_or(Ok(None), |v| {
        safe_whole(v)
            .ok_or_else(|| {
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "invalid_input",
                    format!(
                        "{name} must be a whole number of decimal digits, at most 9007199254740991 (2^53 - 1)"
                    ),
                )
            })
            .map(Some)
    })
}

/// Wait for a write, at most until `deadline`: woken by this process's
/// writes to the conversation, by another process's once the server's
/// watch of the journal sees them (`watcher.rs`), and by the server
/// stopping. An idle wait reads nothing.
pub async fn nap(app: &App, written: &mut Waiter, deadline: Instant) {
    let woken = tokio::time::timeout_at(deadline, written.changed());
    tokio::select! {
        _ = woken => {}
        () = app.stopping.cancelled() => {}
    }
}

/// Whether a long poll answers now with what it has: its wait is up, or the
/// server is stopping (a page polls again, and meets the next server,
/// instead of holding a stop up for up to 25 seconds).
pub fn due(app: &App, deadline: Instant) -> bool {
    Instant::now() >= deadline || app.stopping.is_cancelled()
}

/// The route.
pub async fn events(
    State(app): State<Arc<App>>,
    Caller(member): Caller,
    Path(id): Path<String>,
    Params(q): Params,
) -> Result<Response, ApiError> {
    let after = number(&q, "after")?.unwrap_or(0);
    let limit =
        number(&q, "limit")?.map_or(FEED_PAGE_EVENTS, |l| l.clamp(1, FEED_PAGE_EVENTS)) as usize;
    let deadline = wait_deadline(&q)?;
    let (a, c, m) = (app.clone(), id.clone(), member.clone());
    blocking(move || admitted(&a, &c, &m)).await?;
    let mut written = waiter(&app, &id, &member, deadline)?;
    let mut waited = false;
    loop {
        let (a, c) = (app.clone(), id.clone());
        let found =
            blocking(move || Ok(a.driver.journal().read_events_page(&c, after, limit)?)).await?;
        if waited && !found.is_empty() {
            still_admitted(&app, &id, &member).await?;
        }
        if !found.is_empty() || due(&app, deadline) {
            let last = found.last().map_or(after, |s| s.seq);
            let more = found.len() == limit;
            let events: Vec<_> = found
                .into_iter()
                .map(member_visible)
                .map(|s| json!({"seq": s.seq, "event": s.event}))
                .collect();
            // The chain's verdict, for the local projection: which
            // boundaries draw as completed, which as retired.
            let (a, c) = (app.clone(), id.clone());
            let (accepted, retired) = blocking(move || match a.driver.resolve(&c) {
                Ok(r) => Ok((r.accepted, r.retired_boundaries)),
                Err(crate::error::HostError::Core(_)) => Ok((Vec::new(), Vec::new())),
                Err(e) => Err(e.into()),
            })
            .await?;
            return Ok(Json(json!({
                "events": events,
                "last": last,
                "more": more,
                "accepted": accepted,
                "retired": retired,
            }))
            .into_response());
        }
        nap(&app, &mut written, deadline).await;
        waited = true;
    }
}

/// A long poll that waited is admitted again before it answers what was
/// written meanwhile: a member the owner let out of the room while it
/// waited is refused (`not_owner`), and one no longer among the server's
/// members (`unauthorized`), never sent what came after.
pub async fn still_admitted(app: &Arc<App>, id: &str, member: &str) -> Result<(), ApiError> {
    if !app.is_member(member) {
        return Err(unauthorized());
    }
    let (a, c, m) = (app.clone(), id.to_owned(), member.to_owned());
    blocking(move || admitted(&a, &c, &m)).await
}

/// What a request waits on: a long poll (a deadline still to come) counts
/// against its member's [`WAITS_PER_MEMBER`](foldline_core::defaults::WAITS_PER_MEMBER).
pub fn waiter(app: &App, id: &str, member: &str, deadline: Instant) -> Result<Waiter, ApiError> {
    if deadline > Instant::now() {
        app.wakes.wait(id, member)
    } else {
        Ok(app.wakes.follow(id))
    }
}

/// When a long poll's `wait` (at most [`LONG_POLL_MS`]) is up.
pub fn wait_deadline(q: &BTreeMap<String, String>) -> Result<Instant, ApiError> {
    let wait = number(q, "wait")?.unwrap_or(0).min(LONG_POLL_MS);
    Ok(Instant::now() + Duration::from_millis(wait))
}

#[cfg(test)]
mod tests {
    use super::safe_whole;

    #[test]
    fn a_whole_number_is_decimal_digits_up_to_2_53_minus_1() {
        assert_eq!(safe_whole("0"), Some(0));
        assert_eq!(safe_whole("9007199254740991"), Some((1 << 53) - 1));
        for not in [
            "",
            "+5",
            "-5",
            " 5",
            "5.0",
            "1e3",
            "0x10",
            "9007199254740992",
            "99999999999999999999",
        ] {
            assert_eq!(safe_whole(not), None, "{not:?}");
        }
    }
}
