//! `plan`: when to compact, and exactly what to freeze.
//!
//! The request carries the chain head (latest boundary and its covered
//! sequence) and only the turns after it, plus pinned turns, so the cost of a
//! plan does not grow with history. One outcome comes back: activate, skip,
//! compact, warm, paused or refuse. Refusals fail closed with a stable code;
//! nothing is ever split or silently truncated.

use foldline_derive::{Decode, Encode};
use serde::Serialize;

use crate::error::{self, Code, Error, Result};
use crate::history::group::{self, Unit};
use crate::history::reconstruct::{given_or, Reconstruction};
use crate::history::standing;
use crate::ops::member::seams;
use crate::ops::member::settings::Availability;
use crate::records::amendment::Amendment;
use crate::records::boundary::{ChainHead, Sizes};
use crate::records::declaration::Declaration;
use crate::records::event::{check_route, Event, TriggerKind};
use crate::records::frontier::Frontier;
use crate::records::packet::Packet;
use crate::records::turn::{estimate_tokens, Route, Turn};
use crate::render::budget::{turn_size, Metric, Thresholds};
use crate::render::compactor::Prior;
use crate::render::envelope;

mod fold;
mod warm;

pub use fold::newest_seq;
use fold::{compact, sizes_of};
pub use warm::warm_verdict;

/// Who asks for a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode, Default)]
#[serde(tag = "kind", rename_all = "camelCase", deny_unknown_fields)]
pub enum Trigger {
    /// A new message arrived; compact if the budget says so.
    #[default]
    Automatic,
    /// A member asked (`/compact`).
    #[serde(rename_all = "camelCase")]
    Manual {
        /// Who asks.
        actor: String,
        /// Whether an answer currently owns the conversation session.
        #[serde(default)]
        session_busy: bool,
    },
}

impl Trigger {
    /// The kind bound into packets and boundaries.
    pub fn kind(&self) -> TriggerKind {
        match self {
            Trigger::Automatic => TriggerKind::Automatic,
            Trigger::Manual { .. } => TriggerKind::Manual,
        }
    }
}

/// A plan request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlanRequest {
    /// The target declaration.
    pub declaration: Declaration,
    /// The conversation route.
    pub route: Route,
    /// Who owns the conversation (checked for manual requests).
    #[serde(default)]
    pub owner: Option<String>,
    /// The current activation frontier, if any.
    #[serde(default)]
    pub frontier: Option<Frontier>,
    /// The current chain head (from `validate` resolve), if any.
    #[serde(default)]
    pub head: Option<ChainHead>,
    /// The current covered-history amendment (from resolve), if any.
    #[serde(default)]
    pub amendment: Option<Amendment>,
    /// Pinned turns, turns after the covered sequence, and failure events.
    pub events: Vec<Event>,
    /// Automatic or manual.
    #[serde(default)]
    pub trigger: Trigger,
    /// A warm candidate prepared earlier, to check against current history.
    #[serde(default)]
    pub warm: Option<Packet>,
    /// A warm candidate for this chain head is already held (or none is
    /// wanted): between the thresholds the plan answers `warm` without
    /// building another (`packet: null`), which is most of a message's cost
    /// there.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub warm_held: bool,
    /// `resolve`'s `carried`: the retired epoch's summary an upgrade starts
    /// from (bound into the frontier at activation; the previous summary of
    /// the epoch's first compaction).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carried: Option<ChainHead>,
    /// The deployment's member-compression availability (all off when
    /// absent). While its surface exists, room is kept beside the pinned
    /// turns for the largest fragments (the settings projection,
    /// plain-speak) any member's context may carry, as `select` reserves
    /// them, so history is folded rather than left out of a member's
    /// context unsummarized.
    #[serde(default, skip_serializing_if = "Availability::is_off")]
    pub compression: Availability,
}

/// Why automatic compaction is paused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase")]
pub enum PauseReason {
    /// The declaration is disabled: no eager compaction or warm candidates;
    /// safety compaction still runs at the budget's hard limit.
    Disabled,
    /// The circuit breaker opened after repeated failures.
    CircuitOpen,
}

/// A content-dark record of a skipped plan: sizes only, never text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SkipRecord {
    /// Unit.
    pub metric: Metric,
    /// Active context size.
    pub total: u64,
    /// Compaction threshold.
    pub trigger: u64,
    /// Warm threshold, in token mode.
    pub warm_at: Option<u64>,
    /// Pinned turns' size, with the open tool cycle's reasoning and the
    /// room kept for member-compression fragments.
    pub pinned: u64,
    /// Summary and amendment envelopes' size.
    pub envelopes: u64,
    /// Eligible turns after the covered sequence.
    pub eligible_turns: u64,
    /// Why a warm candidate was not prepared, when one was due.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warm_refused: Option<Code>,
    /// How far the compactor's progress advanced without inference: the
    /// newest source sequence this check looked at (a host keeps it as the
    /// conversation's progress watermark).
    #[serde(default)]
    pub checked_through_seq: u64,
}

/// Whether a warm candidate is still valid for current history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WarmVerdict {
    /// The candidate's packet id.
    pub packet_id: String,
    /// Valid: its frozen prefix is still a prefix of current history.
    pub valid: bool,
    /// Why not, when invalid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<WarmRefusal>,
}

/// Why a warm candidate can no longer be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "snake_case")]
pub enum WarmRefusal {
    /// Its id does not match its content.
    DivergentHash,
    /// Made under another declaration or ruleset.
    StaleDeclaration,
    /// Made on another chain head or frontier.
    StalePrevious,
    /// Made under another amendment.
    StaleAmendment,
    /// It froze more turns than are eligible now.
    NotPrefix,
    /// A turn it froze changed since.
    Diverged,
    /// It would split a tool call from its result.
    SplitsUnit,
}

/// The outcome of `plan`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(tag = "outcome", rename_all = "camelCase")]
pub enum PlanOutcome {
    /// Persist this frontier; compaction starts there.
    Activate {
        /// The new frontier document.
        frontier: Box<Frontier>,
    },
    /// Below the trigger: no model call.
    Skip {
        /// Sizes only.
        record: SkipRecord,
    },
    /// Compact now with this packet.
    Compact {
        /// The packet to persist, then send to the compactor.
        packet: Box<Packet>,
        /// Verdict on the warm candidate given, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        warm: Option<WarmVerdict>,
    },
    /// Between soft and eager: a candidate to prepare off the critical path.
    Warm {
        /// The candidate packet (`null` with `warmHeld`: the held one stands).
        packet: Option<Box<Packet>>,
    },
    /// Automatic compaction is paused.
    #[serde(rename_all = "camelCase")]
    Paused {
        /// Why.
        reason: PauseReason,
        /// Consecutive failed runs on the current head.
        consecutive_failures: u64,
        /// New turns still needed before the open breaker lets one automatic
        /// attempt through (half-open).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_in: Option<u64>,
    },
    /// Fail closed.
    Refuse {
        /// The reason.
        error: Error,
        /// Every violation, for `invalid_declaration`.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        errors: Vec<Error>,
    },
}

/// Decide what to do for one conversation now.
pub fn plan(req: &PlanRequest) -> PlanOutcome {
    plan_from(req, None)
}

/// [`plan`], with `req.events` already reconstructed when `recon` is given
/// (what `held` keeps between calls).
pub(crate) fn plan_from(req: &PlanRequest, recon: Option<&Reconstruction>) -> PlanOutcome {
    match plan_inner(req, recon) {
        Ok(o) => o,
        Err(error) => PlanOutcome::Refuse {
            error,
            errors: Vec::new(),
        },
    }
}

fn plan_inner(req: &PlanRequest, recon: Option<&Reconstruction>) -> Result<PlanOutcome> {
    let decl = &req.declaration;
    if let Some((error, errors)) = decl.refusal() {
        return Ok(PlanOutcome::Refuse { error, errors });
    }
    check_manual(req)?;
    check_route(&req.events, &req.route)?;
    let mut built = None;
    let recon = given_or(recon, &req.events, &mut built)?;
    let fingerprint = decl.fingerprint();
    let th = Thresholds::of(decl);
    let metric = th.metric;
    let pinned = standing::pinned(decl, &recon.turns);
    let pinned_size = sizes_of(&pinned)?;
    let room = seams::room(req.compression);
    let pinned_size = Sizes {
        chars: error::add(pinned_size.chars, room.chars)?,
        tokens: error::add(pinned_size.tokens, room.tokens)?,
    };

    // The frontier: reuse the current epoch's, or activate one.
    let frontier = match &req.frontier {
        Some(f) if f.in_epoch(&fingerprint) && f.route == req.route => {
            f.check()?;
            f
        }
        _ => return activate(req, recon, metric, &th, pick(metric, pinned_size)),
    };
    let covered = covered_by_head(req, frontier)?;
    let eligible = standing::eligible(decl, &recon.turns, frontier.start_seq, covered).admitted;
    let env_size = envelope_sizes(req)?;
    let turns_size = sizes_of(&eligible)?;
    // The open tool cycle's reasoning goes beside the tail and no
    // compaction folds it: what a provider requires of it (the last step's)
    // counts with the pinned turns, as `select` holds it back, so a long
    // thinking loop folds older turns rather than leaving them out
    // unsummarized; the earlier steps' go only when there is room.
    let reasoning = crate::render::reasoning::open_cycle(None, &eligible).last_step;
    let pinned_size = Sizes {
        chars: error::add(pinned_size.chars, reasoning)?,
        tokens: error::add(pinned_size.tokens, nonzero_estimate(reasoning))?,
    };
    let before = Sizes {
        chars: error::sum([pinned_size.chars, env_size.chars, turns_size.chars])?,
        tokens: error::sum([pinned_size.tokens, env_size.tokens, turns_size.tokens])?,
    };
    let ctx = Planning {
        req,
        frontier,
        eligible: &eligible,
        pinned: &pinned,
        pinned_size,
        before,
        metric,
        th,
        fingerprint,
    };
    if req.trigger == Trigger::Automatic {
        if let Some(early) = automatic(&ctx, recon, env_size) {
            return Ok(early);
        }
    }
    let packet = compact(&ctx)?;
    let warm = req
        .warm
        .as_ref()
        .map(|w| warm_verdict(w, &packet, &eligible));
    Ok(PlanOutcome::Compact {
        packet: Box::new(packet),
        warm,
    })
}

/// A manual request comes from the conversation's owner, and not while an
/// answer owns the session.
fn check_manual(req: &PlanRequest) -> Result<()> {
    let Trigger::Manual {
        actor,
        session_busy,
    } = &req.trigger
    else {
        return Ok(());
    };
    if req.owner.as_deref() != Some(actor.as_str()) {
        return Err(Error::new(
            Code::NotOwner,
            "only the conversation's owner may request compaction",
        )
        .with_ids([actor.clone()]));
    }
    if *session_busy {
        return Err(Error::new(
            Code::SessionBusy,
            "an answer owns the conversation session; try again when it finishes",
        ));
    }
    Ok(())
}

/// The sequence the chain head covers through (its frontier must be this
/// one), with the amendment checked.
fn covered_by_head(req: &PlanRequest, frontier: &Frontier) -> Result<Option<u64>> {
    let covered = match &req.head {
        Some(h) if h.frontier_id != frontier.id => {
            return Err(Error::new(
                Code::FrontierMismatch,
                "the chain head belongs to another activation frontier",
            )
            .with_ids([h.boundary_id.clone()]))
        }
        Some(h) => Some(h.covered_through_seq),
        None => None,
    };
    check_carried(frontier, req.head.as_ref(), req.carried.as_ref())?;
    if let Some(a) = &req.amendment {
        a.check()?;
    }
    Ok(covered)
}

/// Before an epoch's first boundary, a frontier that carries a retired
/// summary needs exactly that summary (`resolve`'s `carried`), and one that
/// does not takes none (`frontier_mismatch` otherwise).
pub(crate) fn check_carried(
    frontier: &Frontier,
    head: Option<&ChainHead>,
    carried: Option<&ChainHead>,
) -> Result<()> {
    if head.is_some() {
        return Ok(());
    }
    let bound = frontier.carried.as_ref();
    let matches = match (bound, carried) {
        (None, None) => true,
        (Some(b), Some(c)) => b.boundary_id == c.boundary_id && b.boundary_hash == c.boundary_hash,
        _ => false,
    };
    if matches {
        return Ok(());
    }
    Err(Error::new(
        Code::FrontierMismatch,
        "the carried summary is not the one the activation frontier binds (pass resolve's carried)",
    )
    .with_ids(bound.map(|b| b.boundary_id.clone())))
}

/// The summary the context carries now: the chain head's, else (the
/// epoch's first compaction after an upgrade) the carried one.
fn prior(req: &PlanRequest) -> Prior<'_> {
    match (&req.head, &req.carried) {
        (Some(h), _) => Prior::Previous(h),
        (None, Some(c)) => Prior::Carried(c),
        (None, None) => Prior::Nothing,
    }
}

/// The summary and amendment envelopes the context carries now.
fn envelope_sizes(req: &PlanRequest) -> Result<Sizes> {
    let summary = match prior(req) {
        Prior::Previous(h) | Prior::Carried(h) => envelope::summary_chars(&h.summary),
        Prior::Nothing => 0,
    };
    let amendment = req.amendment.as_ref().map(|a| a.chars).unwrap_or(0);
    Ok(Sizes {
        chars: error::add(summary, amendment)?,
        tokens: error::add(nonzero_estimate(summary), nonzero_estimate(amendment))?,
    })
}

/// An automatic plan's answer before compaction is due: paused (the
/// circuit breaker, or a disabled declaration below the hard limit), skip
/// (below the soft threshold), warm (between soft and eager: a candidate).
/// `None`: compaction is due.
fn automatic(ctx: &Planning<'_>, recon: &Reconstruction, env_size: Sizes) -> Option<PlanOutcome> {
    let (decl, th, metric) = (&ctx.req.declaration, &ctx.th, ctx.metric);
    let total = pick(metric, ctx.before);
    let skip = |warm_refused: Option<Code>| PlanOutcome::Skip {
        record: SkipRecord {
            metric,
            total,
            trigger: th.trigger,
            warm_at: th.warm_at,
            pinned: pick(metric, ctx.pinned_size),
            envelopes: pick(metric, env_size),
            eligible_turns: ctx.eligible.len() as u64,
            warm_refused,
            checked_through_seq: recon.turns.last().map_or(0, |t| t.source_seq),
        },
    };
    // The breaker pauses eager compaction only: at the hard limit (in
    // character mode, the trigger) every message attempts safety
    // compaction (seed 002: compaction is mandatory).
    if total < th.limit {
        if let Some(paused) = breaker(decl, recon, ctx.req.head.as_ref()) {
            return Some(paused);
        }
    }
    if !decl.enabled {
        // Safety compaction cannot be disabled (seed 002): a disabled
        // declaration only gives up eager compaction and warm candidates.
        return (total < th.limit).then_some(PlanOutcome::Paused {
            reason: PauseReason::Disabled,
            consecutive_failures: 0,
            retry_in: None,
        });
    }
    if total < th.warm_at.unwrap_or(th.trigger).min(th.trigger) {
        return Some(skip(None));
    }
    if total < th.trigger && ctx.req.warm_held {
        return Some(PlanOutcome::Warm { packet: None });
    }
    if total < th.trigger {
        return Some(match compact(ctx) {
            Ok(p) => PlanOutcome::Warm {
                packet: Some(Box::new(p)),
            },
            Err(e) => skip(Some(e.code)),
        });
    }
    None
}

/// The circuit breaker: automatic plans below the hard limit pause after
/// `maxConsecutiveFailures` failed runs on the current chain head, and
/// half-open once `breakerRetryAfter` new turns have arrived since the last
/// failure (one more attempt; a failure reopens it). A new head (any
/// boundary, e.g. from a manual `/compact`, which the breaker never blocks)
/// closes it.
fn breaker(
    decl: &Declaration,
    recon: &Reconstruction,
    head: Option<&ChainHead>,
) -> Option<PlanOutcome> {
    let head_id = head.map(|h| h.boundary_id.as_str());
    let on_head = recon
        .failures
        .iter()
        .filter(|f| f.previous_boundary_id.as_deref() == head_id);
    let failures = on_head.clone().count() as u64;
    if failures < decl.max_consecutive_failures {
        return None;
    }
    let last = on_head.map(|f| f.head_seq).max().unwrap_or(0);
    let newer = recon
        .turns
        .iter()
        .filter(|t| !t.pinned && t.source_seq > last)
        .count() as u64;
    (newer < decl.breaker_retry_after).then(|| PlanOutcome::Paused {
        reason: PauseReason::CircuitOpen,
        consecutive_failures: failures,
        retry_in: Some(decl.breaker_retry_after - newer),
    })
}

/// What every part of one plan reads: the request, its frontier, the
/// eligible and pinned turns with their sizes, the metric, the thresholds
/// and the declaration's fingerprint.
struct Planning<'a> {
    req: &'a PlanRequest,
    frontier: &'a Frontier,
    eligible: &'a [&'a Turn],
    pinned: &'a [&'a Turn],
    /// The pinned turns' size and the open tool cycle's reasoning's: what
    /// stays beside the tail whatever is folded.
    pinned_size: Sizes,
    before: Sizes,
    metric: Metric,
    th: Thresholds,
    fingerprint: String,
}

fn pick(metric: Metric, s: Sizes) -> u64 {
    match metric {
        Metric::Chars => s.chars,
        Metric::Tokens => s.tokens,
    }
}

fn nonzero_estimate(chars: u64) -> u64 {
    if chars == 0 {
        0
    } else {
        estimate_tokens(chars)
    }
}

fn unit_size(metric: Metric, turns: &[&Turn], u: &Unit) -> Result<u64> {
    error::sum(turns[u.start..u.end].iter().map(|t| turn_size(metric, t)))
}

fn activate(
    req: &PlanRequest,
    recon: &Reconstruction,
    metric: Metric,
    th: &Thresholds,
    pinned: u64,
) -> Result<PlanOutcome> {
    let decl = &req.declaration;
    let eligible = standing::eligible(decl, &recon.turns, 0, None).admitted;
    let Some(newest) = eligible.last() else {
        return Ok(PlanOutcome::Skip {
            record: SkipRecord {
                metric,
                total: pinned,
                trigger: th.trigger,
                warm_at: th.warm_at,
                pinned,
                envelopes: 0,
                eligible_turns: 0,
                warm_refused: None,
                checked_through_seq: recon.turns.last().map_or(0, |t| t.source_seq),
            },
        });
    };
    let first_seq = eligible[0].source_seq;
    let start_seq = match &req.carried {
        // After an upgrade the epoch starts where the retired summary ends:
        // what lies before is in that summary, what follows in the projection.
        Some(c) => c.covered_through_seq.saturating_add(1),
        None => {
            let units = group::units(&eligible);
            let mut acc = pinned;
            let mut start_seq = first_seq;
            for u in units.iter().rev() {
                acc = error::add(acc, unit_size(metric, &eligible, u)?)?;
                start_seq = eligible[u.start].source_seq;
                if acc >= th.trigger {
                    break;
                }
            }
            start_seq
        }
    };
    let frontier = Frontier::seal(
        decl,
        &req.route,
        (&newest.turn_id, newest.source_seq),
        start_seq,
        start_seq > first_seq,
        req.carried.as_ref().map(ChainHead::as_previous),
    );
    Ok(PlanOutcome::Activate {
        frontier: Box::new(frontier),
    })
}
