//! Idempotency keys, read back from the journal: a keyed append writes its
//! key into each of its messages' turn ids (`…@<key>`) in the same atomic
//! append, so a retry — after a lost answer, a timeout, a restart, from
//! another process — finds it and writes nothing again. The driver's keyed
//! appends ([`crate::driver::Driver::append_keyed`]) and the server's keep
//! them alike, as the JS driver does.

use std::collections::{BTreeMap, VecDeque};

use foldline_core::event::Event;

use crate::error::{HostError, Result};

/// How many keyed appends per conversation a retry is recognized for.
pub const KEPT_KEYS: usize = 4_096;

/// What one keyed append wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keyed {
    /// Journal position of its last event.
    pub seq: u64,
    /// Its messages' content hashes, in order.
    pub hashes: Vec<String>,
}

/// The keys of a conversation's latest [`KEPT_KEYS`] keyed appends.
#[derive(Debug, Default)]
pub(crate) struct Keys {
    keys: BTreeMap<String, Keyed>,
    /// The keys, oldest first.
    order: VecDeque<String>,
}

impl Keys {
    /// Take in one stored event: a keyed message's key, hash and position.
    pub(crate) fn read(&mut self, seq: u64, event: &Event) {
        let (Event::Message(m) | Event::LateDelivery(m)) = event else {
            return;
        };
        let Some((_, key)) = m.turn_id.rsplit_once('@') else {
            return;
        };
        let hash = m.content_hash.clone().unwrap_or_default();
        if let Some(k) = self.keys.get_mut(key) {
            k.seq = seq;
            k.hashes.push(hash);
            return;
        }
        self.keys.insert(
            key.to_owned(),
            Keyed {
                seq,
                hashes: vec![hash],
            },
        );
        self.order.push_back(key.to_owned());
        if self.order.len() > KEPT_KEYS {
            if let Some(old) = self.order.pop_front() {
                self.keys.remove(&old);
            }
        }
    }

    /// What an append under `key` of messages with `hashes` wrote before,
    /// if it did.
    ///
    /// # Errors
    /// `idempotency_key_reused`: the key was written with other messages.
    pub(crate) fn written(&self, key: &str, hashes: &[String]) -> Result<Option<&Keyed>> {
        match self.keys.get(key) {
            Some(done) if done.hashes != hashes => Err(HostError::IdempotencyKeyReused),
            done => Ok(done),
        }
    }
}

/// Write `key` into `events`' messages (each turn id ends `@<key>`) with
/// their content hashes, `hashes` in order: what a retry is compared
/// against.
pub(crate) fn stamp(events: &mut [Event], key: &str, hashes: &[String]) {
    let messages = events.iter_mut().filter_map(|e| match e {
        Event::Message(m) => Some(m),
        _ => None,
    });
    for (m, hash) in messages.zip(hashes) {
        m.turn_id = format!("{}@{key}", m.turn_id);
        m.content_hash = Some(hash.clone());
    }
}

/// The content hashes of `events`' messages, in order.
pub(crate) fn hashes(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Message(m) => Some(foldline_core::turn::content_hash(&m.parts)),
            _ => None,
        })
        .collect()
}
