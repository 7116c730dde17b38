//! Corrections and late deliveries at the door: what the append check
//! measures of a batch that holds them (a correction [`Driver::correct`]
//! writes; raw foldline events `foldline import` takes), and the driver's
//! `correct` (js/src/driver/correct.ts is its twin).
//!
//! A correction replaces what a turn says. Accepted unchecked, one could
//! leave a conversation unable to select or compact for good: a turn
//! corrected past what one compaction can take, a system prompt corrected
//! past the pinned turns' room, a covered turn corrected (or delivered late)
//! past the covered-history amendment's bound (`amendment_too_large`, which
//! fails closed at every later resolve). So the check measures each turn as
//! its latest correction makes it, and resolves the chain with the batch's
//! chain events (corrections, late deliveries, frontiers, boundaries) before
//! anything is written.

use std::collections::BTreeMap;

use foldline_core::event::{Correction, Event};

use super::Driver;
use crate::error::{HostError, Result};
use crate::journal::Journal;
use crate::model::Model;
use crate::sync::lock;

/// Whether `e` can change covered history (a correction or a late delivery).
pub(super) fn amends(e: &Event) -> bool {
    matches!(e, Event::Correction(_) | Event::LateDelivery(_))
}

/// Whether resolve reads `e` (a frontier, a boundary, a correction, a late
/// delivery): a batch holding one is resolved as if written before it is.
pub(super) fn chains(e: &Event) -> bool {
    amends(e) || matches!(e, Event::Frontier(_) | Event::Boundary(_))
}

/// The turn ids `events`' corrections touch.
pub(super) fn targets(events: &[Event]) -> std::collections::BTreeSet<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Correction(c) => Some(c.turn_id.clone()),
            _ => None,
        })
        .collect()
}

/// What resolve is given of the turns `chain`'s corrections touch: their
/// messages among `held` (a driver keeps every corrected turn). A
/// correction keeps the tool calls and results its turn had and it does
/// not carry, so the turn it makes — what a boundary froze — can only be
/// told from the turn itself; given the correction alone, resolve compared
/// it with the frozen turn and found a difference that was not there (a
/// false amendment, past its bound a chain that never resolved again).
pub(super) fn originals(held: &[Event], chain: &[Event]) -> Vec<Event> {
    let touched = targets(chain);
    if touched.is_empty() {
        return Vec::new();
    }
    held.iter()
        .filter(|e| matches!(e, Event::Message(m) if touched.contains(&m.turn_id)))
        .cloned()
        .collect()
}

/// `turn` as `c` makes it: what it says replaced, the tool calls and results
/// `c` does not carry kept (the core's `corrected_parts`, which the artifact
/// keeps private), its hash left to the check.
pub(super) fn corrected(turn: &Event, c: &Correction) -> Option<Event> {
    let (Event::Message(m) | Event::LateDelivery(m)) = turn else {
        return None;
    };
    let mut m = m.clone();
    let carried: Vec<&str> = c
        .parts
        .iter()
        .filter_map(|p| p.link().map(|(id, _)| id))
        .collect();
    let kept = m
        .parts
        .iter()
        .filter(|p| p.link().is_some_and(|(id, _)| !carried.contains(&id)));
    m.parts = c.parts.iter().chain(kept).cloned().collect();
    m.tokens = c.tokens;
    m.content_hash = None;
    Some(match turn {
        Event::LateDelivery(_) => Event::LateDelivery(m),
        _ => Event::Message(m),
    })
}

/// The turns of `held` (the events a driver keeps: pinned turns and the
/// turns no summary covers, with the corrections among them) as their
/// latest corrections make them, by turn id, with that correction's seq.
fn effective(held: &[Event]) -> BTreeMap<&str, (Event, Option<u64>)> {
    let mut turns: BTreeMap<&str, (Event, Option<u64>)> = BTreeMap::new();
    for e in held {
        match e {
            Event::Correction(c) => {
                if let Some((turn, seq)) = turns.get_mut(c.turn_id.as_str()) {
                    if seq.is_none_or(|s| c.correction_seq >= s) {
                        if let Some(now) = corrected(turn, c) {
                            (*turn, *seq) = (now, Some(c.correction_seq));
                        }
                    }
                }
            }
            _ => {
                if let Some(id) = e.turn_id() {
                    turns.insert(id, (e.clone(), None));
                }
            }
        }
    }
    turns
}

/// What the core's append check is given for `batch`: the batch with each
/// correction of a turn the driver holds in its place as the turn it makes
/// (so `turn_too_large` and `pinned_too_large` hold of corrected turns, and
/// name the correction's index), a correction of a turn earlier in the batch
/// applied there; and the conversation's pinned turns as their corrections
/// make them, less those the batch corrects. A correction of a covered turn
/// stays as it is: it is an amendment, which resolve bounds.
pub(super) fn checked(held: &[Event], batch: &[Event]) -> (Vec<Event>, Vec<Event>) {
    let mut turns = effective(held);
    let mut out = batch.to_vec();
    // Where each turn corrected in the batch stands in `out`, and the seq
    // of the correction in force.
    let mut placed: BTreeMap<&str, (usize, Option<u64>)> = BTreeMap::new();
    for (i, e) in batch.iter().enumerate() {
        if let Some(id) = e.turn_id() {
            placed.insert(id, (i, None));
            continue;
        }
        let Event::Correction(c) = e else { continue };
        let id = c.turn_id.as_str();
        let (at, seq) = match (placed.get(id), turns.get(id)) {
            (Some(&(at, seq)), _) => (at, seq),
            (None, Some((_, seq))) => (i, *seq),
            (None, None) => continue,
        };
        if seq.is_some_and(|s| c.correction_seq < s) {
            continue;
        }
        let base = match at < i {
            true => &out[at],
            false => &turns[id].0,
        };
        let Some(now) = corrected(base, c) else {
            continue;
        };
        if at < i && !matches!(batch[at], Event::Correction(_)) {
            out[at] = now;
        } else {
            // The held turn is measured here, once: an earlier correction
            // of it in this batch goes back to being a correction.
            if at < i {
                out[at] = batch[at].clone();
            }
            out[i] = now;
            turns.remove(id);
            placed.insert(id, (i, Some(c.correction_seq)));
            continue;
        }
        placed.insert(id, (at, Some(c.correction_seq)));
    }
    let pinned = turns
        .into_values()
        .map(|(e, _)| e)
        .filter(Event::is_pinned)
        .collect();
    (out, pinned)
}

/// What [`Driver::correct`] wrote: the journal position, and the
/// correction's number among the turn's (the JS driver's `Corrected`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Corrected {
    /// The journal position of the correction.
    pub seq: u64,
    /// Its number among the turn's corrections (the highest is in force).
    pub correction_seq: u64,
}

impl<J: Journal, M: Model> Driver<J, M> {
    /// Correct what turn `turn_id` of `conversation` says: a `correction`
    /// of its content (`parts`), numbered after the turn's latest
    /// correction, checked as every correction is before anything is
    /// written ([`Driver::check_events`]: the turn it makes must be one a
    /// compaction could take and leave the pinned turns a context room; a
    /// covered turn's must keep the covered-history amendment within
    /// `amendmentMaxChars`), and written with a compare-and-append at the
    /// position read. The original's tool calls and results that `parts`
    /// does not carry stay (a call and its result are never split). A
    /// covered turn's correction reaches the context as the amendment
    /// until a compaction absorbs it. With `by`, only a turn that sender
    /// sent is corrected (a server's member editing their own message).
    ///
    /// # Errors
    /// `invalid_input` when the conversation holds no such turn the driver
    /// can see (one before the activation frontier is never sent to a
    /// model), `not_author` when `by` did not send it, the append check's
    /// codes, `amendment_too_large`, storage failures.
    pub fn correct(
        &self,
        conversation: &str,
        turn_id: &str,
        parts: Vec<foldline_core::turn::Part>,
        by: Option<&str>,
    ) -> Result<Corrected> {
        loop {
            let (head, fix) = {
                let mut cache = lock(&self.cache);
                let c = self.kept(&mut cache, conversation);
                self.load_into(c, conversation, true)?;
                let held = c.recent.iter().any(|e| e.turn_id() == Some(turn_id));
                if !held && !c.verified.covered.contains_key(turn_id) {
                    return Err(HostError::Input(format!(
                        "{conversation} holds no turn {turn_id} a model sees (none, or one before the activation frontier)"
                    )));
                }
                let latest = c.recent.iter().filter_map(|e| match e {
                    Event::Correction(x) if x.turn_id == turn_id => Some(x.correction_seq),
                    _ => None,
                });
                let latest = latest.max().unwrap_or(0);
                if let Some(by) = by {
                    if self.sender_of(c, conversation, turn_id)?.as_deref() != Some(by) {
                        return Err(HostError::NotAuthor(format!(
                            "{by} did not send turn {turn_id} of {conversation}: a member corrects only what they sent"
                        )));
                    }
                }
                // Counted as the turn it makes, when the host counts.
                let fix = Correction {
                    turn_id: turn_id.to_owned(),
                    correction_seq: latest + 1,
                    parts: parts.clone(),
                    tokens: None,
                };
                let turn = c.recent.iter().find(|e| match e {
                    Event::Message(m) => m.turn_id == turn_id,
                    _ => false,
                });
                let tokens = turn.and_then(|t| corrected(t, &fix)).and_then(|t| match t {
                    Event::Message(m) => self.tokens_of(&m.parts),
                    _ => None,
                });
                (c.seq, Correction { tokens, ..fix })
            };
            let latest = fix.correction_seq - 1;
            let correction = [Event::Correction(fix)];
            if let Err(e) = self.check_events(conversation, &correction) {
                // The check reads what is new: another writer's correction
                // of this turn, numbered as this one, refuses it as a
                // second claim to that number. Numbered again after it.
                if self.with_cache(conversation, |c| c.seq) != head {
                    continue;
                }
                return Err(e);
            }
            match self
                .journal
                .append_at(conversation, &correction, head, None)
            {
                Err(HostError::Conflict { .. }) => continue,
                Ok(seq) => {
                    self.wrote(conversation, seq);
                    return Ok(Corrected {
                        seq,
                        correction_seq: latest + 1,
                    });
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Resolve the conversation's chain with the batch's chain events
    /// (frontiers, boundaries, corrections, late deliveries) as if written:
    /// a refusal of resolve's refuses the batch, naming the first event that
    /// brings it, before anything is written — `amendment_too_large` (the
    /// covered history a correction changes would render past
    /// `amendmentMaxChars`), a second frontier (`conflicting_turn`), a
    /// boundary whose packet the journal lacks, any other break of the
    /// chain; written, every later resolve would fail closed. A
    /// conversation that does not resolve before the batch is not judged by
    /// it (a correction may be what mends it).
    ///
    /// # Errors
    /// Resolve's refusal, naming the event; storage failures.
    pub(super) fn check_chain(&self, conversation: &str, batch: &[Event]) -> Result<()> {
        let mut cache = lock(&self.cache);
        let c = self.kept(&mut cache, conversation);
        if self.load_into(c, conversation, true).is_err() {
            return Ok(());
        }
        self.read_originals(c, conversation, Some(batch))?;
        // A boundary the chain holds already is not sent again (resolve
        // starts from the verified head): one of its id is another claim
        // to it, which a cold read of the journal would find.
        for (i, e) in batch.iter().enumerate() {
            if let Event::Boundary(b) = e {
                if c.verified.accepted.contains(&b.id) || c.verified.retired.contains(&b.id) {
                    return Err(HostError::Core(
                        foldline_core::Error::new(
                            foldline_core::Code::ConflictingTurn,
                            format!("events[{i}]: the chain holds boundary {} already", b.id),
                        )
                        .with_ids([b.id.clone()]),
                    ));
                }
            }
        }
        let resolve = |upto: usize| {
            let mut chain = c.chain.clone();
            chain.extend(batch[..upto].iter().filter(|e| chains(e)).cloned());
            self.resolve_from(c, conversation, chain)
        };
        if resolve(batch.len()).is_ok() {
            return Ok(());
        }
        // The first event whose addition fails (the chain before the batch
        // resolved).
        for (i, e) in batch.iter().enumerate().filter(|(_, e)| chains(e)) {
            if let Err(err) = resolve(i + 1) {
                return Err(match err {
                    HostError::Core(mut err) => {
                        err.message = format!("events[{i}]: {}", err.message);
                        let id = match e {
                            Event::Correction(c) => &c.turn_id,
                            Event::Frontier(f) => &f.id,
                            Event::Boundary(b) => &b.id,
                            _ => e.turn_id().unwrap_or_default(),
                        };
                        err.ids = vec![id.to_owned()];
                        HostError::Core(err)
                    }
                    other => other,
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(id: &str, role: &str, text: &str) -> Event {
        serde_json::from_value(serde_json::json!({
            "type": "message", "conversation": "c", "sourceSeq": 1, "turnId": id,
            "role": role, "parts": [{"type": "text", "text": text}]
        }))
        .unwrap()
    }

    fn correction(id: &str, seq: u64, text: &str) -> Event {
        serde_json::from_value(serde_json::json!({
            "type": "correction", "turnId": id, "correctionSeq": seq,
            "parts": [{"type": "text", "text": text}]
        }))
        .unwrap()
    }

    fn text(e: &Event) -> String {
        match e {
            Event::Message(m) | Event::LateDelivery(m) => serde_json::to_string(&m.parts).unwrap(),
            Event::Correction(c) => format!("correction {}", c.correction_seq),
            _ => String::new(),
        }
    }

    #[test]
    fn a_held_turn_is_measured_as_its_latest_correction_makes_it() {
        let held = [
            message("s", "system", "be brief"),
            correction("s", 2, "be kind"),
            correction("s", 1, "older"),
        ];
        let (out, pinned) = checked(&held, &[]);
        assert!(out.is_empty());
        assert_eq!(pinned.len(), 1);
        assert!(text(&pinned[0]).contains("be kind"));
        // Corrected again in the batch: measured at the correction, once.
        let batch = [correction("s", 3, "x"), correction("s", 4, "yy")];
        let (out, pinned) = checked(&held, &batch);
        assert!(
            pinned.is_empty(),
            "the batch's turn stands for the held one"
        );
        assert_eq!(text(&out[0]), "correction 3");
        assert!(text(&out[1]).contains("yy"));
        // An older correction than the one in force measures nothing.
        let (out, pinned) = checked(&held, &[correction("s", 1, "zzz")]);
        assert_eq!(text(&out[0]), "correction 1");
        assert!(text(&pinned[0]).contains("be kind"));
    }

    #[test]
    fn a_turn_of_the_batch_is_measured_where_it_stands() {
        let batch = [
            message("t", "user", "hi"),
            correction("t", 1, "hello there"),
        ];
        let (out, _) = checked(&[], &batch);
        assert!(text(&out[0]).contains("hello there"));
        assert_eq!(text(&out[1]), "correction 1");
        // A covered turn (not held) stays a correction: resolve bounds it.
        let (out, pinned) = checked(&[], &[correction("old", 1, "x")]);
        assert_eq!(text(&out[0]), "correction 1");
        assert!(pinned.is_empty());
    }
}
