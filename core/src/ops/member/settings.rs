//! The settings projection, the self-inspection answer and the plain-speak
//! prompt fragment, all rendered from one effective state.
//!
//! Availability and opt-in are separate: an available tool is still off until
//! the member opts in. The projection lists only the master preference, the
//! effective state of each tool with a safe off-reason, and always-on safety
//! compaction — no identity, credential, hidden prompt or raw policy data
//! (its inputs are booleans, so it cannot carry any).

use foldline_derive::{Decode, Encode};
use serde::Serialize;

/// Deployment availability flags (release gates).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Encode, Decode, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Availability {
    /// `MEMBER_COMPRESSION_ENABLED`: the settings surface exists.
    #[serde(default)]
    pub surface: bool,
    /// `MEMBER_TOOL_RESULT_COMPRESSION_ENABLED`.
    #[serde(default)]
    pub tool_result: bool,
    /// `MEMBER_PLAIN_SPEAK_COMPRESSION_ENABLED`.
    #[serde(default)]
    pub plain_speak: bool,
    /// `MEMBER_PROMPT_FLUFF_COMPRESSION_ENABLED`.
    #[serde(default)]
    pub prompt_trim: bool,
}

impl Availability {
    /// Nothing available (the default).
    pub fn is_off(&self) -> bool {
        *self == Availability::default()
    }
}

/// The member's own choices; everything defaults to off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Encode, Decode, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Preferences {
    /// Master compression preference.
    #[serde(default)]
    pub master: bool,
    /// Opted in to tool-result compression.
    #[serde(default)]
    pub tool_result: bool,
    /// Opted in to plain-speak responses.
    #[serde(default)]
    pub plain_speak: bool,
    /// Opted in to prompt trim.
    #[serde(default)]
    pub prompt_trim: bool,
}

/// Why a tool is off; safe to show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase")]
pub enum OffReason {
    /// Not released in this deployment.
    NotAvailable,
    /// The member's master preference is off.
    MasterOff,
    /// The member has not opted in.
    NotOptedIn,
}

impl OffReason {
    fn text(self) -> &'static str {
        match self {
            OffReason::NotAvailable => "not available",
            OffReason::MasterOff => "compression preference is off",
            OffReason::NotOptedIn => "not opted in",
        }
    }
}

/// One tool's effective state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolState {
    /// On or off.
    pub enabled: bool,
    /// Why off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub off_reason: Option<OffReason>,
}

/// The effective compression state captured at turn start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EffectiveState {
    /// The member's master preference.
    pub master: bool,
    /// Tool-result compression.
    pub tool_result: ToolState,
    /// Plain-speak responses.
    pub plain_speak: ToolState,
    /// Prompt trim.
    pub prompt_trim: ToolState,
    /// System safety compaction: always on, cannot be disabled.
    pub safety_compaction: bool,
}

/// A settings request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SettingsRequest {
    /// Availability flags.
    #[serde(default)]
    pub availability: Availability,
    /// Member preferences.
    #[serde(default)]
    pub preferences: Preferences,
    /// The member's message, to check for a settings question.
    #[serde(default)]
    pub message: Option<String>,
}

/// Projection, plain-speak fragment and self-inspection answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SettingsResponse {
    /// The effective state.
    pub state: EffectiveState,
    /// The bounded block appended after member-authored resource context.
    pub projection: String,
    /// The plain-speak system-prompt fragment, when plain-speak is on.
    pub plain_speak_prompt: Option<String>,
    /// The server-rendered answer that replaces the model's draft, when the
    /// message asks about these settings.
    pub self_inspection: Option<String>,
}

fn tool(surface: bool, available: bool, master: bool, opted: bool) -> ToolState {
    let off = if !surface || !available {
        Some(OffReason::NotAvailable)
    } else if !master {
        Some(OffReason::MasterOff)
    } else if !opted {
        Some(OffReason::NotOptedIn)
    } else {
        None
    };
    ToolState {
        enabled: off.is_none(),
        off_reason: off,
    }
}

/// Compute the effective state.
pub fn effective(a: &Availability, p: &Preferences) -> EffectiveState {
    let master = a.surface && p.master;
    EffectiveState {
        master,
        tool_result: tool(a.surface, a.tool_result, p.master, p.tool_result),
        plain_speak: tool(a.surface, a.plain_speak, p.master, p.plain_speak),
        prompt_trim: tool(a.surface, a.prompt_trim, p.master, p.prompt_trim),
        safety_compaction: true,
    }
}

fn line(name: &str, t: ToolState) -> String {
    match t.off_reason {
        None => format!("{name}: on"),
        Some(r) => format!("{name}: off ({})", r.text()),
    }
}

/// Render the projection block.
pub fn projection(s: &EffectiveState) -> String {
    [
        "[pipeline settings — server-authored; members cannot change this block]".to_owned(),
        format!(
            "Compression preference: {}",
            if s.master { "on" } else { "off" }
        ),
        line("Tool-result compression", s.tool_result),
        line("Plain-speak responses", s.plain_speak),
        line("Prompt trim", s.prompt_trim),
        "System safety compaction: always on".to_owned(),
    ]
    .join("\n")
}

/// The plain-speak skill's system-prompt fragment (a prompt skill, never a rewrite).
pub const PLAIN_SPEAK_PROMPT: &str = "Plain-speak: in visible thinking and final answers, use short sentences and common words; cut filler, hedges and repetition. Full clarity overrides terseness for security warnings, destructive-action confirmations, approval prompts, ordered multi-step instructions, and anything where shorter wording would be materially ambiguous.";

/// Topic phrases (as word sequences) of a settings question.
const TOPICS: &[&[&str]] = &[
    &["compression"],
    &["compaction"],
    &["prompt", "trim"],
    &["plain", "speak"],
    &["tool", "result"],
    &["pipeline", "settings"],
];
/// Words that make it a question about state.
const CUES: &[&str] = &[
    "what", "which", "status", "settings", "setting", "enabled", "disabled", "on", "off", "active",
    "using", "turned",
];

/// Whether a message asks about these settings: it names one of the tools
/// and asks about state (a question mark or a state word). Commands such as
/// `/compact` are not questions.
pub fn asks_about_settings(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    if m.trim_start().starts_with('/') {
        return false;
    }
    let words: Vec<&str> = m
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let topic = TOPICS
        .iter()
        .any(|t| words.windows(t.len()).any(|w| w == *t));
    let cue = m.contains('?') || words.iter().any(|w| CUES.contains(w));
    topic && cue
}

/// The server-rendered answer to a settings question.
pub fn answer(s: &EffectiveState) -> String {
    let body = projection(s);
    let lines: Vec<&str> = body.lines().skip(1).collect();
    format!(
        "Here are your current compression settings:\n- {}",
        lines.join("\n- ")
    )
}

/// Projection, fragment and answer for one request.
pub fn settings(req: &SettingsRequest) -> SettingsResponse {
    let state = effective(&req.availability, &req.preferences);
    SettingsResponse {
        projection: projection(&state),
        plain_speak_prompt: state
            .plain_speak
            .enabled
            .then(|| PLAIN_SPEAK_PROMPT.to_owned()),
        self_inspection: req
            .message
            .as_deref()
            .filter(|m| asks_about_settings(m))
            .map(|_| answer(&state)),
        state,
    }
}
