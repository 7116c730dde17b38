//! `select`: the model-bound context for one turn.
//!
//! In order: pinned turns, the summary envelope, the amendment envelope, the
//! exact tail after the covered sequence (with any pinned turn written after
//! the tail begins in its place), the current prompt. Pinned turns,
//! envelopes and prompt are reserved first (size and message slots); the tail
//! gets what is left, newest coherent units first, never splitting a tool pair.
//! Nothing disappears silently: every turn after the covered sequence is
//! either included or listed as omitted, with the reason.

use std::borrow::Cow;

use foldline_derive::{Decode, Encode};
use serde::Serialize;

use crate::canonical;
use crate::error::{self, Code, Error, Result};
use crate::history::group;
use crate::history::reconstruct::{given_or, reconstruct, Reconstruction};
use crate::history::speakers;
use crate::history::standing;
use crate::ops::member::seams::{self, MemberInput, MemberManifest, Shaped};
use crate::records::amendment::Amendment;
use crate::records::boundary::ChainHead;
use crate::records::declaration::Declaration;
use crate::records::event::Event;
use crate::records::frontier::Frontier;
use crate::records::turn::{parts_chars, Part, Role, Route, Turn};
use crate::render::budget::{text_size, turn_size, Metric, Thresholds};
use crate::render::envelope;
use crate::render::format::{self, Format, Outgoing};
pub use crate::render::format::{ContextMessage, Kind};
use crate::render::reasoning;

/// A select request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SelectRequest {
    /// The target declaration (budget and admission).
    pub declaration: Declaration,
    /// The conversation route.
    pub route: Route,
    /// The current frontier, if activated.
    #[serde(default)]
    pub frontier: Option<Frontier>,
    /// The chain head, if any.
    #[serde(default)]
    pub head: Option<ChainHead>,
    /// The amendment, if any.
    #[serde(default)]
    pub amendment: Option<Amendment>,
    /// Pinned turns and turns after the covered sequence.
    pub events: Vec<Event>,
    /// The current prompt, when it is not yet in the journal.
    #[serde(default)]
    pub prompt: Option<Vec<Part>>,
    /// Who wrote the prompt, in a shared room: it is sent with the member's
    /// label, as a stored turn of theirs would be, once the user turns in
    /// view and the prompt come from more than one member
    /// (history/speakers.rs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_sender: Option<String>,
    /// Output format.
    #[serde(default)]
    pub format: Format,
    /// Budget override in the declaration's metric (default: the declaration's limit).
    #[serde(default)]
    pub limit: Option<u64>,
    /// Whether to render messages (false: the manifest only, for hosts that
    /// slice their own arrays).
    #[serde(default = "yes")]
    pub render: bool,
    /// The member's compression state, captured when the run started: with
    /// it, the member's opt-ins shape the model-bound copy (prompt trim,
    /// `run_code` result compression, the plain-speak fragment), the
    /// settings projection follows the pinned turns, and a settings question
    /// gets [`Selection::answer`]. Without it, nothing changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member: Option<MemberInput>,
    /// `resolve`'s `carried`: after an upgrade, until the new epoch's first
    /// boundary, the retired summary the frontier carries over is the
    /// context's summary envelope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carried: Option<ChainHead>,
}
fn yes() -> bool {
    true
}

/// Why a turn after the covered sequence is not in the context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase")]
pub enum OmitReason {
    /// It did not fit what was left of the budget.
    Budget,
    /// The declaration does not admit it (source, agent, privacy).
    NotAdmitted,
}

/// An omitted turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Omitted {
    /// Turn id.
    pub turn_id: String,
    /// Why.
    pub reason: OmitReason,
}

/// Sizes of the parts of the context in the metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Encode, Decode, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContextSizes {
    /// Pinned turns.
    pub pinned: u64,
    /// Summary envelope.
    pub summary: u64,
    /// Amendment envelope.
    pub amendment: u64,
    /// Exact tail.
    pub tail: u64,
    /// Prompt.
    pub prompt: u64,
    /// The member's system fragments (plain-speak, the settings projection).
    #[serde(default, skip_serializing_if = "crate::ops::select::is_zero")]
    pub member: u64,
    /// The open tool cycle's reasoning the format is sent
    /// (`render/reasoning.rs`), measured as its blocks' JSON; no turn
    /// counts it.
    #[serde(default, skip_serializing_if = "crate::ops::select::is_zero")]
    pub reasoning: u64,
    /// Total.
    pub total: u64,
}

/// The private manifest: what was included, with hashes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Manifest {
    /// Unit.
    pub metric: Metric,
    /// Budget.
    pub limit: u64,
    /// Sizes.
    pub sizes: ContextSizes,
    /// Boundary id, when a summary is included.
    pub boundary_id: Option<String>,
    /// Boundary hash.
    pub boundary_hash: Option<String>,
    /// Amendment hash, when an amendment is included.
    pub amendment_hash: Option<String>,
    /// Pinned turn ids included.
    pub pinned: Vec<String>,
    /// Tail turn ids included, in order.
    pub included: Vec<String>,
    /// Turns after the covered sequence left out, with reasons.
    pub omitted: Vec<Omitted>,
    /// How many admitted turns after the summary's coverage were left out
    /// for lack of room: no summary covers them, so the model does not see
    /// them at all. A last resort (compaction is behind: failing, paused or
    /// refused); a host should alert on anything but zero.
    #[serde(default, skip_serializing_if = "crate::ops::select::is_zero")]
    pub uncovered_omitted: u64,
    /// How many assistant turns of the open tool cycle before its last step
    /// carry reasoning this context leaves out for lack of room: the whole
    /// cycle's did not fit beside every turn no summary covers, so only the
    /// last step's goes, which is all a provider requires
    /// (`render/reasoning.rs`).
    #[serde(default, skip_serializing_if = "crate::ops::select::is_zero")]
    pub reasoning_left_out: u64,
    /// Messages in the context.
    pub message_count: u64,
    /// Merkle-style fold over each message's kind, role and content hash.
    pub rendered_hash: String,
    /// What member compression did (with a member state): the effective
    /// state and one measurement per pass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member: Option<MemberManifest>,
    /// What lies before the activation frontier, when anything does: those
    /// turns are not listed one by one, and say here why they are not in
    /// the context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_frontier: Option<BeforeFrontier>,
}

/// The turns before the activation frontier.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BeforeFrontier {
    /// They are the source sequences up to this one.
    pub through_seq: u64,
    /// Why they are not in the context.
    pub reason: BeforeReason,
    /// The retired boundary whose summary covers them (`carried`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boundary_id: Option<String>,
}

/// Why turns before the frontier are not in the context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase")]
pub enum BeforeReason {
    /// An earlier policy's summary covers them (an upgrade carried it over;
    /// in the context until the new epoch's first boundary, then folded
    /// into it).
    Carried,
    /// Compaction was activated on an established conversation: older
    /// history was left outside, by design, and no summary covers it.
    Established,
}

/// The selected context.
#[derive(Debug, Clone, PartialEq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Selection {
    /// Rendered messages in the requested format (absent with `render: false`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages: Option<crate::render::format::Rendered>,
    /// The manifest.
    pub manifest: Manifest,
    /// The server-rendered answer when the member's newest message asks
    /// about the compression settings: deliver it instead of the model's
    /// (no model call is needed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
}

/// Select the model-bound context.
///
/// # Errors
/// `over_budget` when pinned turns, envelopes and prompt alone exceed the
/// budget; `wrong_route`, `conflicting_turn`, `frontier_mismatch`,
/// `divergent_hash` for inconsistent input.
pub fn select(req: &SelectRequest) -> Result<Selection> {
    select_from(req, None)
}

/// [`select`], with `req.events` already reconstructed when `recon` is
/// given (what `held` keeps between calls).
pub(crate) fn select_from(
    req: &SelectRequest,
    recon: Option<&Reconstruction>,
) -> Result<Selection> {
    let decl = &req.declaration;
    check_inputs(req)?;
    let mut built = None;
    let recon = given_or(recon, &req.events, &mut built)?;
    let mut joined = None;
    let (turns, prompt_label) = with_prompt_sender(&recon.turns, req, &mut joined)?;
    let th = Thresholds::of(decl);
    let metric = th.metric;
    let limit = req.limit.unwrap_or(th.limit);
    let start = req.frontier.as_ref().map(|f| f.start_seq).unwrap_or(0);
    let covered = req.head.as_ref().map(|h| h.covered_through_seq);

    let pinned = standing::pinned(decl, turns);
    let eligible = standing::eligible(decl, turns, start, covered);
    let candidates = eligible.admitted;
    let mut omitted = omissions(&eligible.refused, OmitReason::NotAdmitted);

    // The summary in force: the chain head's, else the one an upgrade carried.
    let summary_head = req.head.as_ref().or(req.carried.as_ref());
    let summary_text = summary_head.map(|h| envelope::summary_text(&h.summary));
    let amendment_text = req.amendment.as_ref().map(envelope::amendment_text);
    let fragments = req
        .member
        .as_ref()
        .map(seams::fragments)
        .unwrap_or_default();
    let mut sizes = ContextSizes {
        pinned: error::sum(pinned.iter().map(|t| turn_size(metric, t)))?,
        summary: envelope_size(metric, summary_text.as_deref()),
        amendment: envelope_size(metric, amendment_text.as_deref()),
        tail: 0,
        prompt: req
            .prompt
            .as_deref()
            .map(|p| {
                // A label (and its escapes) counts as many tokens as characters.
                let label = prompt_label.map_or(0, |s| speakers::attributed_size(s, p).0);
                text_size(metric, parts_chars(p)).saturating_add(label)
            })
            .unwrap_or(0),
        member: seams::fragments_size(metric, &fragments),
        reasoning: 0,
        total: 0,
    };
    // The open cycle's reasoning: the whole cycle's when it fits beside
    // every uncovered turn, else the last step's alone (render/reasoning.rs).
    let cycle = match req.prompt {
        Some(_) => reasoning::Cycle::default(),
        None => reasoning::open_cycle(Some(req.format), &candidates),
    };
    let reasoning_size = |chars: u64| match chars {
        0 => 0,
        n => text_size(metric, n),
    };
    let base = error::sum([
        sizes.pinned,
        sizes.summary,
        sizes.amendment,
        sizes.prompt,
        sizes.member,
    ])?;
    // The last step's is required: the tail fits beside it. The whole
    // cycle's goes when every turn fits beside that too.
    sizes.reasoning = reasoning_size(cycle.last_step);
    let reserved = error::add(base, sizes.reasoning)?;
    if reserved > limit {
        return Err(over_budget(reserved, limit, metric, sizes.reasoning > 0));
    }
    let (first_included, used) = fit_tail(&candidates, limit - reserved, metric)?;
    let whole = reasoning_size(cycle.whole);
    let how = match first_included == 0 && base.saturating_add(whole).saturating_add(used) <= limit
    {
        true => {
            sizes.reasoning = whole;
            reasoning::Sent::Whole
        }
        false => reasoning::Sent::LastStep,
    };
    let reserved = base + sizes.reasoning;
    omitted.append(&mut omissions(
        &candidates[..first_included],
        OmitReason::Budget,
    ));
    let tail = &candidates[first_included..];
    if req.render {
        crate::records::turn::require_content(&pinned, "be rendered")?;
        crate::records::turn::require_content(tail, "be rendered (or ask with render: false)")?;
    }
    sizes.tail = used;
    sizes.total = reserved + used;

    let mut shaped = req
        .member
        .as_ref()
        .map(|m| seams::shape(m, tail, req.prompt.as_deref()))
        .unwrap_or_default();
    let (messages, fold) = assemble(
        &pinned,
        Envelopes {
            fragments,
            summary: summary_text,
            amendment: amendment_text,
        },
        tail,
        req.prompt.as_ref().map(|p| (p, prompt_label)),
        &mut shaped,
    );
    let manifest = Manifest {
        metric,
        limit,
        sizes,
        boundary_id: summary_head.map(|h| h.boundary_id.clone()),
        boundary_hash: summary_head.map(|h| h.boundary_hash.clone()),
        amendment_hash: req.amendment.as_ref().map(|a| a.hash.clone()),
        pinned: pinned.iter().map(|t| t.turn_id.clone()).collect(),
        included: tail.iter().map(|t| t.turn_id.clone()).collect(),
        uncovered_omitted: first_included as u64,
        omitted,
        reasoning_left_out: match how {
            reasoning::Sent::Whole => 0,
            reasoning::Sent::LastStep => cycle.earlier,
        },
        message_count: messages.len() as u64,
        rendered_hash: canonical::fold_hashes(fold.iter().map(String::as_str)),
        member: shaped.manifest,
        before_frontier: req.frontier.as_ref().and_then(|f| before_frontier(f, req)),
    };
    let messages = if req.render {
        Some(format::render_outgoing(req.format, messages, how))
    } else {
        None
    };
    Ok(Selection {
        messages,
        manifest,
        answer: shaped.answer,
    })
}

/// The turns in view and, when the prompt is sent with its sender's label,
/// that sender: a prompt of a new voice beside one member's turns makes
/// them a room's, attributed on a reconstruction of their own (`joined`:
/// the one given may be held between calls).
fn with_prompt_sender<'a>(
    turns: &'a [Turn],
    req: &'a SelectRequest,
    joined: &'a mut Option<Reconstruction>,
) -> Result<(&'a [Turn], Option<&'a str>)> {
    let Some(sender) = req.prompt.as_ref().and(req.prompt_sender.as_deref()) else {
        return Ok((turns, None));
    };
    Ok(match speakers::prompt_labeled(turns, sender) {
        Some(true) => (turns, Some(sender)),
        Some(false) => (turns, None),
        None => {
            let r = joined.insert(reconstruct(&req.events)?);
            speakers::label_all(&mut r.turns);
            (&r.turns, Some(sender))
        }
    })
}

/// The declaration, the route, the frontier, the head's frontier and the
/// amendment, checked before anything is selected.
fn check_inputs(req: &SelectRequest) -> Result<()> {
    if let Some((error, _)) = req.declaration.refusal() {
        return Err(error);
    }
    crate::records::event::check_route(&req.events, &req.route)?;
    if let Some(f) = &req.frontier {
        f.check()?;
    }
    if let (Some(h), Some(f)) = (&req.head, &req.frontier) {
        if h.frontier_id != f.id {
            return Err(Error::new(
                Code::FrontierMismatch,
                "the chain head belongs to another activation frontier",
            ));
        }
    }
    if let Some(f) = &req.frontier {
        crate::ops::plan::check_carried(f, req.head.as_ref(), req.carried.as_ref())?;
    }
    if let Some(a) = &req.amendment {
        a.check()?;
    }
    Ok(())
}

/// Why the turns before the frontier are not in the context (none when it
/// starts at the beginning).
fn before_frontier(f: &Frontier, req: &SelectRequest) -> Option<BeforeFrontier> {
    if f.start_seq == 0 || (f.carried.is_none() && !f.established) {
        return None;
    }
    Some(match &f.carried {
        Some(c) => BeforeFrontier {
            through_seq: f.start_seq - 1,
            reason: BeforeReason::Carried,
            boundary_id: req.head.is_none().then(|| c.boundary_id.clone()),
        },
        None => BeforeFrontier {
            through_seq: f.start_seq - 1,
            reason: BeforeReason::Established,
            boundary_id: None,
        },
    })
}

/// `over_budget`: what is held back before the exact tail exceeds the
/// budget.
fn over_budget(reserved: u64, limit: u64, metric: Metric, reasoning: bool) -> Error {
    Error::new(
        Code::OverBudget,
        format!(
            "pinned turns, envelopes and prompt{} need {reserved} of a budget of {limit} {}",
            if reasoning {
                " with the open tool cycle's reasoning"
            } else {
                ""
            },
            metric.as_str()
        ),
    )
}

pub(crate) fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn omissions(turns: &[&Turn], reason: OmitReason) -> Vec<Omitted> {
    turns
        .iter()
        .map(|t| Omitted {
            turn_id: t.turn_id.clone(),
            reason,
        })
        .collect()
}

fn envelope_size(metric: Metric, text: Option<&str>) -> u64 {
    text.map(|s| text_size(metric, envelope::chars(s)))
        .unwrap_or(0)
}

/// The exact tail: the newest coherent units (a tool call with its results
/// is one), contiguous, while they fit in `room`; the index of its first
/// turn and its size. Never a context without the member's newest turn:
/// when it alone does not fit, `tail_turn_too_large` (fail closed).
fn fit_tail(candidates: &[&Turn], room: u64, metric: Metric) -> Result<(usize, u64)> {
    let units = group::units(candidates);
    let mut first_included = candidates.len();
    let mut used = 0u64;
    for u in units.iter().rev() {
        let s = error::sum(
            candidates[u.start..u.end]
                .iter()
                .map(|t| turn_size(metric, t)),
        )?;
        match used.checked_add(s) {
            Some(n) if n <= room => {
                used = n;
                first_included = u.start;
            }
            _ => break,
        }
    }
    if let Some(last) = units.last() {
        if first_included == candidates.len() {
            let turns = &candidates[last.start..last.end];
            return Err(Error::new(
                Code::TailTurnTooLarge,
                format!(
                    "the latest turn(s) measure {} {}, over the {room} left for the exact tail; refusing to drop or truncate them",
                    error::sum(turns.iter().map(|t| turn_size(metric, t)))?,
                    metric.as_str()
                ),
            )
            .with_ids(turns.iter().map(|t| t.turn_id.clone())));
        }
    }
    Ok((first_included, used))
}

/// The texts foldline writes into the context itself.
struct Envelopes {
    /// The member's system fragments (after the leading pinned turns).
    fragments: Vec<String>,
    /// The summary envelope.
    summary: Option<String>,
    /// The amendment envelope.
    amendment: Option<String>,
}

/// The context in order — pinned turns, the member's system fragments, the
/// summary envelope, the amendment envelope, the exact tail, the prompt —
/// and the fold of their roles and hashes the manifest's `renderedHash` is
/// made of. Turns lend their content unless a member seam reshaped it; only
/// foldline's own form copies it.
fn assemble<'a>(
    pinned: &[&'a Turn],
    texts: Envelopes,
    tail: &[&'a Turn],
    prompt: Option<(&'a Vec<Part>, Option<&str>)>,
    shaped: &mut Shaped,
) -> (Vec<Outgoing<'a>>, Vec<String>) {
    let mut messages: Vec<Outgoing<'a>> =
        Vec::with_capacity(pinned.len() + tail.len() + 3 + texts.fragments.len());
    let mut fold: Vec<String> = Vec::with_capacity(messages.capacity());
    // A pinned turn written after the exact tail begins (a system message
    // in the middle of a conversation) keeps its place among the tail's
    // turns; the others lead the context.
    let in_place = |t: &Turn| tail.first().is_some_and(|first| t.key() > first.key());
    let push_pinned = |t: &'a Turn, messages: &mut Vec<Outgoing<'a>>, fold: &mut Vec<String>| {
        let (message, hash) = sent(Kind::Pinned, t, None);
        fold.push(format!("pinned:{}:{hash}", t.role.as_str()));
        messages.push(message);
    };
    for t in pinned.iter().filter(|t| !in_place(t)) {
        push_pinned(t, &mut messages, &mut fold);
    }
    for text in texts.fragments {
        fold.push(format!(
            "member:system:{}",
            canonical::sha256(text.as_bytes())
        ));
        messages.push(Outgoing {
            kind: Kind::Member,
            role: Role::System,
            turn_id: None,
            parts: Cow::Owned(vec![Part::Text { text }]),
        });
    }
    if let Some(text) = texts.summary {
        fold.push(format!(
            "summary:user:{}",
            canonical::sha256(text.as_bytes())
        ));
        messages.push(envelope_message(Kind::Summary, text));
    }
    if let Some(text) = texts.amendment {
        fold.push(format!(
            "amendment:user:{}",
            canonical::sha256(text.as_bytes())
        ));
        messages.push(envelope_message(Kind::Amendment, text));
    }
    let mut later = pinned.iter().filter(|t| in_place(t)).peekable();
    for (i, t) in tail.iter().enumerate() {
        while let Some(p) = later.next_if(|p| p.key() < t.key()) {
            push_pinned(p, &mut messages, &mut fold);
        }
        let (message, hash) = sent(Kind::Turn, t, shaped.tail.get_mut(i).and_then(Option::take));
        fold.push(format!("turn:{}:{hash}", t.role.as_str()));
        messages.push(message);
    }
    for p in later {
        push_pinned(p, &mut messages, &mut fold);
    }
    if let Some((p, sender)) = prompt {
        let parts: Cow<'a, [Part]> = match shaped.prompt.take() {
            Some(trimmed) => Cow::Owned(trimmed),
            None => Cow::Borrowed(p.as_slice()),
        };
        let parts = match sender {
            Some(s) => Cow::Owned(speakers::labeled(s, &parts)),
            None => parts,
        };
        fold.push(format!(
            "prompt:user:{}",
            crate::records::turn::content_hash(&parts)
        ));
        messages.push(Outgoing {
            kind: Kind::Prompt,
            role: Role::User,
            turn_id: None,
            parts,
        });
    }
    (messages, fold)
}

fn turn_message<'a>(kind: Kind, t: &'a Turn) -> Outgoing<'a> {
    Outgoing {
        kind,
        role: t.role,
        turn_id: Some(&t.turn_id),
        parts: Cow::Borrowed(&t.parts),
    }
}

/// A turn as sent, with the role and hash its `renderedHash` entry folds:
/// its own parts, or `parts` when a member seam reshaped them; a room
/// member's turn names its sender after either (history/speakers.rs).
fn sent<'a>(kind: Kind, t: &'a Turn, parts: Option<Vec<Part>>) -> (Outgoing<'a>, Cow<'a, str>) {
    let parts = match (parts, t.attributed) {
        (Some(parts), true) => Some(speakers::labeled(&t.sender, &parts)),
        (None, true) => Some(speakers::labeled(&t.sender, &t.parts)),
        (parts, false) => parts,
    };
    match parts {
        Some(parts) => {
            let hash = Cow::Owned(crate::records::turn::content_hash(&parts));
            let message = Outgoing {
                parts: Cow::Owned(parts),
                ..turn_message(kind, t)
            };
            (message, hash)
        }
        None => (
            turn_message(kind, t),
            Cow::Borrowed(t.content_hash.as_str()),
        ),
    }
}

fn envelope_message(kind: Kind, text: String) -> Outgoing<'static> {
    Outgoing {
        kind,
        role: Role::User,
        turn_id: None,
        parts: Cow::Owned(vec![Part::Text { text }]),
    }
}
