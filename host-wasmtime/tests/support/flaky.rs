//! A model around another one that its provider refuses every 5th call and
//! whose stream drops before any content every 7th (replayed buffered): the
//! journeys' model, in the Rust test and in the program the JS journey
//! compares with.

use std::sync::atomic::{AtomicUsize, Ordering};

use foldline_core::packet::Packet;
use foldline_core::stream::FailureKind;
use foldline_wasmtime::model::{Model, ModelError, ModelResult, StreamChunk};

/// `inner`, failing now and then.
pub struct Flaky<M> {
    calls: AtomicUsize,
    inner: M,
}

impl<M> Flaky<M> {
    /// Wrap `inner`; the count starts at zero.
    pub fn new(inner: M) -> Self {
        Flaky {
            calls: AtomicUsize::new(0),
            inner,
        }
    }
}

impl<M: Model> Model for Flaky<M> {
    fn stream(&self, p: &Packet, sink: &mut dyn FnMut(StreamChunk)) -> Result<(), ModelError> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        if n.is_multiple_of(5) {
            return Err(ModelError::new(
                FailureKind::ProviderRefusal,
                "refused by the provider",
            ));
        }
        if n.is_multiple_of(7) {
            return Err(ModelError::from("connection reset"));
        }
        self.inner.stream(p, sink)
    }

    fn complete(&self, p: &Packet) -> Result<ModelResult, ModelError> {
        self.inner.complete(p)
    }
}
