//! The newest turn's room, at the door: a member's message or a tool's
//! result is sent to the model at once, whole, beside the pinned turns and
//! the summary, so one past the room a context leaves it would make every
//! `select` fail `tail_turn_too_large` until a later message let a
//! compaction fold it — the question never sent. The append check holds a
//! batch's last turn to that room (the assistant's excepted: no call waits
//! on an answer, and the next message folds it), measured by the core's
//! own `select` over the turns' metadata beside the least summary a
//! compaction writes. js/src/driver/newest.ts is its twin.

use foldline_core::boundary::ChainHead;
use foldline_core::budget::{MIN_TAIL_CHARS, MIN_TAIL_TOKENS, SUMMARY_MIN_CHARS};
use foldline_core::event::{Event, TurnMeta};
use foldline_core::turn::Role;
use foldline_core::Code;

use super::Driver;
use crate::error::{HostError, Result};
use crate::journal::Journal;
use crate::model::Model;
use crate::sync::lock;

impl<J: Journal, M: Model> Driver<J, M> {
    /// Refuse (`turn_too_large`) a batch whose last turn, unless the
    /// assistant's or pinned, a context could not hold whole beside the
    /// conversation's pinned turns (as this driver has read them, with the
    /// batch's and, while the members' surface exists, their fragments'
    /// room) and the least summary. Part of [`Driver::check_events`]; a
    /// host that checked a batch's turns itself (`foldline serve`) calls
    /// it alone. A tool cycle is held to what one compaction can take, and
    /// an open one (the batch's last turn answers it) to that room too
    /// (`cycles.rs`).
    ///
    /// # Errors
    /// `turn_too_large` naming the turn; storage failures.
    pub fn check_newest(&self, conversation: &str, events: &[Event]) -> Result<()> {
        self.check_newest_turn(conversation, events)?;
        self.check_cycles(conversation, events)
    }

    /// The newest turn's room ([`Driver::check_newest`] less the cycles).
    fn check_newest_turn(&self, conversation: &str, events: &[Event]) -> Result<()> {
        let edited;
        let newest = match events.last() {
            Some(Event::Message(m)) => m,
            // An edit of the conversation's newest turn: the turn it makes.
            Some(Event::Correction(fix)) => match self.edited_newest(conversation, fix)? {
                Some(m) => {
                    edited = m;
                    &edited
                }
                None => return Ok(()),
            },
            _ => return Ok(()),
        };
        if newest.role == Role::Assistant {
            return Ok(());
        }
        // Admitted pinned turns leave an ordinary turn room beside the
        // least summary (`admissible_pinned`): half of one, with a room's
        // label, fits without asking (the check's cost is for long turns).
        let chars = foldline_core::turn::parts_chars(&newest.parts);
        let small =
            chars <= MIN_TAIL_CHARS / 2 && newest.tokens.unwrap_or(0) <= MIN_TAIL_TOKENS / 2;
        if small && !events.iter().any(Event::is_pinned) {
            return Ok(());
        }
        let last = Event::Message(newest.clone());
        if last.is_pinned() {
            return Ok(());
        }
        let held = {
            let mut cache = lock(&self.cache);
            let c = self.kept(&mut cache, conversation);
            self.load_into(c, conversation, false)?;
            super::append::pinned_of(&c.recent)
        };
        let batch = events.iter().filter(|e| e.is_pinned()).cloned();
        let held: Vec<Event> = held.into_iter().chain(batch).collect();
        let at = events.len() - 1;
        let what = || {
            format!("events[{at}] is larger than a context holds as its newest turn beside the pinned turns and a summary")
        };
        self.fits_newest(conversation, held, vec![last], what, &newest.turn_id)
    }

    /// Refuse (`turn_too_large`, naming `turn`, `what` saying why) when the
    /// `newest` turns a context could not hold whole beside `held` (the
    /// pinned turns), the fragments' room and the least summary.
    pub(super) fn fits_newest(
        &self,
        conversation: &str,
        held: Vec<Event>,
        newest: Vec<Event>,
        what: impl FnOnce() -> String,
        turn: &str,
    ) -> Result<()> {
        let mut metas: Vec<Event> = held.into_iter().filter_map(meta).collect();
        if self.compression.surface {
            metas.push(self.fragments_turn(conversation));
        }
        metas.extend(newest.into_iter().filter_map(meta));
        let request = foldline_core::SelectRequest {
            declaration: self.declaration.clone(),
            route: (self.route_of)(conversation),
            frontier: None,
            head: Some(least_summary()),
            amendment: None,
            events: metas,
            prompt: None,
            prompt_sender: None,
            format: Default::default(),
            limit: None,
            render: false,
            member: None,
            carried: None,
        };
        match self.foldline.select(&request) {
            Err(HostError::Core(e)) if e.code == Code::TailTurnTooLarge => Err(too_large(
                what(),
                e.message.trim_start_matches("tail_turn_too_large: "),
                turn,
            )),
            Err(e) => Err(e),
            Ok(_) => Ok(()),
        }
    }

    /// The conversation's newest turn as `fix` makes it, when `fix` edits it.
    fn edited_newest(
        &self,
        conversation: &str,
        fix: &foldline_core::event::Correction,
    ) -> Result<Option<foldline_core::event::Message>> {
        let mut cache = lock(&self.cache);
        let c = self.kept(&mut cache, conversation);
        self.load_into(c, conversation, false)?;
        let newest = c
            .recent
            .iter()
            .rev()
            .find(|e| matches!(e, Event::Message(_)));
        Ok(
            match newest.and_then(|t| super::corrected::corrected(t, fix)) {
                Some(Event::Message(m)) if m.turn_id == fix.turn_id => Some(m),
                _ => None,
            },
        )
    }
}

/// The admission's refusal of `turn` (`turn_too_large`): `what` it is,
/// then the core's measure of it.
pub(super) fn too_large(what: String, measured: &str, turn: &str) -> HostError {
    HostError::Core(
        foldline_core::Error::new(Code::TurnTooLarge, format!("{what}: {measured}"))
            .with_ids([turn.to_owned()]),
    )
}

/// A message's metadata, its content hash left out (select measures sizes).
fn meta(e: Event) -> Option<Event> {
    match e {
        Event::Message(mut m) => {
            m.content_hash.get_or_insert_with(String::new);
            Some(Event::TurnMeta(TurnMeta::of(&m)))
        }
        Event::TurnMeta(_) => Some(e),
        _ => None,
    }
}

/// The head of a chain whose summary is the least a compaction writes.
fn least_summary() -> ChainHead {
    ChainHead {
        boundary_id: "boundary:least".into(),
        boundary_hash: String::new(),
        covered_through_seq: 0,
        covered_through_turn_id: String::new(),
        frontier_id: String::new(),
        summary: "x".repeat(SUMMARY_MIN_CHARS as usize),
        length: 1,
    }
}
