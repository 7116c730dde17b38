//! Idempotency keys, read back from the journal: a keyed append writes its
//! key into each of its messages' turn ids (`…@<key>`) in the same atomic
//! append, so a retry — after a lost answer, a timeout, a restart, from
//! another process — finds it and writes nothing again. The driver's keyed
//! appends ([`crate::driver::Driver::append_keyed`]) and the server's keep
//! them alike, as the JS driver does.
//!
//! A key is its sender's: in a room two members' clients may pick the same
//! key (a counter per tab), and one member's key never answers, or refuses,
//! another's message. Keys are kept per sender and key, each message's
//! sender as the journal holds it (the member a server writes, a user
//! message's `name` without one, empty for none), and a batch is compared
//! sender by sender.

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

/// A key as it is kept: a sender's, then the key.
type Scoped = (String, String);

/// A keyed batch's messages as a retry is compared: each one's sender and
/// content hash, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Batch {
    senders: Vec<String>,
    /// The messages' content hashes, in order.
    pub(crate) hashes: Vec<String>,
}

impl Batch {
    /// The messages of `events`.
    pub(crate) fn of(events: &[Event]) -> Batch {
        let messages = events.iter().filter_map(|e| match e {
            Event::Message(m) => Some(m),
            _ => None,
        });
        let (senders, hashes) = messages
            .map(|m| {
                let hash = foldline_core::turn::content_hash(&m.parts);
                (m.sender.clone(), hash)
            })
            .unzip();
        Batch { senders, hashes }
    }

    /// The batch without its first message (a request's prompt the
    /// conversation held already, so not written).
    pub(crate) fn without_prompt(&self) -> Batch {
        Batch {
            senders: self.senders.iter().skip(1).cloned().collect(),
            hashes: self.hashes.iter().skip(1).cloned().collect(),
        }
    }
}

/// The keys of a conversation's latest [`KEPT_KEYS`] keyed appends.
#[derive(Debug, Default)]
pub(crate) struct Keys {
    keys: BTreeMap<Scoped, Keyed>,
    /// The keys, oldest first.
    order: VecDeque<Scoped>,
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
        let scoped = (m.sender.clone(), key.to_owned());
        if let Some(k) = self.keys.get_mut(&scoped) {
            k.seq = seq;
            k.hashes.push(hash);
            return;
        }
        self.keys.insert(
            scoped.clone(),
            Keyed {
                seq,
                hashes: vec![hash],
            },
        );
        self.order.push_back(scoped);
        if self.order.len() > KEPT_KEYS {
            if let Some(old) = self.order.pop_front() {
                self.keys.remove(&old);
            }
        }
    }

    /// What an append of `batch` under `key` wrote before, if it did:
    /// each sender's messages of the batch are what that sender wrote
    /// under the key.
    ///
    /// # Errors
    /// `idempotency_key_reused`: a sender of the batch wrote the key with
    /// other messages, or only some of its senders wrote it.
    pub(crate) fn written(&self, key: &str, batch: &Batch) -> Result<Option<Keyed>> {
        let mut by_sender: BTreeMap<&str, Vec<&String>> = BTreeMap::new();
        for (sender, hash) in batch.senders.iter().zip(&batch.hashes) {
            by_sender.entry(sender).or_default().push(hash);
        }
        let mut found = Vec::new();
        for (sender, hashes) in &by_sender {
            match self.keys.get(&((*sender).to_owned(), key.to_owned())) {
                Some(done) if done.hashes.iter().eq(hashes.iter().copied()) => found.push(done.seq),
                Some(_) => return Err(HostError::IdempotencyKeyReused),
                None => {}
            }
        }
        match found.iter().max() {
            None => Ok(None),
            Some(&seq) if found.len() == by_sender.len() => Ok(Some(Keyed {
                seq,
                hashes: batch.hashes.clone(),
            })),
            Some(_) => Err(HostError::IdempotencyKeyReused),
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
