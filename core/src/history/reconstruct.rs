//! Canonical reconstruction: journal events fold into effective turns.
//!
//! The fold is order-independent: messages are keyed by turn id, corrections
//! by (turn id, correction sequence), and the result is sorted by (source
//! sequence, index, turn id). The same set of events gives the same turns in
//! any arrival order. An event repeated verbatim is idempotent; two events
//! claiming one turn (or one correction) with different content fail closed
//! with `conflicting_turn`.

use std::collections::BTreeMap;

use crate::error::{Code, Error, Result};
use crate::records::boundary::Boundary;
use crate::records::event::{Correction, Event, FailureEvent, Message, TaskEvent, TurnMeta};
use crate::records::frontier::Frontier;
use crate::records::turn::{content_hash, estimate_tokens, parts_chars, Part, Turn};

/// Everything a set of events says, folded.
#[derive(Debug, Clone, Default)]
pub struct Reconstruction {
    /// Effective turns, ordered.
    pub turns: Vec<Turn>,
    /// Corrections whose turn is not among the events (it may be covered history).
    pub orphan_corrections: Vec<Correction>,
    /// Boundaries, ordered by id.
    pub boundaries: Vec<Boundary>,
    /// Frontiers, ordered by id.
    pub frontiers: Vec<Frontier>,
    /// Manual-compaction task events, ordered.
    pub tasks: Vec<TaskEvent>,
    /// Failed runs, ordered.
    pub failures: Vec<FailureEvent>,
}

/// A correction replaces what a turn says, not what it did: the original's
/// tool calls and results that the correction does not carry stay (after the
/// corrected parts), so a call and its result are never split.
fn corrected_parts(fix: &[Part], original: &[Part]) -> Vec<Part> {
    let id = |p: &Part| p.link().map(|(id, _)| id.to_owned());
    let carried: Vec<String> = fix.iter().filter_map(id).collect();
    let mut out = fix.to_vec();
    out.extend(
        original
            .iter()
            .filter(|p| id(p).is_some_and(|i| !carried.contains(&i)))
            .cloned(),
    );
    out
}

/// The events keyed by what they claim: a turn (and whether it arrived
/// late), a correction, a boundary, a frontier, a turn's metadata; task and
/// failure records as they came.
#[derive(Default)]
struct Keyed<'a> {
    messages: BTreeMap<&'a str, (&'a Message, bool)>,
    corrections: BTreeMap<(&'a str, u64), &'a Correction>,
    boundaries: BTreeMap<&'a str, &'a Boundary>,
    frontiers: BTreeMap<&'a str, &'a Frontier>,
    metas: BTreeMap<&'a str, &'a TurnMeta>,
    tasks: Vec<&'a TaskEvent>,
    failures: Vec<&'a FailureEvent>,
}

/// Insert `value` under `key`: a repeat is idempotent, a different value
/// for the same key is `conflicting_turn` naming `what`.
fn claim<'a, K: Ord, V: PartialEq + ?Sized>(
    map: &mut BTreeMap<K, &'a V>,
    key: K,
    value: &'a V,
    what: &str,
    id: &str,
) -> Result<()> {
    match map.insert(key, value) {
        Some(prev) if prev != value => Err(conflict(what, id)),
        _ => Ok(()),
    }
}

impl<'a> Keyed<'a> {
    fn of(events: &'a [Event]) -> Result<Self> {
        let mut k = Keyed::default();
        for ev in events {
            match ev {
                Event::Message(m) | Event::LateDelivery(m) => {
                    let late = matches!(ev, Event::LateDelivery(_));
                    let (prev, was_late) = k.messages.entry(&m.turn_id).or_insert((m, late));
                    // A repeat must say the same (compared only when it is one).
                    if !std::ptr::eq(*prev, m) && *prev != m {
                        return Err(conflict("turn", &m.turn_id));
                    }
                    *was_late |= late;
                }
                Event::Correction(c) => {
                    let key = (c.turn_id.as_str(), c.correction_seq);
                    claim(&mut k.corrections, key, c, "correction", &c.turn_id)?;
                }
                Event::Boundary(b) => claim(&mut k.boundaries, &b.id, &**b, "boundary", &b.id)?,
                Event::Frontier(f) => claim(&mut k.frontiers, &f.id, f, "frontier", &f.id)?,
                Event::TurnMeta(t) => claim(&mut k.metas, &t.turn_id, t, "turn", &t.turn_id)?,
                Event::CompactionTask(t) => k.tasks.push(t),
                Event::CompactionFailed(f) => k.failures.push(f),
            }
        }
        Ok(k)
    }
}

/// `given`, or else `events` reconstructed into `slot` (a call that may
/// have been handed the reconstruction of its events already).
///
/// # Errors
/// As [`reconstruct`].
pub fn given_or<'a>(
    given: Option<&'a Reconstruction>,
    events: &[Event],
    slot: &'a mut Option<Reconstruction>,
) -> Result<&'a Reconstruction> {
    match given {
        Some(r) => Ok(r),
        None => Ok(slot.insert(reconstruct(events)?)),
    }
}

/// Fold events into a [`Reconstruction`].
///
/// # Errors
/// `conflicting_turn` when two events disagree about one turn or correction.
pub fn reconstruct(events: &[Event]) -> Result<Reconstruction> {
    let k = Keyed::of(events)?;
    // The latest correction of each turn wins.
    let mut latest: BTreeMap<&str, &Correction> = BTreeMap::new();
    for ((turn, _), c) in &k.corrections {
        latest.insert(turn, c);
    }
    let mut turns = Vec::with_capacity(k.messages.len());
    for (id, (m, late)) in &k.messages {
        turns.push(message_turn(m, *late, latest.remove(id)));
    }
    // Metadata-only turns; a full message for the same turn wins.
    for (id, t) in &k.metas {
        if !k.messages.contains_key(id) {
            turns.push(meta_or_corrected(t, latest.remove(id)));
        }
    }
    crate::order::sort_by(&mut turns, |a, b| a.key().cmp(&b.key()));
    crate::history::speakers::attribute(&mut turns);

    let mut tasks: Vec<TaskEvent> = k.tasks.into_iter().cloned().collect();
    crate::order::sort_by(&mut tasks, |a, b| {
        (a.head_seq, &a.task_id, a.state, &a.boundary_id).cmp(&(
            b.head_seq,
            &b.task_id,
            b.state,
            &b.boundary_id,
        ))
    });
    tasks.dedup();
    let mut failures: Vec<FailureEvent> = k.failures.into_iter().cloned().collect();
    crate::order::sort_by(&mut failures, |a, b| {
        (a.head_seq, &a.run_id).cmp(&(b.head_seq, &b.run_id))
    });
    failures.dedup();

    Ok(Reconstruction {
        turns,
        orphan_corrections: latest.into_values().cloned().collect(),
        boundaries: k.boundaries.into_values().cloned().collect(),
        frontiers: k.frontiers.into_values().cloned().collect(),
        tasks,
        failures,
    })
}

/// A message's effective turn, with its latest correction applied.
fn message_turn(m: &Message, late: bool, fix: Option<&Correction>) -> Turn {
    let merged;
    let (parts, host_tokens, corrected, known_hash) = match fix {
        Some(c) => {
            merged = corrected_parts(&c.parts, &m.parts);
            (&merged, c.tokens, merged != m.parts, None)
        }
        None => (&m.parts, m.tokens, false, m.content_hash.as_ref()),
    };
    let chars = parts_chars(parts);
    Turn {
        turn_id: m.turn_id.clone(),
        source_seq: m.source_seq,
        index: m.index,
        role: m.role,
        author_agent: m.author_agent.clone(),
        sender: m.sender.clone(),
        source: m.source.clone(),
        parts: parts.clone(),
        chars,
        tokens: host_tokens.unwrap_or_else(|| estimate_tokens(chars)),
        content_hash: match known_hash {
            Some(h) => h.clone(),
            None => content_hash(parts),
        },
        pinned: m.pinned || m.role.always_pinned(),
        sensitive: m.sensitive,
        late,
        corrected,
        metadata_only: false,
        meta_calls: Vec::new(),
        meta_results: Vec::new(),
        attributed: false,
    }
}

/// A metadata-only turn; a correction brings content, and the turn is
/// whole again.
fn meta_or_corrected(t: &TurnMeta, fix: Option<&Correction>) -> Turn {
    match fix {
        Some(c) => {
            let chars = parts_chars(&c.parts);
            Turn {
                parts: c.parts.clone(),
                chars,
                tokens: c.tokens.unwrap_or_else(|| estimate_tokens(chars)),
                content_hash: content_hash(&c.parts),
                corrected: true,
                ..meta_turn(t)
            }
        }
        None => meta_turn(t),
    }
}

fn meta_turn(t: &TurnMeta) -> Turn {
    Turn {
        turn_id: t.turn_id.clone(),
        source_seq: t.source_seq,
        index: t.index,
        role: t.role,
        author_agent: t.author_agent.clone(),
        sender: t.sender.clone(),
        source: t.source.clone(),
        parts: Vec::new(),
        chars: t.chars,
        tokens: t.tokens.unwrap_or_else(|| estimate_tokens(t.chars)),
        content_hash: t.content_hash.clone(),
        pinned: t.pinned || t.role.always_pinned(),
        sensitive: t.sensitive,
        late: false,
        corrected: false,
        metadata_only: true,
        meta_calls: t.tool_calls.clone(),
        meta_results: t.tool_results.clone(),
        attributed: false,
    }
}

fn conflict(what: &str, id: &str) -> Error {
    // The id as a JSON string, as the request spells it (not Rust's `{:?}`,
    // whose escaping pulls the Unicode printability tables, ~2.9 KB gzipped,
    // into the artifact for this one message).
    let mut quoted = Vec::new();
    foldline_json::write_str(id, &mut quoted);
    let quoted = String::from_utf8(quoted).unwrap_or_default();
    Error::new(
        Code::ConflictingTurn,
        format!("two events claim {what} {quoted} with different content"),
    )
    .with_ids([id.to_owned()])
}

#[cfg(test)]
mod correction_tests {
    use super::{conflict, corrected_parts};
    use crate::records::turn::Part;

    #[test]
    fn a_conflict_names_the_id_as_a_json_string() {
        let plain = conflict("turn", "t1");
        assert_eq!(plain.code.as_str(), "conflicting_turn");
        assert_eq!(
            plain.message,
            r#"two events claim turn "t1" with different content"#
        );
        // Quotes and control characters escaped as JSON, on one line.
        let odd = conflict("turn", "a\"b\nc\u{1}");
        assert_eq!(
            odd.message,
            r#"two events claim turn "a\"b\nc\u0001" with different content"#
        );
        assert_eq!(odd.ids, vec!["a\"b\nc\u{1}".to_owned()]);
    }

    #[test]
    fn a_correction_keeps_the_tool_calls_it_does_not_carry() {
        let call = Part::ToolCall {
            call_id: "c1".into(),
            name: "weather".into(),
            arguments: "{}".into(),
            custom: false,
            provider_options: serde_json::Value::Null,
        };
        let original = vec![
            Part::Text {
                text: "Let me look.".into(),
            },
            call.clone(),
        ];
        let fix = vec![Part::Text {
            text: "Let me check the forecast.".into(),
        }];
        assert_eq!(
            corrected_parts(&fix, &original),
            vec![
                Part::Text {
                    text: "Let me check the forecast.".into()
                },
                call.clone()
            ]
        );
        // A correction that carries the call keeps it once.
        let both = vec![Part::Text { text: "x".into() }, call.clone()];
        assert_eq!(corrected_parts(&both, &original), both);
    }
}
