//! `plan`: when to compact, and exactly what to freeze.
//!
//! The request carries the chain head (latest boundary and its covered
//! sequence) and only the turns after it, plus pinned turns, so the cost of a
//! plan does not grow with history. One outcome comes back: activate, skip,
//! compact, warm, paused or refuse. Refusals fail closed with a stable code;
//! nothing is ever split or silently truncated.

use foldline_derive::{Decode, Encode};
use serde::Serialize;

use crate::amendment::Amendment;
use crate::boundary::{Backlog, ChainHead, InputEvidence, InputTurn, Sizes, Stats};
use crate::budget::{turn_size, Metric, Thresholds, SUMMARY_MIN_CHARS};
use crate::canonical;
use crate::compactor::{self, Prior};
use crate::declaration::{Budget, Declaration, SummaryBounds};
use crate::envelope;
use crate::error::{self, Code, Error, Result};
use crate::event::{Event, TriggerKind};
use crate::frontier::Frontier;
use crate::group::{self, Unit};
use crate::packet::{CompactorMessage, Packet};
use crate::reconstruct::{given_or, Reconstruction};
use crate::standing;
use crate::turn::{estimate_tokens, Route, Turn};

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
    /// Pinned turns' size.
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
    let before = Sizes {
        chars: error::sum([pinned_size.chars, env_size.chars, turns_size.chars])?,
        tokens: error::sum([pinned_size.tokens, env_size.tokens, turns_size.tokens])?,
    };
    let ctx = Ctx {
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
fn automatic(ctx: &Ctx<'_>, recon: &Reconstruction, env_size: Sizes) -> Option<PlanOutcome> {
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

struct Ctx<'a> {
    req: &'a PlanRequest,
    frontier: &'a Frontier,
    eligible: &'a [&'a Turn],
    pinned: &'a [&'a Turn],
    pinned_size: Sizes,
    before: Sizes,
    metric: Metric,
    th: Thresholds,
    fingerprint: String,
}

/// Every message of the request must be on its route.
pub(crate) fn check_route(events: &[Event], route: &Route) -> Result<()> {
    for ev in events {
        let off = match ev {
            Event::Message(m) | Event::LateDelivery(m) => {
                (!m.on_route(route)).then_some(&m.turn_id)
            }
            Event::TurnMeta(t) => (!t.on_route(route)).then_some(&t.turn_id),
            _ => None,
        };
        if let Some(id) = off {
            return Err(Error::new(
                Code::WrongRoute,
                "a turn belongs to another conversation or chat than the request's route",
            )
            .with_ids([id.clone()]));
        }
    }
    Ok(())
}

/// Fail with `needs_content` when any of `turns` is known only by metadata.
pub(crate) fn require_content(turns: &[&Turn], what: &str) -> Result<()> {
    let missing: Vec<String> = turns
        .iter()
        .filter(|t| t.metadata_only)
        .map(|t| t.turn_id.clone())
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(Error::new(
        Code::NeedsContent,
        format!(
            "{} turn(s) given only as metadata must come with their content to {what}",
            missing.len()
        ),
    )
    .with_ids(missing))
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

/// Characters and tokens of some turns.
fn sizes_of(turns: &[&Turn]) -> Result<Sizes> {
    Ok(Sizes {
        chars: error::sum(turns.iter().map(|t| t.chars))?,
        tokens: error::sum(turns.iter().map(|t| t.tokens))?,
    })
}

fn summary_reserve(bounds: &SummaryBounds) -> Sizes {
    let (chars, tokens) = crate::budget::summary_reserve(bounds);
    Sizes { chars, tokens }
}

fn compact(ctx: &Ctx<'_>) -> Result<Packet> {
    let metric = ctx.metric;
    let eligible = ctx.eligible;
    let units = group::units(eligible);
    let (bounds, reserve) = summary_room(ctx, &units)?;
    let tail_target = ctx
        .th
        .tail_target(pick(metric, ctx.pinned_size), pick(metric, reserve));
    let room = pick(metric, ctx.pinned_size).saturating_add(pick(metric, reserve));
    let alone = ctx.th.limit.saturating_sub(room);
    let begins = |start: usize| units.get(start).map(|u| u.start).unwrap_or(eligible.len());
    let mut tail_start = tail_start(ctx, &units, tail_target, alone)?;
    // A member's `/compact` folds whatever earlier context there is: when
    // the usual exact tail would hold all of it, or leave a summary no
    // smaller than what it replaces, the tail shrinks to the newest unit.
    if matches!(ctx.req.trigger, Trigger::Manual { .. }) {
        let older = sizes_of(&eligible[..begins(tail_start)])?;
        if begins(tail_start) == 0 || pick(metric, older) <= pick(metric, reserve) {
            tail_start = self::tail_start(ctx, &units, 0, alone)?;
        }
    }
    let tail_begins = begins(tail_start);
    if tail_begins == 0 {
        return Err(Error::new(
            Code::NothingToFold,
            "every eligible turn fits the exact tail; there is nothing older to fold",
        ));
    }
    require_content(&eligible[..tail_begins], "be frozen into a packet")?;
    require_content(ctx.pinned, "render the compactor's documents")?;
    let Folded {
        units: folded_units,
        messages,
        rendered_chars,
        input_tokens,
    } = fold(ctx, &units[..tail_start], &bounds)?;
    let frozen_end = units[folded_units - 1].end;
    let frozen = &eligible[..frozen_end];
    let backlog = &eligible[frozen_end..tail_begins];
    let tail = &eligible[tail_begins..];
    let frozen_groups: u64 = units[..folded_units].iter().map(|u| u.groups).sum();
    let frozen_size = sizes_of(frozen)?;
    let backlog_size = sizes_of(backlog)?;
    let tail_size = sizes_of(tail)?;
    let after = Sizes {
        chars: error::sum([
            ctx.pinned_size.chars,
            reserve.chars,
            backlog_size.chars,
            tail_size.chars,
        ])?,
        tokens: error::sum([
            ctx.pinned_size.tokens,
            reserve.tokens,
            backlog_size.tokens,
            tail_size.tokens,
        ])?,
    };
    if pick(metric, after) >= pick(metric, ctx.before) {
        // For a member's `/compact` this is the seed's "nothing earlier to
        // fold": what is earlier is smaller than any summary of it.
        let manual = matches!(ctx.req.trigger, Trigger::Manual { .. });
        return Err(Error::new(
            if manual {
                Code::NothingToFold
            } else {
                Code::NotSmaller
            },
            format!(
                "compaction would leave {} of {} {}: the projection would not shrink",
                pick(metric, after),
                pick(metric, ctx.before),
                metric.as_str()
            ),
        ));
    }
    let input = InputEvidence {
        turn_count: frozen.len() as u64,
        chars: frozen_size.chars,
        tokens: input_tokens,
        source_count: frozen_groups,
        turn_ids_hash: canonical::hash(
            &frozen
                .iter()
                .map(|t| t.turn_id.as_str())
                .collect::<Vec<_>>(),
        ),
        rendered_hash: canonical::hash(&messages),
        prompt_hash: canonical::sha256(messages[0].content.as_bytes()),
        rendered_chars,
        turns: frozen
            .iter()
            .map(|t| InputTurn {
                turn_id: t.turn_id.clone(),
                source_seq: t.source_seq,
                role: t.role,
                content_hash: t.content_hash.clone(),
            })
            .collect(),
    };
    let stats = Stats {
        metric,
        before: ctx.before,
        pinned: ctx.pinned_size,
        retained_tail: tail_size,
        retained_tail_turns: tail.len() as u64,
        summary: reserve,
        after,
        oversized_tail: pick(metric, tail_size) > tail_target,
        backlog: (!backlog.is_empty()).then_some(Backlog {
            turns: backlog.len() as u64,
            size: backlog_size,
        }),
    };
    Ok(packet(
        ctx,
        frozen[frozen.len() - 1],
        bounds,
        input,
        stats,
        messages,
    ))
}

/// What one compaction folds: the oldest units of the history before the
/// tail, with the compactor messages rendered for them.
struct Folded {
    /// How many of the oldest units are frozen.
    units: usize,
    messages: Vec<CompactorMessage>,
    rendered_chars: u64,
    input_tokens: u64,
}

/// Backlogs fold in steps: the whole history before the exact tail
/// (`before_tail`, oldest first) when one compaction may take it, else the
/// oldest coherent units that fit the prefix bounds (turns, rendered
/// characters, and in token mode the compactor's window with the summary's
/// headroom) — never a split unit. What is left is the packet's backlog,
/// which the next compaction folds. A single oldest unit over the bounds is
/// `prefix_over_bounds` (nothing could ever take it).
fn fold(ctx: &Ctx<'_>, before_tail: &[Unit], bounds: &SummaryBounds) -> Result<Folded> {
    let summary_tokens = bounds.max_tokens;
    let all = before_tail.len();
    match render_fold(ctx, before_tail, all, bounds) {
        Err(e) if e.code == Code::PrefixOverBounds && all > 1 => {}
        done => return done,
    }
    // Too large for one compaction: walk the units oldest first with the
    // rendered size estimated from below-the-line sums (the transcript's
    // framing per turn, plus the fixed part measured on the oldest unit and
    // room for a longer header), then render what fits and check it for real.
    let decl = &ctx.req.declaration;
    let eligible = ctx.eligible;
    // The oldest unit alone over the bounds: nothing could ever take it.
    let one = render_fold(ctx, before_tail, 1, bounds).map_err(|e| {
        if e.ids.is_empty() {
            let unit = &eligible[..before_tail[0].end];
            e.with_ids(unit.iter().map(|t| t.turn_id.clone()))
        } else {
            e
        }
    })?;
    let line = |t: &Turn| envelope::chars(&envelope::transcript_line(t)).saturating_add(1);
    let first_lines = error::sum(eligible[..before_tail[0].end].iter().map(|t| line(t)))?;
    let fixed = one
        .rendered_chars
        .saturating_sub(first_lines)
        .saturating_add(HEADER_SLACK_CHARS);
    let (mut turns, mut lines, mut chars, mut tokens) = (0u64, fixed, 0u64, 0u64);
    let mut fits = 0;
    for u in before_tail {
        for t in &eligible[u.start..u.end] {
            turns += 1;
            lines = error::add(lines, line(t))?;
            chars = error::add(chars, t.chars)?;
            tokens = error::add(tokens, t.tokens)?;
        }
        let input = error::add(tokens, estimate_tokens(lines.saturating_sub(chars)))?;
        let window_ok = match decl.budget {
            Budget::Tokens {
                window,
                safety_margin,
                ..
            } => error::sum([input, summary_tokens, safety_margin])? <= window,
            Budget::Chars { .. } => true,
        };
        if turns > decl.prefix_bounds.max_turns
            || lines > decl.prefix_bounds.max_chars
            || !window_ok
        {
            break;
        }
        fits += 1;
    }
    // The estimate is from above; should rendering still disagree, fold less.
    for n in (2..=fits).rev() {
        match render_fold(ctx, before_tail, n, bounds) {
            Err(e) if e.code == Code::PrefixOverBounds => continue,
            done => return done,
        }
    }
    Ok(one)
}

/// Room for the transcript header's longer source numbers when the fold's
/// size is estimated from its oldest unit (a `u64` has at most 20 digits).
const HEADER_SLACK_CHARS: u64 = 20;

/// The compactor messages for the oldest `n` units, checked against the
/// prefix bounds.
fn render_fold(
    ctx: &Ctx<'_>,
    before_tail: &[Unit],
    n: usize,
    bounds: &SummaryBounds,
) -> Result<Folded> {
    let decl = &ctx.req.declaration;
    let frozen = &ctx.eligible[..before_tail[n - 1].end];
    if frozen.len() as u64 > decl.prefix_bounds.max_turns {
        return Err(Error::new(
            Code::PrefixOverBounds,
            format!(
                "the frozen prefix has {} turns, over the bound of {}",
                frozen.len(),
                decl.prefix_bounds.max_turns
            ),
        ));
    }
    let messages = compactor::messages(
        decl,
        bounds.max_chars,
        ctx.pinned,
        prior(ctx.req),
        ctx.req.amendment.as_ref(),
        frozen,
    )?;
    let (rendered_chars, input_tokens) =
        check_rendered(decl, bounds.max_tokens, &messages, sizes_of(frozen)?)?;
    Ok(Folded {
        units: n,
        messages,
        rendered_chars,
        input_tokens,
    })
}

/// The summary bounds of this packet and their reserve: the
/// declaration's, or, when the newest unit would not fit the hard limit
/// beside them, bounds tightened to the room it leaves (at least
/// [`SUMMARY_MIN_CHARS`] characters): a long newest turn is kept whole and
/// the summary is made shorter, rather than the turn refused.
fn summary_room(ctx: &Ctx<'_>, units: &[Unit]) -> Result<(SummaryBounds, Sizes)> {
    let metric = ctx.metric;
    let bounds = ctx.req.declaration.summary_bounds();
    let reserve = summary_reserve(&bounds);
    let Some(last) = units.last() else {
        return Ok((bounds, reserve));
    };
    let newest = unit_size(metric, ctx.eligible, last)?;
    let room = ctx
        .th
        .limit
        .saturating_sub(pick(metric, ctx.pinned_size))
        .saturating_sub(newest);
    if room >= pick(metric, reserve) {
        return Ok((bounds, reserve));
    }
    let overhead = envelope::summary_overhead_chars();
    let (max_chars, max_tokens) = match metric {
        Metric::Chars => {
            let chars = room.saturating_sub(overhead);
            (chars, chars.div_ceil(2))
        }
        Metric::Tokens => {
            let tokens = room.saturating_sub(estimate_tokens(overhead));
            let chars = room
                .saturating_sub(4)
                .saturating_mul(4)
                .saturating_sub(overhead);
            (chars, tokens)
        }
    };
    if max_chars < SUMMARY_MIN_CHARS || max_tokens < SUMMARY_MIN_CHARS / 4 {
        // No summary could fit beside it: `tail_start` refuses it.
        return Ok((bounds, reserve));
    }
    let tight = SummaryBounds {
        max_chars: max_chars.min(bounds.max_chars),
        max_tokens: max_tokens.min(bounds.max_tokens),
        ..bounds
    };
    Ok((tight, summary_reserve(&tight)))
}

/// The first unit of the exact tail: the newest coherent units,
/// contiguous, while they fit the tail target. A newest unit over the
/// target that still fits `alone` (the hard limit beside the pinned turns
/// and the summary's reserve) is kept as the whole tail, everything before
/// it folded: a long answer never costs the model its recent history
/// (docs/rules.md, "a long newest turn"). Over `alone` too it is
/// `tail_turn_too_large` (never split or truncated).
fn tail_start(ctx: &Ctx<'_>, units: &[Unit], tail_target: u64, alone: u64) -> Result<usize> {
    let (metric, eligible) = (ctx.metric, ctx.eligible);
    let mut start = units.len();
    let mut acc = 0u64;
    for (i, u) in units.iter().enumerate().rev() {
        let s = unit_size(metric, eligible, u)?;
        match acc.checked_add(s) {
            Some(n) if n <= tail_target => {
                acc = n;
                start = i;
            }
            _ => break,
        }
    }
    if let Some(last) = units.last() {
        let size = unit_size(metric, eligible, last)?;
        if start == units.len() && size <= alone {
            return Ok(units.len() - 1);
        }
        if start == units.len() {
            return Err(Error::new(
                Code::TailTurnTooLarge,
                format!(
                    "the latest turn(s) measure {size} {}, over the {alone} the hard limit leaves beside the pinned turns and the summary; refusing to split or truncate",
                    metric.as_str()
                ),
            )
            .with_ids(eligible[last.start..last.end].iter().map(|t| t.turn_id.clone())));
        }
    }
    Ok(start)
}

/// The rendered compactor input within the declaration's prefix bounds
/// (rendered characters, and in token mode the compactor's window with the
/// summary's headroom): its rendered characters and input tokens.
fn check_rendered(
    decl: &Declaration,
    summary_tokens: u64,
    messages: &[CompactorMessage],
    frozen_size: Sizes,
) -> Result<(u64, u64)> {
    let rendered_chars = error::sum(messages.iter().map(|m| envelope::chars(&m.content)))?;
    if rendered_chars > decl.prefix_bounds.max_chars {
        return Err(Error::new(
            Code::PrefixOverBounds,
            format!(
                "the compactor input renders to {rendered_chars} characters, over the bound of {}",
                decl.prefix_bounds.max_chars
            ),
        ));
    }
    let overhead_chars = rendered_chars.saturating_sub(frozen_size.chars);
    let input_tokens = error::add(frozen_size.tokens, estimate_tokens(overhead_chars))?;
    if let Budget::Tokens {
        window,
        safety_margin,
        ..
    } = decl.budget
    {
        let need = error::sum([input_tokens, summary_tokens, safety_margin])?;
        if need > window {
            return Err(Error::new(
                Code::PrefixOverBounds,
                format!(
                    "the compactor input ({input_tokens} tokens) plus the summary's headroom and the safety margin exceed the window of {window}"
                ),
            ));
        }
    }
    Ok((rendered_chars, input_tokens))
}

/// The journal head in source-sequence terms: the newest message's (or
/// late delivery's) source sequence, 0 with none.
pub fn newest_seq(events: &[Event]) -> u64 {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Message(m) | Event::LateDelivery(m) => Some(m.source_seq),
            _ => None,
        })
        .max()
        .unwrap_or(0)
}

/// The sealed packet: what is frozen through `last`, bound to the
/// declaration, route, trigger, chain head, frontier and amendment.
fn packet(
    ctx: &Ctx<'_>,
    last: &Turn,
    bounds: SummaryBounds,
    input: InputEvidence,
    stats: Stats,
    messages: Vec<CompactorMessage>,
) -> Packet {
    let (req, decl) = (ctx.req, &ctx.req.declaration);
    Packet {
        id: String::new(),
        ruleset_version: crate::RULESET_VERSION.to_owned(),
        declaration_fingerprint: ctx.fingerprint.clone(),
        target_id: decl.target_id.clone(),
        compactor_id: decl.compactor_id.clone(),
        history_agents: decl.history_agents.clone(),
        route: req.route.clone(),
        trigger: req.trigger.kind(),
        previous: req.head.as_ref().map(ChainHead::as_previous),
        frontier: ctx.frontier.reference(),
        amendment: req.amendment.clone(),
        covered_through_turn_id: last.turn_id.clone(),
        covered_through_seq: last.source_seq,
        head_seq: matches!(req.trigger, Trigger::Manual { .. }).then(|| newest_seq(&req.events)),
        policy: decl.budget,
        bounds,
        input,
        stats,
        messages,
    }
    .seal()
}

/// Check whether a warm candidate is still valid against the fresh packet and
/// current eligible turns: same epoch, same previous boundary and amendment,
/// and its frozen turns are still, unchanged, a prefix of current history that
/// ends on a unit boundary.
pub fn warm_verdict(warm: &Packet, fresh: &Packet, eligible: &[&Turn]) -> WarmVerdict {
    let verdict = |reason: Option<WarmRefusal>| WarmVerdict {
        packet_id: warm.id.clone(),
        valid: reason.is_none(),
        reason,
    };
    if !warm.id_is_intact() {
        return verdict(Some(WarmRefusal::DivergentHash));
    }
    if warm.declaration_fingerprint != fresh.declaration_fingerprint
        || warm.ruleset_version != fresh.ruleset_version
    {
        return verdict(Some(WarmRefusal::StaleDeclaration));
    }
    if warm.previous != fresh.previous || warm.frontier != fresh.frontier {
        return verdict(Some(WarmRefusal::StalePrevious));
    }
    if warm.amendment.as_ref().map(|a| &a.hash) != fresh.amendment.as_ref().map(|a| &a.hash) {
        return verdict(Some(WarmRefusal::StaleAmendment));
    }
    let n = warm.input.turns.len();
    if n > eligible.len() {
        return verdict(Some(WarmRefusal::NotPrefix));
    }
    for (w, t) in warm.input.turns.iter().zip(eligible) {
        if w.turn_id != t.turn_id || w.content_hash != t.content_hash {
            return verdict(Some(WarmRefusal::Diverged));
        }
    }
    let on_unit_edge = n == eligible.len() || group::units(eligible).iter().any(|u| u.start == n);
    if !on_unit_edge {
        return verdict(Some(WarmRefusal::SplitsUnit));
    }
    verdict(None)
}
