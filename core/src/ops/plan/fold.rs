//! The compaction plan proper: which units to freeze, the exact tail kept,
//! the summary's room, the rendered compactor input and the sealed packet
//! (seed 000 "Trigger and frozen input"; backlogs in steps, long newest
//! turns).

use super::{pick, prior, unit_size, Planning, Trigger};
use crate::canonical;
use crate::error::{self, Code, Error, Result};
use crate::history::group::{self, Unit};
use crate::records::boundary::{Backlog, ChainHead, InputEvidence, InputTurn, Sizes, Stats};
use crate::records::declaration::{Budget, Declaration, SummaryBounds};
use crate::records::event::Event;
use crate::records::packet::{CompactorMessage, Packet};
use crate::records::turn::{estimate_tokens, require_content, Turn};
use crate::render::budget::{Metric, SUMMARY_MIN_CHARS};
use crate::render::compactor;
use crate::render::envelope;

/// Characters and tokens of some turns.
pub(super) fn sizes_of(turns: &[&Turn]) -> Result<Sizes> {
    Ok(Sizes {
        chars: error::sum(turns.iter().map(|t| t.chars))?,
        tokens: error::sum(turns.iter().map(|t| t.tokens))?,
    })
}

fn summary_reserve(bounds: &SummaryBounds) -> Sizes {
    let (chars, tokens) = crate::render::budget::summary_reserve(bounds);
    Sizes { chars, tokens }
}

pub(super) fn compact(ctx: &Planning<'_>) -> Result<Packet> {
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
    // A fold never reaches past the prefix's turn bound (`fold`): a backlog
    // beyond it may come as metadata.
    let cap = ctx
        .req
        .declaration
        .prefix_bounds
        .max_turns
        .saturating_add(1);
    let needed = (tail_begins as u64).min(cap) as usize;
    require_content(&eligible[..needed], "be frozen")?;
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
fn fold(ctx: &Planning<'_>, before_tail: &[Unit], bounds: &SummaryBounds) -> Result<Folded> {
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
    ctx: &Planning<'_>,
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
fn summary_room(ctx: &Planning<'_>, units: &[Unit]) -> Result<(SummaryBounds, Sizes)> {
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
fn tail_start(ctx: &Planning<'_>, units: &[Unit], tail_target: u64, alone: u64) -> Result<usize> {
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
    ctx: &Planning<'_>,
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
