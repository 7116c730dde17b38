//! What `select` is sent of a conversation whose live turns are too large
//! for one call's memory (a history no summary covers: an import with
//! `--no-compact`): the turns that could be in the exact tail with their
//! content, every older one as its metadata alone (`turnMeta`). The exact
//! tail holds at most the context's limit of the newest turns, so the
//! selection is the one the whole content gives: the core sizes and
//! groups a turn from its metadata, renders only the tail and the pinned
//! turns, and reads reasoning only in the open tool cycle, sent whole.
//! 200,000 messages (290 MB of events): `foldline context` at the default
//! 512 MiB answered `memory_limit` after 28 s; now the context in 7 s,
//! the same bytes as a call given 4 GiB.
//!
//! A compaction `step` is sent the same: the plan sizes every turn from
//! its metadata and asks (`needs_content`, naming them) for the content
//! of the turns it would freeze when they are not among those sent whole;
//! the driver then sends those too (`Driver::fresh_step`). The oldest
//! turns up to the prefix's turn bound go whole from the start: a fold
//! takes the oldest turns after the frontier, and the core asks for no
//! content past that bound. 200,000 messages after an early frontier
//! (275 MB): 4 boundaries at the default 512 MiB in 6.3 s, where the whole
//! content needed 4 GiB (16.5 s), the same boundaries.

use std::collections::BTreeSet;

use foldline_core::budget::{Metric, Thresholds};
use foldline_core::declaration::Declaration;
use foldline_core::event::{Event, TurnMeta};
use foldline_core::turn::{estimate_tokens, Role};

/// What a call may send instead of the live events (`read_and_call`).
pub(super) type Slim<'a> = dyn Fn(&[Event]) -> Option<Vec<Event>> + 'a;

/// A call's memory over this many times the live turns' bytes: the
/// content is sent whole (every conversation a summary keeps folded).
const MEMORY_PER_BYTE: u64 = 8;

/// The events to send `select` instead of `events`, when their messages'
/// bytes pass an eighth of `memory_bytes` (gauged from the parts' lengths,
/// not their characters: this runs before every context): the newest
/// messages up to twice the context's `limit` (in the declaration's
/// metric), those of the open tool cycle and the pinned ones whole, the
/// older ones as metadata, except the turns named in `whole`, the
/// `oldest` ones (the oldest turns are what a compaction folds) and those
/// a correction or a late delivery touches (the core applies them to the
/// turn's content). `None`: send `events` as they are.
pub(super) fn slimmed(
    events: &[Event],
    declaration: &Declaration,
    limit: Option<u64>,
    memory_bytes: usize,
    (whole, oldest): (&BTreeSet<String>, u64),
) -> Option<Vec<Event>> {
    let bytes: u64 = events
        .iter()
        .filter(|e| !e.is_pinned())
        .flat_map(|e| match e {
            Event::Message(m) => m.parts.as_slice(),
            _ => &[],
        })
        .map(|p| p.measure(str::len))
        .sum();
    if bytes.saturating_mul(MEMORY_PER_BYTE) < memory_bytes as u64 {
        return None;
    }
    let touched: BTreeSet<&str> = events
        .iter()
        .filter_map(|e| match e {
            Event::Correction(c) => Some(c.turn_id.as_str()),
            Event::LateDelivery(m) => Some(m.turn_id.as_str()),
            _ => None,
        })
        .collect();
    let mut older = 0u64;
    let metas = events.iter().map(|e| match e {
        Event::Message(m) if !e.is_pinned() => {
            older += 1;
            let kept = older <= oldest
                || touched.contains(m.turn_id.as_str())
                || whole.contains(&m.turn_id);
            (!kept).then(|| TurnMeta::of(m))
        }
        _ => None,
    });
    let metas: Vec<Option<TurnMeta>> = metas.collect();
    let th = Thresholds::of(declaration);
    let window = limit.unwrap_or(th.limit).saturating_mul(2);
    let size = |t: &TurnMeta| match th.metric {
        Metric::Chars => t.chars,
        Metric::Tokens => t.tokens.unwrap_or_else(|| estimate_tokens(t.chars)),
    };
    let mut used = 0u64;
    let whole_from = metas
        .iter()
        .rposition(|t| {
            used = used.saturating_add(t.as_ref().map_or(0, size));
            used > window
        })
        .map_or(0, |i| i + 1);
    // The open tool cycle (after the newest admitted user turn) goes whole
    // too: the core sizes its reasoning from its content.
    let cycle = events.iter().rposition(|e| {
        matches!(e, Event::Message(m) if m.role == Role::User
            && declaration.admits(&m.source, m.author_agent.as_deref(), m.sensitive))
    });
    let whole_from = whole_from.min(cycle.unwrap_or(0));
    Some(
        events
            .iter()
            .zip(metas)
            .enumerate()
            .map(|(i, (e, meta))| match meta {
                Some(t) if i < whole_from => Event::TurnMeta(t),
                _ => e.clone(),
            })
            .collect(),
    )
}
