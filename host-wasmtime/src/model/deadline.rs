//! A deadline for any model, custom Rust models included: the call runs on
//! a thread of its own, and past the deadline the driver gets a `timeout`
//! at once — the run ends as a failed compaction (the member sees the
//! generic notice) and the writer lease is given back — while the late
//! call, which Rust cannot interrupt, finishes on its own and its answer is
//! dropped.

use std::sync::mpsc::{channel, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use foldline_core::packet::Packet;
use foldline_core::stream::FailureKind;

use super::{Model, ModelError, ModelResult, StreamChunk};

/// A model whose every call answers within a deadline; see [`with_deadline`].
pub struct Deadline<M> {
    inner: Arc<M>,
    after: Duration,
}

/// `model`, every call of which answers within `after`: a stream's chunks
/// pass through as they come, and a call still running at the deadline
/// answers `timeout` (`FailureKind::Timeout`). A model that panics answers
/// `other` instead of unwinding into the driver.
///
/// ```no_run
/// # use foldline_wasmtime::model::{model_fn, with_deadline, ModelError};
/// # use foldline_core::packet::Packet;
/// let model = with_deadline(
///     model_fn(|p: &Packet| -> Result<String, ModelError> { Ok(format!("{} turns", p.input.turn_count)) }),
///     std::time::Duration::from_secs(60),
/// );
/// ```
pub fn with_deadline<M: Model + Send + Sync + 'static>(model: M, after: Duration) -> Deadline<M> {
    Deadline {
        inner: Arc::new(model),
        after,
    }
}

/// What the model's thread sends back.
enum Sent {
    Chunk(StreamChunk),
    Streamed(Result<(), ModelError>),
    Completed(Result<ModelResult, ModelError>),
}

impl<M: Model + Send + Sync + 'static> Deadline<M> {
    /// Run `call` on a thread; answer what it sends until the deadline.
    fn run(
        &self,
        packet: &Packet,
        call: impl FnOnce(&M, &Packet, &dyn Fn(Sent)) + Send + 'static,
        mut take: impl FnMut(Sent) -> Option<Result<Option<ModelResult>, ModelError>>,
    ) -> Result<Option<ModelResult>, ModelError> {
        let (tx, rx) = channel();
        let inner = self.inner.clone();
        let packet = packet.clone();
        std::thread::Builder::new()
            .name("foldline-model".into())
            .spawn(move || call(&inner, &packet, &|s| drop(tx.send(s))))
            .map_err(|e| ModelError::from(format!("could not start the model's thread: {e}")))?;
        let end = Instant::now() + self.after;
        loop {
            match rx.recv_timeout(end.saturating_duration_since(Instant::now())) {
                Ok(sent) => {
                    if let Some(answer) = take(sent) {
                        return answer;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    return Err(ModelError::new(
                        FailureKind::Timeout,
                        format!(
                            "the model did not answer within {} ms",
                            self.after.as_millis()
                        ),
                    ))
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(ModelError::from(
                        "the model's call ended without an answer (it panicked)",
                    ))
                }
            }
        }
    }
}

impl<M: Model + Send + Sync + 'static> Model for Deadline<M> {
    fn stream(&self, packet: &Packet, sink: &mut dyn FnMut(StreamChunk)) -> Result<(), ModelError> {
        self.run(
            packet,
            |m, p, send| {
                let r = m.stream(p, &mut |c| send(Sent::Chunk(c)));
                send(Sent::Streamed(r));
            },
            |sent| match sent {
                Sent::Chunk(c) => {
                    sink(c);
                    None
                }
                Sent::Streamed(r) => Some(r.map(|()| None)),
                Sent::Completed(r) => Some(r.map(Some)),
            },
        )
        .map(|_| ())
    }

    fn complete(&self, packet: &Packet) -> Result<ModelResult, ModelError> {
        let answer = self.run(
            packet,
            |m, p, send| send(Sent::Completed(m.complete(p))),
            |sent| match sent {
                Sent::Completed(r) => Some(r.map(Some)),
                Sent::Streamed(r) => Some(r.map(|()| None)),
                Sent::Chunk(_) => None,
            },
        )?;
        answer.ok_or_else(|| ModelError::from("the model answered no result"))
    }
}
