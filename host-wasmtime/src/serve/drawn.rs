//! The timeline answers `GET …/timeline` drew last, one per conversation and
//! page, with their tags: the pages following one conversation (a room's
//! members, a member's tabs) all wake on a write, and take one drawing of
//! it instead of one each — the first draws while the others wait on its
//! slot, then answer from it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use foldline_core::defaults::TIMELINE_SLOTS;

use crate::driver::Page;
use crate::sync::lock;

/// One answer as drawn: its tag and its JSON.
pub struct Answer {
    /// The `ETag` it was sent with.
    pub tag: String,
    /// The timeline as JSON.
    pub body: Bytes,
}

/// A page's slot: held while its answer is drawn.
pub type Slot = Arc<tokio::sync::Mutex<Option<Answer>>>;

/// The slots, by conversation and page.
#[derive(Default)]
pub struct Drawn {
    slots: Mutex<BTreeMap<(String, Page), Slot>>,
}

impl Drawn {
    /// The slot of `conversation`'s `page`.
    pub fn slot(&self, conversation: &str, page: Page) -> Slot {
        let mut slots = lock(&self.slots);
        if slots.len() as u64 >= TIMELINE_SLOTS {
            slots.retain(|_, s| Arc::strong_count(s) > 1);
        }
        slots
            .entry((conversation.to_owned(), page))
            .or_default()
            .clone()
    }
}
