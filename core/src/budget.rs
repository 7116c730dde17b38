//! Budget arithmetic: thresholds in characters or tokens, integers only.
//!
//! Token mode (seed 002): the usable window is `window - reservedOutput -
//! safetyMargin`; the retrieval share is held back from it, leaving the
//! conversation budget `C`. Eager mode compacts at `C·eager‰` and prepares warm
//! candidates from `C·soft‰`; lazy mode compacts only at `C` and warms from
//! `C·eager‰`. Compaction aims for `C·target‰` in total, so the exact tail gets
//! what is left after pinned turns and the summary's own reserved headroom.
//! Character mode (seed 000): compact at `trigger`, keep a tail of `retain`.

use foldline_derive::{Decode, Encode};
use serde::Serialize;

use crate::declaration::{Budget, CompactionMode, Declaration};
use crate::turn::{estimate_tokens, Turn};

/// The unit sizes are measured in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase")]
pub enum Metric {
    /// Unicode scalar values.
    Chars,
    /// Tokens (host counts, else the estimate).
    Tokens,
}

impl Metric {
    /// The metric's name: `chars` or `tokens`.
    pub fn as_str(self) -> &'static str {
        match self {
            Metric::Chars => "chars",
            Metric::Tokens => "tokens",
        }
    }
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

    /// The tail target once pinned turns and the summary reserve are known.
    pub fn tail_target(&self, pinned: u64, summary_reserve: u64) -> u64 {
        match self.target_total {
            None => self.retain,
            Some(t) => t.saturating_sub(pinned).saturating_sub(summary_reserve),
        }
    }
}

/// `value × ratio‰`, rounded down, without overflow.
pub fn permille(value: u64, ratio: u64) -> u64 {
    ((value as u128 * ratio as u128) / 1000) as u64
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

#[cfg(test)]
mod tests {
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
