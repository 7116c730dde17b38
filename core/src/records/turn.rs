//! Messages, content parts and effective turns, with their sizes and hashes.

use foldline_derive::{Decode, Encode};
use serde::Serialize;

use crate::canonical;
use crate::error::{Code, Error, Result};

/// Who speaks a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase")]
pub enum Role {
    /// System prompt; always pinned.
    System,
    /// Developer / standing instructions; always pinned.
    Developer,
    /// A trusted identity or memory document; always pinned.
    Document,
    /// The member.
    User,
    /// The agent.
    Assistant,
    /// A tool's result.
    Tool,
}

impl Role {
    /// Roles that are never folded into a summary.
    pub fn always_pinned(self) -> bool {
        matches!(self, Role::System | Role::Developer | Role::Document)
    }
}

/// One part of a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(tag = "type", rename_all = "camelCase", deny_unknown_fields)]
pub enum Part {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// A tool call made by the assistant.
    #[serde(rename_all = "camelCase")]
    ToolCall {
        /// The call id that links the result.
        call_id: String,
        /// Tool name.
        name: String,
        /// Arguments as JSON text (as OpenAI sends them); a custom tool's
        /// free-form input as given.
        arguments: String,
        /// An OpenAI custom tool call (`type: "custom"`, free-form `input`)
        /// rather than a function call.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        custom: bool,
        /// The AI SDK call's `providerOptions` (where Gemini 3 keeps the
        /// call's `thoughtSignature`), sent back in the AI SDK's form while
        /// the call's tool cycle is open, like [`Part::Reasoning`]; never
        /// counted.
        #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
        provider_options: serde_json::Value,
    },
    /// The result of a tool call.
    #[serde(rename_all = "camelCase")]
    ToolResult {
        /// The id of the call this answers.
        call_id: String,
        /// Tool name, when known.
        #[serde(default)]
        name: String,
        /// The result text.
        content: String,
        /// Whether the tool reported an error.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
    /// The assistant asks the member to approve a tool call before it runs
    /// (the AI SDK's `tool-approval-request`); kept in one unit with the call,
    /// the answer and the result.
    #[serde(rename_all = "camelCase")]
    ApprovalRequest {
        /// The approval's id, which the answer names.
        approval_id: String,
        /// The call it is for.
        call_id: String,
    },
    /// The member's answer to an approval request (the AI SDK's
    /// `tool-approval-response`).
    #[serde(rename_all = "camelCase")]
    ApprovalResponse {
        /// The approval it answers.
        approval_id: String,
        /// Granted or denied.
        approved: bool,
        /// Why, when given.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        reason: String,
    },
    /// The model's reasoning as its provider returned it (an Anthropic
    /// `thinking` or `redacted_thinking` block, an AI SDK `reasoning` part,
    /// an OpenAI Responses `reasoning` item with its encrypted content),
    /// kept as the provider wrote it. Providers with extended thinking refuse
    /// a tool cycle whose last assistant turn lacks it, so it is sent back in
    /// its own format while the tool cycle it belongs to is open
    /// (`render/reasoning.rs`); it is never counted, summarized or shown as
    /// text.
    Reasoning {
        /// The format it came in and alone goes back to.
        format: crate::records::provider::Format,
        /// The block or part, as it came.
        data: serde_json::Value,
    },
}

impl Part {
    /// Characters this part contributes (Unicode scalar values).
    pub fn chars(&self) -> u64 {
        self.measure(foldline_json::char_count)
    }

    /// The counted text of this part measured by `size` (characters for
    /// [`Part::chars`]; a host gauging memory measures bytes, `str::len`).
    pub fn measure(&self, size: impl Fn(&str) -> usize) -> u64 {
        let n = match self {
            Part::Text { text } => size(text),
            Part::ToolCall {
                name, arguments, ..
            } => size(name) + size(arguments),
            Part::ToolResult { content, .. } => size(content),
            Part::ApprovalRequest { .. } => 0,
            Part::ApprovalResponse { reason, .. } => size(reason),
            // Providers count only the open tool cycle's reasoning, which
            // the model wrote inside its output reserve.
            Part::Reasoning { .. } => 0,
        };
        n as u64
    }

    /// The id this part links by, and whether it answers (a tool result, an
    /// approval's answer) rather than asks (a tool call, an approval
    /// request): a cut may never fall between an ask and its answer.
    pub fn link(&self) -> Option<(&str, bool)> {
        match self {
            Part::ToolCall { call_id, .. } => Some((call_id, false)),
            Part::ToolResult { call_id, .. } => Some((call_id, true)),
            Part::ApprovalRequest { approval_id, .. } => Some((approval_id, false)),
            Part::ApprovalResponse { approval_id, .. } => Some((approval_id, true)),
            Part::Text { .. } | Part::Reasoning { .. } => None,
        }
    }
}

/// Characters of a list of parts.
pub fn parts_chars(parts: &[Part]) -> u64 {
    parts.iter().map(Part::chars).sum()
}

/// The documented deterministic token estimate used when the host supplies no
/// count: one token per four characters, rounded up, plus four tokens of
/// per-message overhead.
pub fn estimate_tokens(chars: u64) -> u64 {
    chars.div_ceil(4) + crate::defaults::MESSAGE_OVERHEAD_TOKENS
}

/// The content hash of a list of parts: SHA-256 of their canonical encoding.
pub fn content_hash(parts: &[Part]) -> String {
    canonical::hash(parts)
}

/// The text of a turn's parts as one string (tool calls and results rendered).
pub fn render_parts(parts: &[Part]) -> String {
    let mut out = String::new();
    for (i, p) in parts
        .iter()
        .filter(|p| !matches!(p, Part::Reasoning { .. }))
        .enumerate()
    {
        if i > 0 {
            out.push('\n');
        }
        match p {
            Part::Reasoning { .. } => {}
            Part::Text { text } => out.push_str(text),
            Part::ToolCall {
                name, arguments, ..
            } => {
                out.push_str("[tool call ");
                out.push_str(name);
                out.push_str("] ");
                out.push_str(arguments);
            }
            Part::ToolResult {
                name,
                content,
                is_error,
                ..
            } => {
                out.push_str(if *is_error {
                    "[tool error"
                } else {
                    "[tool result"
                });
                if !name.is_empty() {
                    out.push(' ');
                    out.push_str(name);
                }
                out.push_str("] ");
                out.push_str(content);
            }
            Part::ApprovalRequest { .. } => out.push_str("[tool approval requested]"),
            Part::ApprovalResponse {
                approved, reason, ..
            } => {
                out.push_str(if *approved {
                    "[tool approved]"
                } else {
                    "[tool denied]"
                });
                if !reason.is_empty() {
                    out.push(' ');
                    out.push_str(reason);
                }
            }
        }
    }
    out
}

/// Where a conversation lives: the route every turn and boundary is bound to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Encode, Decode, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Route {
    /// Conversation id.
    pub conversation: String,
    /// Chat id (the room or thread).
    #[serde(default)]
    pub chat: String,
    /// Sender id: the member the conversation belongs to (its owner).
    #[serde(default)]
    pub sender: String,
}

impl Route {
    /// Whether a turn of this conversation and chat (room) is on this route.
    ///
    /// The route binds the room, not the speaker: private and collaborative
    /// rooms use the same projection (seed 002), so the turns of every member
    /// of a room are on its route, each keeping its own `sender` in the
    /// journal. The route's `sender` names the member the conversation
    /// belongs to and is bound into frontiers, packets and boundaries.
    pub fn holds(&self, conversation: &str, chat: &str) -> bool {
        self.conversation == conversation && self.chat == chat
    }
}

/// An effective turn: a source message after corrections are applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Turn {
    /// Unique turn id.
    pub turn_id: String,
    /// Source sequence: turns with one source sequence form one source group.
    pub source_seq: u64,
    /// Position inside the source group.
    pub index: u32,
    /// Who speaks.
    pub role: Role,
    /// Authoring agent, for agent turns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author_agent: Option<String>,
    /// The member who sent it (in a room, who of its members).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sender: String,
    /// Message source (e.g. `telegram:42`), matched against declaration patterns.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source: String,
    /// Effective content.
    pub parts: Vec<Part>,
    /// Characters of the content.
    pub chars: u64,
    /// Tokens: the host's count when given, else the estimate.
    pub tokens: u64,
    /// Hash of the effective content.
    pub content_hash: String,
    /// Never folded.
    pub pinned: bool,
    /// Marked sensitive by the source.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sensitive: bool,
    /// Delivered late (after newer turns).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub late: bool,
    /// Content differs from the original message because of a correction.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub corrected: bool,
    /// Only metadata is known (a `turnMeta` event): `parts` is empty.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub metadata_only: bool,
    /// Tool-call ids of a metadata-only turn.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub meta_calls: Vec<String>,
    /// Tool-result ids of a metadata-only turn.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub meta_results: Vec<String>,
    /// Said by a member of a room whose turns come from several: the
    /// model-visible copy names the sender, and `chars` and `tokens` count
    /// the label (`history/speakers.rs`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub attributed: bool,
}

impl Turn {
    /// Ordering key: source sequence, index, turn id.
    pub fn key(&self) -> (u64, u32, &str) {
        (self.source_seq, self.index, &self.turn_id)
    }

    /// The call ids of tool calls in this turn.
    pub fn call_ids(&self) -> impl Iterator<Item = &str> {
        self.parts
            .iter()
            .filter_map(|p| match p.link() {
                Some((id, false)) => Some(id),
                _ => None,
            })
            .chain(self.meta_calls.iter().map(String::as_str))
    }

    /// The call ids this turn answers.
    pub fn result_ids(&self) -> impl Iterator<Item = &str> {
        self.parts
            .iter()
            .filter_map(|p| match p.link() {
                Some((id, true)) => Some(id),
                _ => None,
            })
            .chain(self.meta_results.iter().map(String::as_str))
    }

    /// Whether the turn starts with a tool result (may never start a tail).
    pub fn starts_with_tool_result(&self) -> bool {
        self.role == Role::Tool
            || matches!(self.parts.first().and_then(Part::link), Some((_, true)))
            || (self.metadata_only && !self.meta_results.is_empty() && self.meta_calls.is_empty())
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streamed_content_hash_equals_the_canonical_hash() {
        let parts = vec![
            Part::Text {
                text: "héllo \"quoted\"\n\u{1}".into(),
            },
            Part::ToolCall {
                call_id: "c1".into(),
                name: "f".into(),
                arguments: "{\"a\":1}".into(),
                custom: false,
                provider_options: serde_json::Value::Null,
            },
            Part::ToolResult {
                call_id: "c1".into(),
                name: "f".into(),
                content: "r".into(),
                is_error: false,
            },
            Part::ToolResult {
                call_id: "c2".into(),
                name: String::new(),
                content: "e".into(),
                is_error: true,
            },
        ];
        // derive(Encode) writes what serde's encoding, keys sorted, writes.
        let via_serde = canonical::encode_value(&serde_json::to_value(&parts).unwrap());
        assert_eq!(content_hash(&parts), canonical::sha256(&via_serde));
        assert_eq!(content_hash(&[]), canonical::sha256(b"[]"));
    }
}
