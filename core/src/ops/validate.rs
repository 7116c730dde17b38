//! `validate`: one entry point for everything that checks what others claim.
//!
//! A tagged request (`settle`, `resolve`, `declarations`, `stream`,
//! `failure`, `events`) keeps every check behind one entry point, beside
//! the others (`plan`, `step`, `select`, `timeline` and the member tools
//! `trimPrompt`, `compressToolResult`, `settings`; `core/src/entry/api.rs`).

use foldline_derive::{Decode, Encode};
use serde::Serialize;

use crate::error::{Code, Error, Result};
use crate::history::agree::{agree, Agreement};
use crate::ops::resolve::{resolve, Resolution, ResolveRequest};
use crate::ops::settle::{settle, SettleRequest};
use crate::ops::stream::{
    classify, decide, FailureInput, FailureReport, StreamDecision, StreamReport,
};
use crate::records::boundary::Boundary;
use crate::records::declaration::Declaration;
use crate::records::event::Event;
use crate::records::turn::{Role, Route};

/// Target and compactor declarations to compare.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeclarationPair {
    /// The target declaration.
    pub target: Declaration,
    /// The compactor declaration.
    pub compactor: Declaration,
}

/// A validate request, tagged by `kind`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum ValidateRequest {
    /// Settle a model output into a boundary.
    Settle(Box<SettleRequest>),
    /// Resolve the boundary chain.
    Resolve(Box<ResolveRequest>),
    /// Check that target and compactor declarations agree.
    Declarations(Box<DeclarationPair>),
    /// Decide what to do after a summary stream ended.
    Stream(StreamReport),
    /// Classify a failure into notice and audit reason.
    Failure(FailureInput),
    /// Check events before a journal appends them.
    Events(Box<EventsCheck>),
}

/// Events a journal is about to append, and the route they must be on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EventsCheck {
    /// The conversation's route (its conversation and chat bind the turns).
    pub route: Route,
    /// The events, in append order.
    pub events: Vec<Event>,
    /// The conversation's declaration, when the caller admits messages for
    /// it (a server, a driver's append): each message must then be one
    /// that a compaction could take ([`crate::budget::admissible_turn`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declaration: Option<Declaration>,
    /// The conversation's pinned turns already in the journal (its system
    /// and developer messages, documents and turns marked pinned), which a
    /// host sends with a batch that holds a pinned turn: with the
    /// declaration, the batch's pinned turns are refused when all of them
    /// together would leave no context room
    /// ([`crate::budget::admissible_pinned`]). Counted as written.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pinned: Vec<Event>,
}

/// The answer to a validate request, tagged by `kind`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum ValidateResponse {
    /// The settled boundary, ready to append.
    Settled {
        /// The boundary.
        boundary: Box<Boundary>,
    },
    /// The resolved chain.
    Resolved(Box<Resolution>),
    /// The declaration comparison.
    Declarations(Agreement),
    /// The stream decision.
    Stream {
        /// What to do next.
        decision: StreamDecision,
    },
    /// The classified failure.
    Failure(FailureReport),
    /// The events may be appended.
    #[serde(rename_all = "camelCase")]
    Events {
        /// How many were checked.
        count: u64,
        /// Each event's content hash, in order (`""` for events that are
        /// not messages or late deliveries): a journal stores it with the
        /// event, so each turn is hashed once, when it enters.
        content_hashes: Vec<String>,
    },
}

/// The largest source sequence a message may carry: 2^53 - 1, the largest
/// integer JavaScript holds exactly, so every runtime reads the same number
/// and the next one still exists.
pub const MAX_SOURCE_SEQ: u64 = (1 << 53) - 1;

/// A message's size as the append check measures it: its parts, and for a
/// member's message the label it carries once its room has several
/// speakers (history/speakers.rs), so a message accepted alone still fits
/// then; and whether that label was counted.
fn admitted_size(m: &crate::records::event::Message) -> (u64, u64, bool) {
    let chars = crate::records::turn::parts_chars(&m.parts);
    let tokens = m
        .tokens
        .unwrap_or_else(|| crate::records::turn::estimate_tokens(chars));
    if m.role != Role::User || m.sender.is_empty() {
        return (chars, tokens, false);
    }
    let (label_chars, label_tokens) =
        crate::history::speakers::attributed_size(&m.sender, &m.parts);
    (
        chars.saturating_add(label_chars),
        tokens.saturating_add(label_tokens),
        true,
    )
}

/// The journal contract's append check: every event decodes (the decoder
/// names the offending path, `events[3].role`), every turn is on the route,
/// its source sequence can still advance (at most [`MAX_SOURCE_SEQ`]), and a
/// declared content hash matches the content, so nothing appended can poison
/// later calls. Given the declaration, each message is also one a compaction
/// could take. Answers each event's content hash (`""` for events that are
/// not turns with content).
///
/// # Errors
/// `invalid_request` naming the event index, `wrong_route`,
/// `turn_too_large` or `pinned_too_large` naming the turn.
pub fn check_events(c: &EventsCheck) -> Result<Vec<String>> {
    if let Some((refusal, _)) = c.declaration.as_ref().and_then(Declaration::refusal) {
        return Err(refusal);
    }
    crate::records::event::check_route(&c.events, &c.route)?;
    let admissible = c
        .declaration
        .as_ref()
        .map(crate::render::budget::admissible_turn);
    let mut hashes = Vec::with_capacity(c.events.len());
    for (i, e) in c.events.iter().enumerate() {
        let m = match e {
            Event::Message(m) | Event::LateDelivery(m) => m,
            // A request's form of a turn: stored, no call could ever have its content.
            Event::TurnMeta(t) => {
                return Err(Error::new(
                    Code::InvalidRequest,
                    format!("events[{i}] is a turnMeta: a journal holds turns with their content"),
                )
                .with_ids([t.turn_id.clone()]))
            }
            _ => {
                hashes.push(String::new());
                continue;
            }
        };
        let (turn_id, declared, parts) = (&m.turn_id, &m.content_hash, &m.parts);
        if m.source_seq > MAX_SOURCE_SEQ {
            return Err(Error::new(
                Code::InvalidRequest,
                format!(
                    "events[{i}].sourceSeq must be at most {MAX_SOURCE_SEQ} (the largest integer every runtime holds exactly), so the conversation can advance"
                ),
            )
            .with_ids([turn_id.clone()]));
        }
        if let Some((max_chars, max_tokens)) = admissible {
            let (chars, tokens, labeled) = admitted_size(m);
            if chars > max_chars || tokens > max_tokens {
                let label = match labeled {
                    true => format!(
                        " with its room label {}",
                        crate::history::speakers::label(&m.sender).trim_end()
                    ),
                    false => String::new(),
                };
                // Character mode bounds no tokens: its sizes print without.
                let counted = max_tokens != u64::MAX;
                let size = crate::render::budget::size_text;
                return Err(Error::new(
                    Code::TurnTooLarge,
                    format!(
                        "events[{i}] measures {}{label}, over the {} one compaction can take under this declaration",
                        size(chars, counted.then_some(tokens)),
                        size(max_chars, counted.then_some(max_tokens)),
                    ),
                )
                .with_ids([turn_id.clone()]));
            }
        }
        if turn_id.is_empty() {
            return Err(Error::new(
                Code::InvalidRequest,
                format!("events[{i}].turnId must not be empty"),
            ));
        }
        let hash = crate::records::turn::content_hash(parts);
        if declared.as_ref().is_some_and(|h| *h != hash) {
            return Err(Error::new(
                Code::InvalidRequest,
                format!("events[{i}].contentHash does not match the event's parts"),
            )
            .with_ids([turn_id.clone()]));
        }
        hashes.push(hash);
    }
    if let Some(decl) = &c.declaration {
        check_pinned(decl, &c.pinned, &c.events)?;
    }
    Ok(hashes)
}

/// Admission's rule for pinned turns, which are never folded: the admitted
/// pinned turns of the conversation (`held`, then the batch's) must leave
/// a context room for the least summary and an ordinary turn
/// ([`crate::budget::admissible_pinned`]), and its documents must fit
/// their budget; accepted past
/// either, every later `select` would be `over_budget` and every
/// compaction would fail, for good. A batch without a pinned turn is never
/// refused by it.
fn check_pinned(decl: &Declaration, held: &[Event], events: &[Event]) -> Result<()> {
    use crate::render::budget::{self, Metric};
    let metric = budget::Thresholds::of(decl).metric;
    let bound = budget::admissible_pinned(decl);
    let unit = match metric {
        Metric::Chars => "characters",
        Metric::Tokens => "tokens",
    };
    // A pinned turn's size in the metric, and its characters when a document.
    let size = |e: &Event| {
        pinned_size(decl, e).map(|(role, chars, tokens)| {
            let counted = match metric {
                Metric::Chars => chars,
                Metric::Tokens => tokens,
            };
            (counted, if role == Role::Document { chars } else { 0 })
        })
    };
    let (mut total, mut docs) = held
        .iter()
        .filter_map(size)
        .fold((0u64, 0u64), |(t, d), (s, c)| {
            (t.saturating_add(s), d.saturating_add(c))
        });
    for (i, e) in events.iter().enumerate() {
        let (Some((counted, doc)), Some(id)) = (size(e), e.turn_id()) else {
            continue;
        };
        total = total.saturating_add(counted);
        docs = docs.saturating_add(doc);
        let message = if total > bound {
            format!(
                "events[{i}] brings the pinned turns (never folded) to {total} {unit}, over the {bound} a context leaves them beside a summary and a turn"
            )
        } else if docs > decl.documents.budget_chars {
            format!(
                "events[{i}] brings the documents to {docs} characters, over documents.budgetChars ({})",
                decl.documents.budget_chars
            )
        } else {
            continue;
        };
        return Err(Error::new(Code::PinnedTooLarge, message).with_ids([id.to_owned()]));
    }
    Ok(())
}

/// A pinned turn the declaration admits: its role, characters and tokens
/// (as admission measures a message); `None` for any other event.
fn pinned_size(decl: &Declaration, e: &Event) -> Option<(Role, u64, u64)> {
    if !e.is_pinned() {
        return None;
    }
    let (role, admitted, (chars, tokens)) = match e {
        Event::Message(m) | Event::LateDelivery(m) => {
            let (chars, tokens, _) = admitted_size(m);
            (
                m.role,
                decl.admits(&m.source, m.author_agent.as_deref(), m.sensitive),
                (chars, tokens),
            )
        }
        Event::TurnMeta(t) => {
            let tokens = t
                .tokens
                .unwrap_or_else(|| crate::records::turn::estimate_tokens(t.chars));
            (
                t.role,
                decl.admits(&t.source, t.author_agent.as_deref(), t.sensitive),
                (t.chars, tokens),
            )
        }
        _ => return None,
    };
    admitted.then_some((role, chars, tokens))
}

/// Run one validation.
///
/// # Errors
/// The typed error of the failing check (see each module).
pub fn validate(req: &ValidateRequest) -> Result<ValidateResponse> {
    Ok(match req {
        ValidateRequest::Settle(s) => ValidateResponse::Settled {
            boundary: Box::new(settle(s)?),
        },
        ValidateRequest::Resolve(r) => ValidateResponse::Resolved(Box::new(resolve(r)?)),
        ValidateRequest::Declarations(p) => {
            ValidateResponse::Declarations(agree(&p.target, &p.compactor))
        }
        ValidateRequest::Stream(s) => ValidateResponse::Stream {
            decision: decide(s),
        },
        ValidateRequest::Failure(f) => ValidateResponse::Failure(classify(f)),
        ValidateRequest::Events(c) => {
            let content_hashes = check_events(c)?;
            ValidateResponse::Events {
                count: content_hashes.len() as u64,
                content_hashes,
            }
        }
    })
}
