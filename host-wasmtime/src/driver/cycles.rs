//! Tool cycles at the door. Compaction neither splits a cycle (from the turn
//! that asked through its answers: tool calls and results, approval
//! requests and responses) nor keeps part of one, so a cycle past what one
//! compaction can take could never be folded, and an open one past a
//! context's room could never be sent: 200 tool results of 2,000
//! characters, accepted one by one, left every context without them and
//! every compaction `nothing_to_fold`, for good. The append check refuses
//! the answer that makes either (`turn_too_large`), measured by the core's
//! own `select` (the context's room, as for the newest turn) and `validate`
//! (what one compaction can take, of one turn the cycle's size).
//! js/src/driver/cycles.ts is its twin.

use foldline_core::budget::{MIN_TAIL_CHARS, MIN_TAIL_TOKENS};
use foldline_core::event::{Event, Message};
use foldline_core::turn::{parts_chars, Part, Role};
use foldline_core::validate::{EventsCheck, ValidateRequest};
use foldline_core::Code;

use super::Driver;
use crate::error::{HostError, Result};
use crate::journal::Journal;
use crate::model::Model;
use crate::sync::lock;

/// A cycle: the positions of the turn that asked and of the answer.
type Span = (usize, usize);

/// What a cycle is measured from of one turn (a message, or the metadata
/// the driver keeps of an older one).
struct Turn<'a> {
    event: &'a Event,
    turn_id: &'a str,
    asks: Vec<&'a str>,
    answers: Vec<&'a str>,
    chars: u64,
    tokens: Option<u64>,
}

impl<'a> Turn<'a> {
    /// The turn `e` is, unless never folded or no turn.
    fn of(e: &'a Event) -> Option<Turn<'a>> {
        if e.is_pinned() {
            return None;
        }
        match e {
            Event::Message(m) => {
                let links = |answer: bool| {
                    m.parts
                        .iter()
                        .filter_map(move |p| p.link().filter(|l| l.1 == answer).map(|l| l.0))
                        .collect()
                };
                Some(Turn {
                    event: e,
                    turn_id: &m.turn_id,
                    asks: links(false),
                    answers: links(true),
                    chars: parts_chars(&m.parts),
                    tokens: m.tokens,
                })
            }
            Event::TurnMeta(t) => Some(Turn {
                event: e,
                turn_id: &t.turn_id,
                asks: t.tool_calls.iter().map(String::as_str).collect(),
                answers: t.tool_results.iter().map(String::as_str).collect(),
                chars: t.chars,
                tokens: t.tokens,
            }),
            _ => None,
        }
    }
}

impl<J: Journal, M: Model> Driver<J, M> {
    /// Refuse (`turn_too_large`, naming the answer) a batch whose answers
    /// close a cycle — over the turns this driver holds of the conversation
    /// and the batch's — that one compaction could not take whole, or whose
    /// last turn answers a cycle a context could not hold whole beside the
    /// pinned turns and the least summary.
    pub(super) fn check_cycles(&self, conversation: &str, events: &[Event]) -> Result<()> {
        let batch: Vec<Turn<'_>> = events.iter().filter_map(Turn::of).collect();
        if batch.iter().all(|t| t.answers.is_empty()) {
            return Ok(());
        }
        let (held, stored) = {
            let mut cache = lock(&self.cache);
            let c = self.kept(&mut cache, conversation);
            self.load_into(c, conversation, false)?;
            let stored: Vec<Event> = c
                .recent
                .iter()
                .filter(|e| matches!(e, Event::Message(_) | Event::TurnMeta(_)) && !e.is_pinned())
                .cloned()
                .collect();
            (super::append::pinned_of(&c.recent), stored)
        };
        let from = stored.len();
        let turns: Vec<Turn<'_>> = stored.iter().filter_map(Turn::of).chain(batch).collect();
        let spans = cycles(&turns, from);
        // The cycle the batch's last turn answers, still open: it goes to
        // the model whole, so it must fit a context.
        let last = turns.len() - 1;
        let ends_open = events
            .last()
            .and_then(Turn::of)
            .is_some_and(|t| !t.answers.is_empty());
        let widest = |spans: &mut dyn Iterator<Item = &Span>| {
            spans.copied().max_by_key(|s| size(&turns, *s).0)
        };
        let open = ends_open
            .then(|| widest(&mut spans.iter().filter(|s| s.1 == last)))
            .flatten();
        if let Some(open) = open {
            self.fits_cycle(conversation, &held, &turns, open)?;
        }
        // Any cycle must be one a compaction can take whole; one that fits
        // a context does (the open one was just found to).
        let Some(span) = widest(&mut spans.iter()).filter(|s| Some(*s) != open) else {
            return Ok(());
        };
        match self.fits_cycle(conversation, &held, &turns, span) {
            Err(HostError::Core(e)) if e.code == Code::TurnTooLarge => {
                self.foldable(conversation, &turns, span)
            }
            other => other,
        }
    }

    /// Whether the cycle `span` of `turns` fits a context whole as its
    /// newest turns (`turn_too_large` when not).
    fn fits_cycle(
        &self,
        conversation: &str,
        held: &[Event],
        turns: &[Turn<'_>],
        span: Span,
    ) -> Result<()> {
        let (chars, tokens) = size(turns, span);
        if chars <= MIN_TAIL_CHARS / 2 && tokens <= MIN_TAIL_TOKENS / 2 {
            return Ok(());
        }
        let cycle = turns[span.0..=span.1].iter().map(|t| t.event.clone());
        let (from, answer) = (turns[span.0].turn_id, turns[span.1].turn_id);
        let what = || {
            format!("the tool cycle from {from} through {answer} is larger than a context holds whole beside the pinned turns and a summary (compaction neither splits it nor keeps part of it)")
        };
        self.fits_newest(conversation, held.to_vec(), cycle.collect(), what, answer)
    }

    /// Whether one compaction could take the cycle `span` of `turns` whole:
    /// the core's admission of one turn of its size (`turn_too_large` when
    /// not).
    fn foldable(&self, conversation: &str, turns: &[Turn<'_>], span: Span) -> Result<()> {
        let (chars, _) = size(turns, span);
        let (from, answer) = (turns[span.0].turn_id, turns[span.1].turn_id);
        let counted: Option<Vec<u64>> = turns[span.0..=span.1].iter().map(|t| t.tokens).collect();
        let route = (self.route_of)(conversation);
        let text = "x".repeat(usize::try_from(chars).unwrap_or(usize::MAX));
        let mut whole = Message::new(
            conversation,
            1,
            answer,
            Role::User,
            vec![Part::Text { text }],
        );
        whole.chat = route.chat.clone();
        whole.tokens = counted.map(|t| t.iter().sum());
        let check = ValidateRequest::Events(Box::new(EventsCheck {
            route,
            events: vec![Event::Message(whole)],
            declaration: Some(self.declaration.clone()),
            pinned: Vec::new(),
        }));
        match self.foldline.validate(&check) {
            Err(HostError::Core(e)) if e.code == Code::TurnTooLarge => Err(super::newest::too_large(
                format!("the tool cycle from {from} through {answer} is larger than one compaction can take whole (compaction neither splits it nor keeps part of it)"),
                e.message.trim_start_matches("events[0] "),
                answer,
            )),
            Err(e) => Err(e),
            Ok(_) => Ok(()),
        }
    }
}

/// The characters and counted tokens of the cycle `span` of `turns`.
fn size(turns: &[Turn<'_>], (start, end): Span) -> (u64, u64) {
    turns[start..=end].iter().fold((0, 0), |(c, t), turn| {
        (c + turn.chars, t + turn.tokens.unwrap_or(0))
    })
}

/// The cycles the answers of `turns[from..]` close, whose ask is among
/// `turns` (the latest ask of each id before the answer, as the core links
/// them): one pass, whatever answers find no ask.
fn cycles(turns: &[Turn<'_>], from: usize) -> Vec<Span> {
    let mut asked: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    let mut spans = Vec::new();
    for (end, t) in turns.iter().enumerate() {
        if end >= from {
            spans.extend(
                t.answers
                    .iter()
                    .filter_map(|id| asked.get(id).map(|&start| (start, end))),
            );
        }
        for id in &t.asks {
            asked.insert(id, end);
        }
    }
    spans
}
