//! Manual compaction as a durable task (`POST …/condense`) and its event
//! stream (`GET …/tasks/{task}/events`). The stream carries only events the
//! journal holds (`requested`, then `completed` or `failed`), each with its
//! journal position as the SSE id, so a reload resumes with `Last-Event-ID`
//! and sees exactly what it missed.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event as Sse, KeepAlive};
use axum::response::{IntoResponse, Response};
use axum::Json;
use foldline_core::defaults::FEED_PAGE_EVENTS;
use foldline_core::event::{Event, TaskState};
use foldline_core::stream::MEMBER_NOTICE;
use serde_json::json;

use super::access::{admitted, blocking, owned, Caller};
use super::feed::safe_whole;
use super::reply::ApiError;
use super::state::App;
use crate::driver::{ManualTask, Outcome};
use crate::error::HostError;
use crate::journal::Journal;
use crate::sync::lock;

type Started = Result<u64, ApiError>;

fn busy() -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        "busy",
        "another writer is compacting this conversation; ask again in a moment",
    )
}

/// `POST …/condense`: answers `202` with the task pointer once the task's
/// `requested` event is durable; the work goes on after the answer.
pub async fn condense(
    State(app): State<Arc<App>>,
    Caller(member): Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let (a, conv, who) = (app.clone(), id.clone(), member.clone());
    let task_id = blocking(move || admit_task(&a, &conv, &who)).await?;
    let (tx, rx) = tokio::sync::oneshot::channel::<Started>();
    let (a, conv, task) = (app.clone(), id.clone(), task_id.clone());
    app.tracker
        .spawn_blocking(move || run_task(&a, &conv, &task, member, tx));
    match rx.await {
        Ok(Ok(seq)) => Ok((
            StatusCode::ACCEPTED,
            Json(json!({
                "task": task_id,
                "conversation": id,
                "requestedSeq": seq,
                "events": format!("/api/conversations/{id}/tasks/{task_id}/events"),
            })),
        )
            .into_response()),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "the task ended without an answer; the details are in the server's log",
        )),
    }
}

/// Who may start a task, and when: the owner, while the server runs, with
/// no answer holding the session, within the member's rate. The new task's
/// id, its pointer stored.
fn admit_task(a: &App, conv: &str, who: &str) -> Result<String, ApiError> {
    owned(a, conv, who)?;
    if a.stopping.is_cancelled() {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "shutting_down",
            "the server is stopping",
        ));
    }
    if a.answering(conv)? {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "session_busy",
            "an answer owns the session; compact after it ends",
        ));
    }
    a.take_condense(who)?;
    let task = a.next_id("task");
    a.store.add_task(conv, &task, who)?;
    Ok(task)
}

/// The task's run, on a blocking thread: `started` hears the `requested`
/// event's position once it is durable (the request's answer), or why the
/// task was refused; the run goes on after it.
fn run_task(
    a: &App,
    conv: &str,
    task: &str,
    member: String,
    started: tokio::sync::oneshot::Sender<Started>,
) {
    let slot = Mutex::new(Some(started));
    let send = |r: Started| {
        if let Some(tx) = lock(&slot).take() {
            let _ = tx.send(r);
        }
    };
    let t = ManualTask {
        id: task.to_owned(),
        actor: member.clone(),
        owner: Some(member),
        session_busy: false,
    };
    let mut accepted = |seq: u64| {
        let _ = a.store.set_task(conv, task, "accepted", Some(seq));
        a.wrote(conv);
        send(Ok(seq));
    };
    // An automatic check of this conversation may be running on this
    // server (one starts after every append): wait for it, briefly.
    let mut outcome = a.driver.compact_task(conv, &t, &mut accepted);
    for _ in 0..100 {
        if !matches!(outcome, Ok(Outcome::Busy)) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
        outcome = a.driver.compact_task(conv, &t, &mut accepted);
    }
    let refused = |e: ApiError| {
        let _ = a.store.set_task(conv, task, "refused", None);
        send(Err(e));
    };
    match outcome {
        Ok(Outcome::Compacted(_)) | Ok(Outcome::Failed(_)) => {
            let _ = a.store.set_task(conv, task, "done", None);
            a.wrote(conv);
        }
        Ok(Outcome::Refused(e)) => refused(HostError::Core(e).into()),
        Ok(Outcome::Busy) => refused(busy()),
        Ok(other) => refused(ApiError::new(
            StatusCode::CONFLICT,
            "nothing_to_fold",
            format!("no compaction was due ({other})"),
        )),
        Err(e) => {
            // A host failure after `requested` leaves the task open: end
            // it with its durable `failed` event now.
            eprintln!("foldline serve: task {task} of {conv}: {e}");
            if matches!(a.driver.end_interrupted(conv), Ok(true)) {
                let _ = a.store.set_task(conv, task, "done", None);
            }
            a.wrote(conv);
            refused(e.into());
        }
    }
}

/// `GET …/tasks/{task}/events`: the task's durable events as Server-Sent
/// Events, from after `Last-Event-ID` (a journal position) when given; the
/// stream ends after the terminal event.
pub async fn events(
    State(app): State<Arc<App>>,
    Caller(member): Caller,
    Path((id, task)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let a = app.clone();
    let (conv, t) = (id.clone(), task.clone());
    let pointer = blocking(move || {
        // Every member of the room follows the task (its end is on
        // everyone's timeline alike).
        admitted(&a, &conv, &member)?;
        match a.store.task(&conv, &t)? {
            Some(p) if p.requested_seq > 0 => Ok(p),
            _ => Err(ApiError::new(
                StatusCode::NOT_FOUND,
                "not_found",
                format!("no task {t:?} in this conversation"),
            )),
        }
    })
    .await?;
    // An id this server did not send (not a position) is no position: the
    // stream starts from the task's first event, as the edge handler's.
    let last = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| safe_whole(v.trim()))
        .unwrap_or(0);
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Sse>(16);
    tokio::spawn(produce(
        app,
        id,
        task,
        (pointer.requested_seq - 1, last),
        tx,
    ));
    let stream = futures_util::stream::poll_fn(move |cx| {
        rx.poll_recv(cx).map(|e| e.map(Ok::<_, Infallible>))
    });
    Ok(axum::response::sse::Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response())
}

/// Feed a task's events into `tx` until its terminal event, the client
/// leaves, or the server stops and no task of its own is still running.
async fn produce(
    app: Arc<App>,
    conv: String,
    task: String,
    (mut since, sent): (u64, u64),
    tx: tokio::sync::mpsc::Sender<Sse>,
) {
    let mut written = app.wakes.follow(&conv);
    loop {
        let (a, c) = (app.clone(), conv.clone());
        // A page at a time: a task followed long after it ended reads up to
        // its terminal event, not all that was written since.
        let read = tokio::task::spawn_blocking(move || {
            a.driver
                .journal()
                .read_events_page(&c, since, FEED_PAGE_EVENTS as usize)
        })
        .await;
        let events = match read {
            Ok(Ok(e)) => e,
            Ok(Err(e)) => {
                eprintln!("foldline serve: task events of {conv}: {e}");
                return;
            }
            Err(_) => return,
        };
        let full = events.len() >= FEED_PAGE_EVENTS as usize;
        for s in events {
            since = s.seq;
            let Event::CompactionTask(t) = s.event else {
                continue;
            };
            if t.task_id != task {
                continue;
            }
            let (name, data) = match t.state {
                TaskState::Requested => (
                    "requested",
                    json!({"task": task, "state": "requested", "headSeq": t.head_seq}),
                ),
                TaskState::Completed => (
                    "completed",
                    json!({"task": task, "state": "completed", "boundaryId": t.boundary_id}),
                ),
                TaskState::Failed => (
                    "failed",
                    json!({"task": task, "state": "failed", "notice": MEMBER_NOTICE}),
                ),
            };
            // Events the client has (up to `Last-Event-ID`) are not sent
            // again, but a terminal one among them still ends the stream.
            if s.seq > sent {
                let ev = Sse::default()
                    .id(s.seq.to_string())
                    .event(name)
                    .data(data.to_string());
                if tx.send(ev).await.is_err() {
                    return;
                }
            }
            if t.state != TaskState::Requested {
                return;
            }
        }
        if full {
            continue; // more written already: read on
        }
        if app.stopping.is_cancelled() && app.tracker.is_empty() {
            // Stopping, and nothing of this server's is still running: what
            // the journal holds was sent; a reconnect to the restarted
            // server resumes from the last id.
            return;
        }
        tokio::select! {
            () = written.changed() => {},
            _ = tokio::time::sleep(app.config.poll) => {},
            _ = tx.closed() => return,
        }
    }
}
