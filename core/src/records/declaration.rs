//! The declaration: who compacts what, under which budget and bounds.
//!
//! A conversation's target (ordinary agent) declaration names exactly one
//! reciprocal compactor; both share this type and must agree on the fields
//! listed in [`crate::agree`]. Ratios are integers in per-mille, never floats.

use foldline_derive::{Decode, Encode};
use serde::Serialize;

use crate::canonical;

/// Which side of the reciprocal pair a declaration describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Encode, Decode, Default)]
#[serde(rename_all = "camelCase")]
pub enum DeclarationRole {
    /// The ordinary conversation agent.
    #[default]
    Target,
    /// The specialized compactor.
    Compactor,
}

/// Provider profile and model the pair runs on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelProfile {
    /// Provider profile name, such as `openai-compatible`.
    pub provider: String,
    /// Model name.
    pub model: String,
}

/// Privacy admission.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Encode, Decode, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Privacy {
    /// Whether turns marked sensitive may enter the projection.
    #[serde(default)]
    pub admit_sensitive: bool,
}

/// Subscribed identity and memory documents, and their budget.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Documents {
    /// Document ids, in order.
    #[serde(default)]
    pub ids: Vec<String>,
    /// Character budget for all documents together (0: no documents).
    #[serde(default)]
    pub budget_chars: u64,
}

/// When token-mode compaction fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Encode, Decode, Default)]
#[serde(rename_all = "camelCase")]
pub enum CompactionMode {
    /// Compact at the eager ratio, before the turn is under pressure.
    #[default]
    Eager,
    /// Compact only when the conversation budget is full.
    Lazy,
}

/// The budget, in characters (seed 000) or tokens (seed 002).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(tag = "kind", rename_all = "camelCase", deny_unknown_fields)]
pub enum Budget {
    /// Character accounting over the exact model-bound messages.
    #[serde(rename_all = "camelCase")]
    Chars {
        /// Compact when the active context reaches this many characters.
        #[serde(default = "d_trigger")]
        trigger: u64,
        /// Keep an exact tail of at most this many characters.
        #[serde(default = "d_retain")]
        retain: u64,
    },
    /// Token accounting with ratios in per-mille.
    #[serde(rename_all = "camelCase")]
    Tokens {
        /// Model window in tokens.
        #[serde(default = "d_window")]
        window: u64,
        /// Tokens held back for the answer.
        #[serde(default = "d_reserved")]
        reserved_output: u64,
        /// Headroom against tokenizer drift.
        #[serde(default = "d_margin")]
        safety_margin: u64,
        /// Share (per-mille) of the usable window retrieval may claim.
        #[serde(default = "d_share")]
        retrieval_share: u64,
        /// Start considering (warm candidates), per-mille of the conversation budget.
        #[serde(default = "d_soft")]
        soft: u64,
        /// Compact now (eager mode), per-mille.
        #[serde(default = "d_eager")]
        eager: u64,
        /// Compact down to this, per-mille.
        #[serde(default = "d_target")]
        target: u64,
        /// Eager or lazy.
        #[serde(default)]
        mode: CompactionMode,
    },
}

fn d_trigger() -> u64 {
    80_000
}
fn d_retain() -> u64 {
    40_000
}
fn d_window() -> u64 {
    8192
}
fn d_reserved() -> u64 {
    1024
}
fn d_margin() -> u64 {
    512
}
fn d_share() -> u64 {
    500
}
fn d_soft() -> u64 {
    600
}
fn d_eager() -> u64 {
    780
}
fn d_target() -> u64 {
    500
}

impl Default for Budget {
    fn default() -> Self {
        Budget::Chars {
            trigger: d_trigger(),
            retain: d_retain(),
        }
    }
}

impl Budget {
    /// The token budget with seed 002's defaults.
    pub fn default_tokens() -> Self {
        Budget::Tokens {
            window: d_window(),
            reserved_output: d_reserved(),
            safety_margin: d_margin(),
            retrieval_share: d_share(),
            soft: d_soft(),
            eager: d_eager(),
            target: d_target(),
            mode: CompactionMode::Eager,
        }
    }
}

/// Bounds of one frozen prefix (compactor input).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PrefixBounds {
    /// Most turns one packet may freeze.
    #[serde(default = "d_max_turns")]
    pub max_turns: u64,
    /// Most characters of compactor input (previous summary, amendment and turns).
    #[serde(default = "d_max_chars")]
    pub max_chars: u64,
}
fn d_max_turns() -> u64 {
    5_000
}
fn d_max_chars() -> u64 {
    400_000
}
impl Default for PrefixBounds {
    fn default() -> Self {
        PrefixBounds {
            max_turns: d_max_turns(),
            max_chars: d_max_chars(),
        }
    }
}

/// Limits of the summary a model returns, as declared.
///
/// Both limits are optional: when absent they derive from the budget
/// ([`crate::budget::summary_bounds`]), so every budget leaves its exact tail
/// room. Set explicitly, they are checked against the budget by
/// [`Declaration::violations`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SummaryLimits {
    /// Most characters of summary (derived from the budget when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_chars: Option<u64>,
    /// Most tokens of summary, also the output headroom reserved for it
    /// (derived from the budget when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Characters of the derived preview.
    #[serde(default = "d_preview")]
    pub preview_chars: u64,
}
fn d_preview() -> u64 {
    280
}
impl Default for SummaryLimits {
    fn default() -> Self {
        SummaryLimits {
            max_chars: None,
            max_tokens: None,
            preview_chars: d_preview(),
        }
    }
}

/// The summary limits in force: the declared ones, or those derived from the
/// budget. Packets carry these, and `settle` enforces them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SummaryBounds {
    /// Most characters of summary.
    pub max_chars: u64,
    /// Most output tokens of summary.
    pub max_tokens: u64,
    /// Characters of the derived preview.
    pub preview_chars: u64,
}

/// How added compaction instructions combine with the built-in prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase")]
pub enum InstructionMode {
    /// Append after the built-in prompt.
    Append,
    /// Replace the built-in prompt.
    Replace,
}

/// Compaction instructions added to, or replacing, the built-in prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Instructions {
    /// Append or replace.
    pub mode: InstructionMode,
    /// The instruction text.
    pub text: String,
}

/// A target or compactor declaration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Declaration {
    /// Target or compactor.
    #[serde(default)]
    pub role: DeclarationRole,
    /// The ordinary agent's id.
    pub target_id: String,
    /// The reciprocal compactor's id.
    pub compactor_id: String,
    /// Whether eager compaction and warm candidates are enabled. Safety
    /// compaction at the budget's hard limit cannot be disabled (seed 002).
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Provider profile and model.
    #[serde(default)]
    pub model_profile: ModelProfile,
    /// Source patterns admitted (`*` matches any run of characters); empty admits all.
    #[serde(default)]
    pub sources: Vec<String>,
    /// Privacy admission.
    #[serde(default)]
    pub privacy: Privacy,
    /// Agent ids whose turns are admitted as conversation history; empty admits all.
    #[serde(default)]
    pub history_agents: Vec<String>,
    /// Subscribed documents and their budget.
    #[serde(default)]
    pub documents: Documents,
    /// The budget.
    #[serde(default)]
    pub budget: Budget,
    /// Bounds of one frozen prefix.
    #[serde(default)]
    pub prefix_bounds: PrefixBounds,
    /// Summary limits.
    #[serde(default)]
    pub summary: SummaryLimits,
    /// Most characters of a rendered covered-history amendment.
    #[serde(default = "d_amend")]
    pub amendment_max_chars: u64,
    /// Added or replacing compaction instructions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<Instructions>,
    /// Consecutive failed runs after which automatic compaction pauses.
    #[serde(default = "d_failures")]
    pub max_consecutive_failures: u64,
    /// New turns after the last failure before a paused breaker tries once
    /// more (half-open).
    #[serde(default = "d_retry_after")]
    pub breaker_retry_after: u64,
}
fn yes() -> bool {
    true
}
fn d_amend() -> u64 {
    8_000
}
fn d_failures() -> u64 {
    3
}
fn d_retry_after() -> u64 {
    10
}

impl Declaration {
    /// A declaration with every default, for the given pair of ids.
    pub fn new(target_id: impl Into<String>, compactor_id: impl Into<String>) -> Self {
        Declaration {
            role: DeclarationRole::Target,
            target_id: target_id.into(),
            compactor_id: compactor_id.into(),
            enabled: true,
            model_profile: ModelProfile::default(),
            sources: Vec::new(),
            privacy: Privacy::default(),
            history_agents: Vec::new(),
            documents: Documents::default(),
            budget: Budget::default(),
            prefix_bounds: PrefixBounds::default(),
            summary: SummaryLimits::default(),
            amendment_max_chars: d_amend(),
            instructions: None,
            max_consecutive_failures: d_failures(),
            breaker_retry_after: d_retry_after(),
        }
    }

    /// The declaration fingerprint: hash of its canonical encoding.
    pub fn fingerprint(&self) -> String {
        thread_local! {
            static LAST: canonical::Memo<Declaration, String> = const { std::cell::RefCell::new(None) };
        }
        canonical::remembered(&LAST, self, canonical::hash)
    }

    /// The reciprocal compactor declaration of a target: the same pair,
    /// budget and admissions under the compactor role. Drivers check the
    /// pair's agreement on every resolve with this unless given the
    /// compactor's own declaration.
    pub fn reciprocal(&self) -> Declaration {
        Declaration {
            role: DeclarationRole::Compactor,
            ..self.clone()
        }
    }

    /// Whether a message source is admitted by the source patterns.
    pub fn admits_source(&self, source: &str) -> bool {
        self.sources.is_empty() || self.sources.iter().any(|p| glob(p, source))
    }

    /// Whether a turn from `source`, by `agent`, sensitive or not, may
    /// enter the model-bound projection (`history/standing.rs`).
    pub fn admits(&self, source: &str, agent: Option<&str>, sensitive: bool) -> bool {
        self.admits_source(source)
            && self.admits_agent(agent)
            && (!sensitive || self.privacy.admit_sensitive)
    }

    /// Whether a turn by this author agent is admitted as history.
    pub fn admits_agent(&self, agent: Option<&str>) -> bool {
        match agent {
            None => true,
            Some(a) => self.history_agents.is_empty() || self.history_agents.iter().any(|h| h == a),
        }
    }
}

/// `*`-only glob match, iterative (no backtracking blow-up).
fn glob(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0usize, 0usize);
    let (mut star, mut mark) = (None::<usize>, 0usize);
    while ti < t.len() {
        if pi < p.len() && p[pi] != '*' && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

/// The unit sizes are measured in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase")]
pub enum Metric {
    /// Unicode scalar values.
    Chars,
    /// Tokens (host counts, else the estimate).
    Tokens,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_matches_stars() {
        assert!(glob("telegram:*", "telegram:123"));
        assert!(glob("*", ""));
        assert!(glob("a*b*c", "axxbyyc"));
        assert!(!glob("a*b", "ac"));
        assert!(!glob("tele", "telegram"));
    }
}
