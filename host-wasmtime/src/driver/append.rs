//! Messages in: converted, checked as the servers check theirs, numbered
//! after the journal's last turn and written with a compare-and-append,
//! once per idempotency key (js/src/driver/append.ts is its twin).

use foldline_core::event::{Event, Message, TurnMeta};
use foldline_core::turn::Role;
use foldline_core::validate::ValidateRequest;
use foldline_core::Code;

use super::read::Cached;
use super::Driver;
use crate::error::{HostError, Result};
use crate::import::Incoming;
use crate::journal::Journal;
use crate::keys;
use crate::model::Model;
use crate::sync::lock;

/// What an append did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    /// Journal position of the batch's last event.
    pub seq: u64,
    /// Events in it.
    pub count: usize,
    /// A retry of an append already written under its idempotency key:
    /// nothing new was written, and this is the first answer again.
    pub replayed: bool,
}

impl<J: Journal, M: Model> Driver<J, M> {
    /// Append OpenAI-style messages (`messages`: one message object or an
    /// array, as the chat completions API takes them; tool calls and tool
    /// results included) to `conversation`, numbered after its last turn,
    /// and answer the last journal position. Each message is checked first
    /// as the servers check theirs: the shapes, the route, and that a
    /// compaction could take it under this driver's declaration
    /// (`turn_too_large` otherwise); nothing is written on a refusal. The
    /// append is compare-and-append at the position read, so a writer
    /// appending meanwhile only renumbers this batch. A batch that opens
    /// with a system or developer message the conversation holds as a
    /// turn of that role already (a prompt posted with each turn) writes
    /// the rest only (the prompt alone writes nothing). Then call
    /// [`Driver::on_message`].
    ///
    /// # Errors
    /// `invalid_input` naming the item at fault (or an empty batch), the
    /// append check's codes, `conflicting_turn`, storage failures.
    pub fn append(&self, conversation: &str, messages: &str) -> Result<u64> {
        self.append_as(conversation, Incoming::OpenAi, messages)
    }

    /// [`Driver::append`] of messages in the `incoming` shape: OpenAI chat
    /// messages, OpenAI Responses API items (a request's `input`, a
    /// response's `output` as it is; a reasoning item only with its
    /// encrypted content, less its id), Anthropic
    /// messages or AI SDK model messages (docs/formats.md).
    ///
    /// # Errors
    /// As [`Driver::append`].
    pub fn append_as(&self, conversation: &str, incoming: Incoming, messages: &str) -> Result<u64> {
        self.append_keyed(conversation, incoming, messages, None)
            .map(|a| a.seq)
    }

    /// [`Driver::append_as`] under an idempotency `key` (1 to 128 of
    /// `A-Z a-z 0-9 . _ : -`), as the JS driver's `append` takes one and
    /// the servers' `Idempotency-Key`: the key is written with the batch in
    /// the same atomic append (each message's turn id ends `@<key>`), so a
    /// retry — after a lost answer, a timeout, a restart, from another
    /// process on the same journal — writes nothing again and answers as
    /// the first time (`replayed`). Keys are recognized for the latest
    /// [`KEPT_KEYS`](crate::keys::KEPT_KEYS) keyed appends of a
    /// conversation, read back from the journal. A key is its sender's
    /// (each message's, as written): two members of a room may use the
    /// same key, each for their own messages ([`Driver::append_from`]).
    /// `None` appends as [`Driver::append_as`].
    ///
    /// # Errors
    /// As [`Driver::append`]; `invalid_input` for a key of another form,
    /// `idempotency_key_reused` when the key was written with other
    /// messages (nothing is written).
    pub fn append_keyed(
        &self,
        conversation: &str,
        incoming: Incoming,
        messages: &str,
        key: Option<&str>,
    ) -> Result<Appended> {
        self.append_from(conversation, "", incoming, messages, key)
    }

    /// [`Driver::append_keyed`] of a room member's batch: each message is
    /// written with `sender` as its `sender` (the JS driver's
    /// `append(id, messages, { sender })`; `foldline serve` writes the
    /// authenticated member), so once a conversation's turns come from
    /// more than one member its context names who said each
    /// (`[alice] …`, docs/formats.md). An empty `sender` writes none.
    ///
    /// # Errors
    /// As [`Driver::append_keyed`].
    pub fn append_from(
        &self,
        conversation: &str,
        sender: &str,
        incoming: Incoming,
        messages: &str,
        key: Option<&str>,
    ) -> Result<Appended> {
        if key.is_some_and(|k| !crate::ids::is_key(k)) {
            return Err(HostError::Input(
                "an idempotency key is 1 to 128 of A-Z a-z 0-9 . _ : -".into(),
            ));
        }
        let text = if messages.trim_start().starts_with('{') {
            format!("[{messages}]")
        } else {
            messages.to_owned()
        };
        let route = (self.route_of)(conversation);
        // Parsed once (a retry of the loop only numbers them again); the
        // content hashes do not depend on the numbering.
        let mut parsed = crate::import::parse_messages_as(&text, &route, 0, incoming)?;
        if parsed.is_empty() {
            return Err(HostError::Input("no messages to append".into()));
        }
        if !sender.is_empty() {
            for e in &mut parsed {
                if let Event::Message(m) = e {
                    m.sender = sender.to_owned();
                }
            }
        }
        self.count_tokens_of(&mut parsed);
        let keyed = key.map(|k| (k, keys::Batch::of(&parsed)));
        // A batch's prompt (a leading system or developer message) the
        // conversation holds as a turn of its role already is not written
        // again: a client posting it with each turn (as the JS driver's
        // `append` and both servers).
        let prompt = match parsed.first() {
            Some(Event::Message(m)) if matches!(m.role, Role::System | Role::Developer) => Some(m),
            _ => None,
        };
        loop {
            let (after, head, done, held) = self.read_for_append(conversation, &keyed, prompt)?;
            if let Some(done) = done {
                return Ok(Appended {
                    seq: done.seq,
                    count: done.hashes.len(),
                    replayed: true,
                });
            }
            let mut events = parsed[held..].to_vec();
            if events.is_empty() {
                // The prompt alone, held already: nothing new.
                return Ok(Appended {
                    seq: head,
                    count: 0,
                    replayed: false,
                });
            }
            crate::import::renumber(&mut events, &route, after);
            self.check_events(conversation, &events)?;
            if let Some((key, batch)) = &keyed {
                keys::stamp(&mut events, key, &batch.hashes[held..]);
            }
            match self.journal.append_at(conversation, &events, head, None) {
                Err(HostError::Conflict { .. }) => continue,
                Ok(seq) => {
                    self.wrote(conversation, seq);
                    return Ok(Appended {
                        seq,
                        count: events.len(),
                        replayed: false,
                    });
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// What an append reads together: the numbering, the position, what
    /// was written under the batch's key (with or without its `prompt`),
    /// and whether the conversation holds the prompt as a turn of its role
    /// already (1: it is not written again).
    fn read_for_append(
        &self,
        conversation: &str,
        keyed: &Option<(&str, keys::Batch)>,
        prompt: Option<&foldline_core::event::Message>,
    ) -> Result<(u64, u64, Option<keys::Keyed>, usize)> {
        let mut cache = lock(&self.cache);
        let c = self.kept(&mut cache, conversation);
        self.load_into(c, conversation, true)?;
        let done = match keyed {
            Some((key, batch)) => match self.written_under(c, conversation, key, batch) {
                Err(_) if prompt.is_some() => {
                    self.written_under(c, conversation, key, &batch.without_prompt())?
                }
                found => found?,
            },
            None => None,
        };
        let held = prompt.is_some_and(|p| holds(&pinned_of(&c.recent), p));
        Ok((c.source_seq, c.seq, done, usize::from(held)))
    }

    /// What an append of `batch` under `key` wrote before, as `c` has
    /// read the journal (each sender's messages under the sender's key). The first keyed append of a
    /// conversation reads its keys from the journal's start to the
    /// position `c` has read.
    fn written_under(
        &self,
        c: &mut Cached,
        conversation: &str,
        key: &str,
        batch: &keys::Batch,
    ) -> Result<Option<keys::Keyed>> {
        if c.keys.is_none() {
            let mut read = keys::Keys::default();
            for s in self.journal.read_events(conversation, 0)? {
                if s.seq <= c.seq {
                    read.read(s.seq, &s.event);
                }
            }
            c.keys = Some(read);
        }
        let known = c.keys.as_ref().map(|k| k.written(key, batch));
        Ok(known.transpose()?.flatten())
    }

    /// The check [`Driver::append`] makes of a batch before writing it,
    /// as the servers make it: the events' route, each message's source
    /// sequence and content hash, and that a compaction could take each
    /// message under this driver's declaration (`turn_too_large`), and that
    /// a batch's pinned turns leave the conversation's pinned turns (those
    /// this driver reads from the journal, another writer's included) a
    /// context room (`pinned_too_large`). A host
    /// that writes events to the journal itself (the program's `import`)
    /// checks them first, so nothing it writes leaves the conversation
    /// unable to compact or select.
    ///
    /// # Errors
    /// The append check's codes (`turn_too_large`, `pinned_too_large`, `wrong_route`,
    /// `invalid_request`, `invalid_declaration`), naming the event.
    ///
    /// A batch of any size is checked in calls of at most
    /// [`CHECK_CALL_BYTES`] of events each (the check is one event at a
    /// time, so the answer is the same), so an import of a 264 MB export
    /// stays inside a call's memory limit; a refusal names the event by its
    /// index in the whole batch.
    pub fn check_events(&self, conversation: &str, events: &[Event]) -> Result<()> {
        // A batch with a pinned turn is checked beside the conversation's
        // pinned turns (never folded, they must leave a context room); the
        // batch's own join them as its parts are checked. A correction is
        // checked as the turn it makes (`corrected.rs`).
        let amending = events.iter().any(super::corrected::amends);
        let (checked, mut pinned) = if amending {
            let corrected = super::corrected::targets(events);
            let held = self.held_turns(conversation, |e| {
                e.is_pinned()
                    || matches!(e, Event::Correction(_))
                    || e.turn_id().is_some_and(|id| corrected.contains(id))
            })?;
            super::corrected::checked(&held, events)
        } else if events.iter().any(Event::is_pinned) {
            (Vec::new(), self.pinned_turns(conversation)?)
        } else {
            (Vec::new(), Vec::new())
        };
        let parts = match amending {
            true => &checked[..],
            false => events,
        };
        // While members may opt in to compression, every context carries
        // their fragments beside the pinned turns and the plan keeps them
        // room: admitted pinned turns leave it too, or no compaction could
        // ever fit beside them.
        let room = self.compression.surface && (amending || events.iter().any(Event::is_pinned));
        if room {
            pinned.push(self.fragments_turn(conversation));
        }
        self.check_parts(conversation, parts, &mut pinned)
            .map_err(|e| match e {
                HostError::Core(mut err) if room && err.code == Code::PinnedTooLarge => {
                    err.message.push_str(
                        " (counted with the room members' compression fragments take beside them)",
                    );
                    HostError::Core(err)
                }
                e => e,
            })?;
        self.check_newest(conversation, events)?;
        match events.iter().any(super::corrected::chains) {
            true => self.check_chain(conversation, events),
            false => Ok(()),
        }
    }

    /// The room the members' compression fragments take beside the pinned
    /// turns ([`foldline_core::member::seams::fragments_room`]), as a pinned
    /// turn's metadata the append check counts with them.
    pub(super) fn fragments_turn(&self, conversation: &str) -> Event {
        let room = foldline_core::member::seams::fragments_room(self.compression);
        let route = (self.route_of)(conversation);
        let holder = Message::new(
            &route.conversation,
            0,
            "member-fragments",
            Role::System,
            Vec::new(),
        );
        let mut turn = TurnMeta::of(&holder);
        turn.chat = route.chat;
        turn.chars = room.chars;
        turn.tokens = Some(room.tokens);
        Event::TurnMeta(turn)
    }

    /// The core's append check over `events`, in calls of at most
    /// [`CHECK_CALL_BYTES`], beside the conversation's `pinned` turns.
    fn check_parts(
        &self,
        conversation: &str,
        events: &[Event],
        pinned: &mut Vec<Event>,
    ) -> Result<()> {
        let mut start = 0;
        while start < events.len() {
            let (mut end, mut bytes) = (start, 0);
            while end < events.len() && (end == start || bytes < CHECK_CALL_BYTES) {
                bytes += serde_json::to_vec(&events[end]).map_or(0, |b| b.len());
                end += 1;
            }
            self.validate(ValidateRequest::Events(Box::new(
                foldline_core::validate::EventsCheck {
                    route: (self.route_of)(conversation),
                    events: events[start..end].to_vec(),
                    declaration: Some(self.declaration.clone()),
                    pinned: pinned.clone(),
                },
            )))
            .map_err(|e| match e {
                HostError::Core(mut err) => {
                    err.message = shifted(&err.message, start);
                    HostError::Core(err)
                }
                other => other,
            })?;
            pinned.extend(events[start..end].iter().filter(|e| e.is_pinned()).cloned());
            start = end;
        }
        Ok(())
    }

    /// Whether the conversation already holds a turn of `turn`'s role and
    /// content (a request's prompt posted again with each turn is written
    /// once: `foldline serve`'s Anthropic request shape and batches that
    /// open with a system or developer message, as the JS driver's
    /// `append`).
    ///
    /// # Errors
    /// Storage failures.
    pub fn holds_system_turn(&self, conversation: &str, turn: &Event) -> Result<bool> {
        let Event::Message(new) = turn else {
            return Ok(false);
        };
        Ok(holds(&self.pinned_turns(conversation)?, new))
    }

    /// The conversation's pinned turns, as this driver has read the journal
    /// (the events it keeps for plan and select hold every one), as their
    /// corrections make them.
    fn pinned_turns(&self, conversation: &str) -> Result<Vec<Event>> {
        Ok(pinned_of(&self.held_turns(conversation, pinning)?))
    }

    /// Those of the events this driver keeps of the conversation for plan
    /// and select (its pinned turns, the turns no summary covers, their
    /// corrections) that `wanted` takes.
    fn held_turns(
        &self,
        conversation: &str,
        wanted: impl Fn(&Event) -> bool,
    ) -> Result<Vec<Event>> {
        let mut cache = lock(&self.cache);
        let c = self.kept(&mut cache, conversation);
        self.load_into(c, conversation, true)?;
        Ok(c.recent.iter().filter(|e| wanted(e)).cloned().collect())
    }
}

/// The pinned turns among `recent` (the events a driver keeps of a
/// conversation), as their corrections make them.
pub(super) fn pinned_of(recent: &[Event]) -> Vec<Event> {
    let held: Vec<Event> = recent.iter().filter(|e| pinning(e)).cloned().collect();
    super::corrected::checked(&held, &[]).1
}

/// What the pinned turns are read from: the pinned turns and corrections.
fn pinning(e: &Event) -> bool {
    e.is_pinned() || matches!(e, Event::Correction(_))
}

/// Whether `pinned` holds a turn of `turn`'s role and content (a prompt
/// posted again with each turn is written once).
fn holds(pinned: &[Event], turn: &Message) -> bool {
    pinned.iter().any(|e| {
        matches!(e, Event::Message(m) | Event::LateDelivery(m)
            if m.role == turn.role && m.parts == turn.parts)
    })
}

/// Events of a batch checked in one call of the core: a 264 MB import in
/// one call needed more than the 512 MiB a call may use by default
/// (`memory_limit`).
pub const CHECK_CALL_BYTES: usize = 8 << 20;

/// `message` with each `events[i]` it names moved `offset` on: the index in
/// the whole batch of an event checked in a part of it.
fn shifted(message: &str, offset: usize) -> String {
    const AT: &str = "events[";
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(i) = rest.find(AT) {
        let (before, after) = rest.split_at(i + AT.len());
        out.push_str(before);
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        match after[..digits].parse::<usize>() {
            Ok(n) if after[digits..].starts_with(']') => out.push_str(&(n + offset).to_string()),
            _ => out.push_str(&after[..digits]),
        }
        rest = &after[digits..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    /// Every `events[i]` of a refusal names the event in the whole batch;
    /// nothing else of the message changes.
    #[test]
    fn a_refusal_names_the_event_in_the_whole_batch() {
        assert_eq!(
            super::shifted(
                "events[3].role: unknown; events[0] and events[] stay events[x]",
                40
            ),
            "events[43].role: unknown; events[40] and events[] stay events[x]"
        );
        assert_eq!(super::shifted("no event named", 7), "no event named");
    }
}
