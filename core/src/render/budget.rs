//! Budget arithmetic: thresholds in characters or tokens, integers only.
//!
//! Token mode (seed 002): the usable window is `window - reservedOutput -
//! safetyMargin`; the retrieval share is held back from it, leaving the
//! conversation budget `C`. Eager mode compacts at `C·eager‰` and prepares warm
//! candidates from `C·soft‰`; lazy mode compacts only at `C` and warms from
//! `C·eager‰`. Compaction aims for `C·target‰` in total, so the exact tail gets
//! what is left after pinned turns and the summary's own reserved headroom.
//! Character mode (seed 000): compact at `trigger`, keep a tail of `retain`.
//!
//! Headroom is a contract ([`headroom_violations`]): the summary's reserve
//! derives from the budget unless declared ([`summary_bounds`]), and a
//! declaration whose summary reserve and document budget would leave the exact
//! tail less than [`MIN_TAIL_CHARS`] / [`MIN_TAIL_TOKENS`] (and, in token mode,
//! less than [`MIN_TAIL_SHARE`] of the target) is refused with
//! `invalid_declaration` naming the field to change. So every declaration
//! validation accepts can compact a conversation of ordinary turns.

use foldline_derive::{Decode, Encode};
use serde::Serialize;

use crate::error::{Code, Error};
pub use crate::records::declaration::Metric;
use crate::records::declaration::{
    Budget, CompactionMode, Declaration, InstructionMode, SummaryBounds,
};
use crate::records::turn::{estimate_tokens, Turn};
use crate::render::envelope;

pub use crate::defaults::{MIN_TAIL_CHARS, MIN_TAIL_TOKENS, SUMMARY_MIN_CHARS};
/// Least share (per-mille) of the token target the exact tail must keep.
pub const MIN_TAIL_SHARE: u64 = 250;
/// Share (per-mille) of the token target a derived summary may take.
pub const SUMMARY_SHARE: u64 = 250;
/// Characters held for the compactor's prompt and framing when checking that
/// a compaction fits the prefix bounds.
pub const PROMPT_HEADROOM_CHARS: u64 = 5_000;
/// Most characters of a derived summary.
pub const SUMMARY_MAX_CHARS: u64 = 8_000;
/// Most tokens of a derived summary.
pub const SUMMARY_MAX_TOKENS: u64 = 2_000;

/// The summary limits in force for a declaration.
///
/// Declared limits are kept. Otherwise, in character mode, the summary gets
/// half of what lies between `retain` (plus the envelope and the document
/// budget) and `trigger`, at most [`SUMMARY_MAX_CHARS`], and half as many
/// tokens as characters; in token mode it gets [`SUMMARY_SHARE`] of the
/// target, at most [`SUMMARY_MAX_TOKENS`], and four characters per token.
/// Seed 000's 80,000 / 40,000 gives 8,000 characters; seed 002's defaults
/// (target 1,664 tokens) give 416 tokens.
pub fn summary_bounds(decl: &Declaration) -> SummaryBounds {
    let declared = decl.summary;
    let (max_chars, max_tokens) = match decl.budget {
        Budget::Chars { trigger, retain } => {
            let room = trigger
                .saturating_sub(retain)
                .saturating_sub(envelope::summary_overhead_chars())
                .saturating_sub(decl.documents.budget_chars);
            let chars = declared
                .max_chars
                .unwrap_or((room / 2).min(SUMMARY_MAX_CHARS));
            let tokens = declared.max_tokens.unwrap_or(chars.div_ceil(2));
            (chars, tokens)
        }
        Budget::Tokens { .. } => {
            let target = Thresholds::of(decl).target_total.unwrap_or(0);
            let tokens = declared
                .max_tokens
                .unwrap_or(permille(target, SUMMARY_SHARE).min(SUMMARY_MAX_TOKENS));
            let chars = declared.max_chars.unwrap_or(tokens.saturating_mul(4));
            (chars, tokens)
        }
    };
    SummaryBounds {
        max_chars,
        max_tokens,
        preview_chars: declared.preview_chars,
    }
}

/// The summary's reserve in both metrics: its envelope plus its limit. In
/// tokens, the larger of the output limit and the estimate of the longest
/// summary the character limit admits, since `select` sizes the envelope by
/// the estimate.
pub fn summary_reserve(bounds: &SummaryBounds) -> (u64, u64) {
    let overhead = envelope::summary_overhead_chars();
    let chars = overhead.saturating_add(bounds.max_chars);
    let tokens =
        estimate_tokens(chars).max(estimate_tokens(overhead).saturating_add(bounds.max_tokens));
    (chars, tokens)
}

/// Whether one compaction can take an ordinary turn (at least
/// [`MIN_TAIL_CHARS`] characters, [`MIN_TAIL_TOKENS`] tokens) beside an
/// amendment bound of `amendment` characters.
fn takes_a_turn(decl: &Declaration, amendment: u64) -> bool {
    let (chars, tokens) = admissible_beside(decl, amendment);
    chars >= MIN_TAIL_CHARS && tokens >= MIN_TAIL_TOKENS
}

/// A size as refusals print it: characters, and tokens where the budget
/// counts them (`None` in character mode, whose token bound is unlimited).
pub fn size_text(chars: u64, tokens: Option<u64>) -> String {
    match tokens {
        Some(tokens) => format!("{chars} characters ({tokens} tokens)"),
        None => format!("{chars} characters"),
    }
}

/// The largest message admission accepts under a declaration, in
/// characters and tokens: one that a compaction could take alone, with the
/// compactor's prompt and framing ([`PROMPT_HEADROOM_CHARS`]), the
/// instructions, the reference documents, the previous summary and the
/// largest amendment beside it — within `prefixBounds.maxChars`, and in
/// token mode within the window less the summary's output headroom and the
/// safety margin. A message over it could never be folded, so it would stop
/// compaction for good; the servers and the drivers' appends refuse it
/// (`turn_too_large`). In character mode the token bound is unlimited.
pub fn admissible_turn(decl: &Declaration) -> (u64, u64) {
    admissible_beside(decl, decl.amendment_max_chars)
}

/// The most the admitted pinned turns of a conversation (system and
/// developer messages, documents, turns marked pinned) may measure
/// together, in the budget's metric: the context's limit less the least
/// summary a compaction may write ([`SUMMARY_MIN_CHARS`] in its envelope;
/// `plan` narrows the summary to the room there is) and an ordinary turn
/// ([`MIN_TAIL_CHARS`] / [`MIN_TAIL_TOKENS`]). Pinned turns are never
/// folded, so past it every `select` would be `over_budget` and every
/// compaction would fail, for good; admission refuses the pinned turn that
/// would cross it (`pinned_too_large`). An amendment is not reserved: the
/// next compaction absorbs it. Seed 000's defaults leave 78,585 characters.
pub fn admissible_pinned(decl: &Declaration) -> u64 {
    let th = Thresholds::of(decl);
    let summary = envelope::summary_overhead_chars().saturating_add(SUMMARY_MIN_CHARS);
    let beside = match th.metric {
        Metric::Chars => summary.saturating_add(MIN_TAIL_CHARS),
        Metric::Tokens => estimate_tokens(summary).saturating_add(MIN_TAIL_TOKENS),
    };
    th.limit.saturating_sub(beside)
}

/// [`admissible_turn`] with an amendment bound of `amendment` characters.
fn admissible_beside(decl: &Declaration, amendment: u64) -> (u64, u64) {
    let bounds = summary_bounds(decl);
    let instructions = decl
        .instructions
        .as_ref()
        .map_or(0, |i| envelope::chars(&i.text));
    let beside = PROMPT_HEADROOM_CHARS
        .saturating_add(instructions)
        .saturating_add(decl.documents.budget_chars)
        .saturating_add(bounds.max_chars)
        .saturating_add(amendment);
    let chars = decl.prefix_bounds.max_chars.saturating_sub(beside);
    let tokens = match decl.budget {
        Budget::Tokens {
            window,
            safety_margin,
            ..
        } => window
            .saturating_sub(safety_margin)
            .saturating_sub(bounds.max_tokens)
            .saturating_sub(estimate_tokens(beside)),
        Budget::Chars { .. } => u64::MAX,
    };
    (chars, tokens)
}

/// The budget's own checks: a positive retain below the trigger; in token
/// mode, room in the window and ratios in their ranges (soft ≤ eager ≤
/// 1000‰, target below eager).
fn budget_violations(budget: &Budget, bad: &mut dyn FnMut(&str, String)) {
    match *budget {
        Budget::Chars { trigger, retain } => {
            if retain == 0 {
                bad("budget.retain", "retain must be positive".into());
            }
            if retain >= trigger {
                bad(
                    "budget.retain",
                    format!("retain ({retain}) must be strictly smaller than trigger ({trigger})"),
                );
            }
        }
        Budget::Tokens {
            window,
            reserved_output,
            safety_margin,
            retrieval_share,
            soft,
            eager,
            target,
            ..
        } => {
            if reserved_output.saturating_add(safety_margin) >= window {
                bad(
                    "budget.reservedOutput",
                    format!("reservedOutput + safetyMargin ({}) must be smaller than the window ({window})", reserved_output.saturating_add(safety_margin)),
                );
            }
            if retrieval_share >= 1000 {
                bad(
                    "budget.retrievalShare",
                    format!("retrievalShare ({retrieval_share}‰) must be below 1000‰"),
                );
            }
            if soft == 0 || soft > eager {
                bad(
                    "budget.soft",
                    format!("soft ({soft}‰) must be positive and at most eager ({eager}‰)"),
                );
            }
            if eager > 1000 {
                bad(
                    "budget.eager",
                    format!("eager ({eager}‰) must be at most 1000‰"),
                );
            }
            if target == 0 || target >= eager {
                bad(
                    "budget.target",
                    format!("target ({target}‰) must be positive and below eager ({eager}‰)"),
                );
            }
        }
    }
}

/// Whether the budget leaves the exact tail room once the summary reserve and
/// the document budget are taken; each violation names the field to change.
pub fn headroom_violations(decl: &Declaration) -> Vec<Error> {
    let bounds = summary_bounds(decl);
    let (reserve_chars, reserve_tokens) = summary_reserve(&bounds);
    let docs = decl.documents.budget_chars;
    let bad = |field: &str, msg: String| {
        vec![Error::new(Code::InvalidDeclaration, msg).with_ids([field.to_owned()])]
    };
    match decl.budget {
        Budget::Chars { trigger, retain } => {
            if retain < MIN_TAIL_CHARS {
                return bad(
                    "budget.retain",
                    format!("retain ({retain}) must keep an exact tail of at least {MIN_TAIL_CHARS} characters"),
                );
            }
            if decl.summary.max_chars.is_none() && bounds.max_chars < SUMMARY_MIN_CHARS {
                return bad(
                    "budget.trigger",
                    format!("trigger ({trigger}) leaves less than {SUMMARY_MIN_CHARS} characters for a summary above retain ({retain}), the envelope and the document budget"),
                );
            }
            let after = retain.saturating_add(reserve_chars).saturating_add(docs);
            if after >= trigger {
                let field = if decl.summary.max_chars.is_some() {
                    "summary.maxChars"
                } else {
                    "documents.budgetChars"
                };
                return bad(
                    field,
                    format!("retain ({retain}) + summary reserve ({reserve_chars}) + document budget ({docs}) = {after} must be below trigger ({trigger}), or a compaction cannot shrink the context"),
                );
            }
        }
        Budget::Tokens { .. } => {
            let target = Thresholds::of(decl).target_total.unwrap_or(0);
            let docs_tokens = if docs == 0 { 0 } else { estimate_tokens(docs) };
            if decl.summary.max_tokens.is_none() && bounds.max_tokens < SUMMARY_MIN_CHARS / 4 {
                return bad(
                    "budget.window",
                    format!(
                        "the token target ({target}) is too small to hold a summary of {} tokens",
                        SUMMARY_MIN_CHARS / 4
                    ),
                );
            }
            let tail = target
                .saturating_sub(reserve_tokens)
                .saturating_sub(docs_tokens);
            // What a compaction at the trigger freezes, rendered for the
            // compactor (four characters per estimated token, a quarter more
            // for transcript framing, the previous summary and the prompt),
            // must fit the prefix bounds, or every compaction would refuse.
            let trigger = Thresholds::of(decl).trigger;
            let frozen = trigger.saturating_sub(tail).saturating_mul(5);
            let rendered = frozen
                .saturating_add(bounds.max_chars)
                .saturating_add(PROMPT_HEADROOM_CHARS);
            if rendered > decl.prefix_bounds.max_chars {
                return bad(
                    "prefixBounds.maxChars",
                    format!("a compaction at the trigger ({trigger} tokens) renders about {rendered} characters for the compactor, over prefixBounds.maxChars ({}); raise it or lower the window", decl.prefix_bounds.max_chars),
                );
            }
            let least = MIN_TAIL_TOKENS.max(permille(target, MIN_TAIL_SHARE));
            if tail < least {
                let field = if decl.summary.max_tokens.is_some() {
                    "summary.maxTokens"
                } else if docs > 0 {
                    "documents.budgetChars"
                } else {
                    "budget.window"
                };
                return bad(
                    field,
                    format!("the token target ({target}) less the summary reserve ({reserve_tokens}) and the document budget ({docs_tokens}) leaves an exact tail of {tail} tokens, under the least of {least}"),
                );
            }
        }
    }
    // One compaction must be able to take an ordinary turn beside the
    // compactor's prompt, the summary, the largest amendment and the
    // documents, or every message would be refused (`turn_too_large`).
    // The message says how large a turn fits, and the amendment bound that
    // would admit an ordinary one (found by bisection: the room only shrinks
    // as the bound grows), or that none would.
    let amendment = decl.amendment_max_chars;
    if !takes_a_turn(decl, amendment) {
        let (chars, tokens) = admissible_turn(decl);
        let field = if chars < MIN_TAIL_CHARS {
            "prefixBounds.maxChars"
        } else {
            "budget.window"
        };
        let turn = size_text(chars, (tokens != u64::MAX).then_some(tokens));
        let fix = if takes_a_turn(decl, 0) {
            let (mut fits, mut over) = (0, amendment);
            while over - fits > 1 {
                let mid = fits + (over - fits) / 2;
                if takes_a_turn(decl, mid) {
                    fits = mid;
                } else {
                    over = mid;
                }
            }
            format!("declare amendmentMaxChars of at most {fits}, or raise {field}")
        } else {
            format!("even without amendments; raise {field}")
        };
        return bad(
            field,
            format!("one compaction can take a turn of at most {turn} beside its prompt, the summary and amendmentMaxChars ({amendment}), under the least of 1,024 characters (256 tokens): {fix}"),
        );
    }
    Vec::new()
}

/// Thresholds derived from a declaration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase")]
pub struct Thresholds {
    /// Unit.
    pub metric: Metric,
    /// Compact at or above this total.
    pub trigger: u64,
    /// Warm candidates at or above this total (token mode only).
    pub warm_at: Option<u64>,
    /// Target for the whole projection after compaction (token mode), or `None`.
    pub target_total: Option<u64>,
    /// Tail target in character mode.
    pub retain: u64,
    /// Most the selected context may hold.
    pub limit: u64,
}

impl Thresholds {
    /// Derive the thresholds of a (valid) declaration.
    pub fn of(decl: &Declaration) -> Thresholds {
        match decl.budget {
            Budget::Chars { trigger, retain } => Thresholds {
                metric: Metric::Chars,
                trigger,
                warm_at: None,
                target_total: None,
                retain,
                limit: trigger,
            },
            Budget::Tokens {
                window,
                reserved_output,
                safety_margin,
                retrieval_share,
                soft,
                eager,
                target,
                mode,
            } => {
                let usable = window
                    .saturating_sub(reserved_output)
                    .saturating_sub(safety_margin);
                let conv = usable - permille(usable, retrieval_share.min(1000));
                let (trigger, warm) = match mode {
                    CompactionMode::Eager => (permille(conv, eager), permille(conv, soft)),
                    CompactionMode::Lazy => (conv, permille(conv, eager)),
                };
                let target_total = permille(conv, target);
                Thresholds {
                    metric: Metric::Tokens,
                    trigger,
                    warm_at: Some(warm),
                    target_total: Some(target_total),
                    retain: target_total,
                    limit: conv,
                }
            }
        }
    }

    /// The tail target once pinned turns and the summary reserve are known:
    /// in token mode what the projection's target leaves beside them. In
    /// character mode `retain`, less what the pinned turns (a long system
    /// prompt, the open tool cycle's reasoning) take beyond half the room
    /// between `retain` plus the summary's reserve and the limit: a
    /// compaction's projection then fits the context, so no exact turn it
    /// kept is left out unsummarized, and leaves at least that half of the
    /// room before the next compaction is due (never one on every message).
    pub fn tail_target(&self, pinned: u64, summary_reserve: u64) -> u64 {
        match self.target_total {
            None => {
                let room = self.limit.saturating_sub(self.retain);
                let half = room.saturating_sub(summary_reserve) / 2;
                self.retain.saturating_sub(pinned.saturating_sub(half))
            }
            Some(t) => t.saturating_sub(pinned).saturating_sub(summary_reserve),
        }
    }
}

/// `value × ratio‰`, rounded down, without overflow: with `value = 1000q + r`
/// and `ratio = 1000a + b`, the exact quotient is `q·ratio + r·a + r·b/1000`
/// (`r·b` < 10⁶). In 64-bit arithmetic, not 128-bit: no 128-bit division
/// code in the artifact (a result past `u64::MAX`, possible only for a
/// ratio above 1000, keeps its low 64 bits, as the 128-bit form's cast did).
pub fn permille(value: u64, ratio: u64) -> u64 {
    let (q, r) = (value / 1000, value % 1000);
    q.wrapping_mul(ratio)
        .wrapping_add(r * (ratio / 1000))
        .wrapping_add(r * (ratio % 1000) / 1000)
}

/// Size of a turn in the metric.
pub fn turn_size(metric: Metric, t: &Turn) -> u64 {
    match metric {
        Metric::Chars => t.chars,
        Metric::Tokens => t.tokens,
    }
}

/// Size of text the core renders itself (envelopes, prompts) in the metric.
pub fn text_size(metric: Metric, chars: u64) -> u64 {
    match metric {
        Metric::Chars => chars,
        Metric::Tokens => estimate_tokens(chars),
    }
}

/// A declaration's checks and derived bounds, here beside the budget
/// arithmetic they use (declarations are records; this is policy).
impl Declaration {
    /// The one refusal of a declaration that breaks rules: `invalid_declaration`
    /// naming every field at fault, as both `plan` (which lists the single
    /// violations beside it) and `select` answer it. `None` when it breaks none.
    pub fn refusal(&self) -> Option<(Error, Vec<Error>)> {
        thread_local! {
            static LAST: crate::canonical::Memo<Declaration, Option<(Error, Vec<Error>)>> =
                const { std::cell::RefCell::new(None) };
        }
        crate::canonical::remembered(&LAST, self, Declaration::refusal_of)
    }

    fn refusal_of(&self) -> Option<(Error, Vec<Error>)> {
        let violations = self.violations();
        if violations.is_empty() {
            return None;
        }
        let fields: Vec<String> = violations.iter().flat_map(|e| e.ids.clone()).collect();
        let rules: Vec<&str> = violations.iter().map(|e| e.message.as_str()).collect();
        let error = Error::new(
            Code::InvalidDeclaration,
            format!(
                "the declaration breaks {} rule(s): {}",
                violations.len(),
                rules.join("; ")
            ),
        )
        .with_ids(fields);
        Some((error, violations))
    }

    /// Check every rule and return every violation (empty when valid).
    pub fn violations(&self) -> Vec<Error> {
        let mut errs = Vec::new();
        let mut bad = |field: &str, msg: String| {
            errs.push(Error::new(Code::InvalidDeclaration, msg).with_ids([field.to_owned()]))
        };
        if self.target_id.trim().is_empty() {
            bad("targetId", "targetId must not be empty".into());
        }
        if self.compactor_id.trim().is_empty() {
            bad("compactorId", "compactorId must not be empty".into());
        }
        if !self.target_id.is_empty() && self.target_id == self.compactor_id {
            bad(
                "compactorId",
                "the compactor must be a separate consumer id from the target".into(),
            );
        }
        budget_violations(&self.budget, &mut bad);
        if self.summary.max_chars == Some(0) {
            bad(
                "summary.maxChars",
                "summary.maxChars must be positive".into(),
            );
        }
        if self.summary.max_tokens == Some(0) {
            bad(
                "summary.maxTokens",
                "summary.maxTokens must be positive".into(),
            );
        }
        if self.prefix_bounds.max_turns == 0 || self.prefix_bounds.max_chars == 0 {
            bad("prefixBounds", "prefix bounds must be positive".into());
        }
        if self.max_consecutive_failures == 0 {
            bad(
                "maxConsecutiveFailures",
                "maxConsecutiveFailures must be at least 1".into(),
            );
        }
        if self.breaker_retry_after == 0 {
            bad(
                "breakerRetryAfter",
                "breakerRetryAfter must be at least 1".into(),
            );
        }
        if let Some(ins) = &self.instructions {
            if ins.mode == InstructionMode::Replace && ins.text.trim().is_empty() {
                bad(
                    "instructions.text",
                    "replacing instructions must not be empty".into(),
                );
            }
        }
        if self.documents.ids.iter().any(|d| d.is_empty()) {
            bad("documents.ids", "document ids must not be empty".into());
        }
        // Room for the tail is checked once every field is sound on its own.
        if errs.is_empty() {
            errs.extend(headroom_violations(self));
        }
        errs
    }

    /// The summary limits in force: declared, or derived from the budget.
    pub fn summary_bounds(&self) -> SummaryBounds {
        summary_bounds(self)
    }
}

#[cfg(test)]
mod tests {
    /// `permille` in 64-bit arithmetic is the 128-bit product's quotient
    /// (its low 64 bits), at the edges and across the range.
    #[test]
    fn permille_is_the_exact_quotient() {
        let exact = |v: u64, r: u64| ((u128::from(v) * u128::from(r)) / 1000) as u64;
        let edges = [
            0,
            1,
            7,
            999,
            1000,
            1001,
            123_456_789,
            (1 << 53) - 1,
            u64::MAX / 1000,
            u64::MAX - 1,
            u64::MAX,
        ];
        let ratios = [
            0,
            1,
            333,
            500,
            999,
            1000,
            1001,
            123_457,
            u64::MAX / 1000,
            u64::MAX,
        ];
        for v in edges {
            for r in ratios {
                assert_eq!(super::permille(v, r), exact(v, r), "{v} × {r}‰");
            }
        }
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let (v, r) = (x >> (x % 64), x.rotate_left(17) % 2_001);
            assert_eq!(super::permille(v, r), exact(v, r), "{v} × {r}‰");
        }
    }

    use super::*;

    #[test]
    fn seed_002_defaults_give_documented_thresholds() {
        let mut d = Declaration::new("t", "c");
        d.budget = Budget::default_tokens();
        let t = Thresholds::of(&d);
        // 8192 - 1024 - 512 = 6656 usable; half held for retrieval = 3328.
        assert_eq!(t.limit, 3328);
        assert_eq!(t.trigger, 2595); // 78%
        assert_eq!(t.warm_at, Some(1996)); // 60%
        assert_eq!(t.target_total, Some(1664)); // 50%
                                                // The derived summary takes a quarter of the target, leaving the tail
                                                // 1664 - (416 + the envelope's 52) = 1196 tokens.
        let b = summary_bounds(&d);
        assert_eq!((b.max_tokens, b.max_chars), (416, 1664));
        assert!(headroom_violations(&d).is_empty());
    }

    #[test]
    fn seed_000_defaults_keep_the_8000_character_summary() {
        let d = Declaration::new("t", "c");
        let b = summary_bounds(&d);
        assert_eq!((b.max_chars, b.max_tokens), (8_000, 4_000));
        assert!(headroom_violations(&d).is_empty());
    }

    #[test]
    fn a_summary_reserve_that_leaves_no_tail_is_refused_naming_the_field() {
        let mut d = Declaration::new("t", "c");
        d.budget = Budget::default_tokens();
        d.summary.max_tokens = Some(2_000);
        let v = headroom_violations(&d);
        assert_eq!(v[0].code, Code::InvalidDeclaration);
        assert_eq!(v[0].ids, vec!["summary.maxTokens".to_owned()]);

        let mut c = Declaration::new("t", "c");
        c.budget = Budget::Chars {
            trigger: 4_000,
            retain: 2_000,
        };
        assert!(headroom_violations(&c).is_empty());
        c.summary.max_chars = Some(8_000);
        assert_eq!(
            headroom_violations(&c)[0].ids,
            vec!["summary.maxChars".to_owned()]
        );
    }

    #[test]
    fn a_budget_whose_compaction_cannot_fit_the_prefix_bounds_is_refused() {
        // Found by the accepted-declarations property: a 121k window with no
        // retrieval share freezes ~410,000 rendered characters at the trigger.
        let mut d = Declaration::new("t", "c");
        d.budget = Budget::Tokens {
            window: 121_194,
            reserved_output: 0,
            safety_margin: 0,
            retrieval_share: 0,
            soft: 100,
            eager: 872,
            target: 50,
            mode: CompactionMode::Eager,
        };
        assert_eq!(
            headroom_violations(&d)[0].ids,
            vec!["prefixBounds.maxChars".to_owned()]
        );
        d.prefix_bounds.max_chars = 600_000;
        assert!(headroom_violations(&d).is_empty());
        // The 128k default window fits the default bounds.
        let mut big = Declaration::new("t", "c");
        big.budget = Budget::default_tokens();
        if let Budget::Tokens { window, .. } = &mut big.budget {
            *window = 128_000;
        }
        assert!(headroom_violations(&big).is_empty());
    }

    #[test]
    fn a_window_too_small_for_a_tail_is_refused() {
        let mut d = Declaration::new("t", "c");
        d.budget = Budget::default_tokens();
        if let Budget::Tokens { window, .. } = &mut d.budget {
            *window = 2_600;
        }
        assert_eq!(
            headroom_violations(&d)[0].ids,
            vec!["budget.window".to_owned()]
        );
    }

    #[test]
    fn lazy_mode_compacts_only_when_full() {
        let mut d = Declaration::new("t", "c");
        d.budget = Budget::default_tokens();
        if let Budget::Tokens { mode, .. } = &mut d.budget {
            *mode = CompactionMode::Lazy;
        }
        let t = Thresholds::of(&d);
        assert_eq!(t.trigger, 3328);
        assert_eq!(t.warm_at, Some(2595));
    }
}
