//! The three seams inside `select`, so every host shapes the model-bound
//! copy exactly the same way from one captured member state.
//!
//! - **Prompt trim** on the member's messages in the model-bound copy (the
//!   current prompt, else the member turns of the exact tail), before the
//!   context is assembled; the journal keeps the raw text.
//! - **Tool-result compression** on `run_code` results in the exact tail;
//!   every other tool, and sensitive (private) output, passes byte for byte.
//! - **Plain-speak** as a system fragment after the pinned system chain, and
//!   the **settings projection** after it (after member-authored resource
//!   context, so resource text cannot override it).
//!
//! While a tool is on, every eligible item of the copy is shaped, so the copy
//! is the same from one turn to the next (provider prompt caches keep
//! hitting), and each shaped item has its measurement in the manifest, named
//! by its turn (and call) id: a host's stats recorder keeps one record per
//! pass by that key, however often the context is asked for. A message that
//! asks about these settings gets the server-rendered answer
//! ([`Shaped::answer`]), which a host delivers instead of calling the model.

use std::collections::BTreeMap;

use foldline_derive::{Decode, Encode};
use serde::Serialize;
use serde_json::Value;

use super::settings::{self, Availability, EffectiveState, Preferences};
use super::tool_result::{self, ToolResultRequest};
use super::trim::{self, TrimRequest};
use super::{Measurement, Status};
use crate::records::boundary::Sizes;
use crate::records::turn::{Part, Role, Turn};
use crate::render::budget::{text_size, Metric};

/// The member's compression state as a host captured it when the run
/// started: the deployment's availability flags and the member's own
/// preferences. A change made later applies to runs started after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Encode, Decode, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MemberInput {
    /// Availability (the `MEMBER_*_ENABLED` flags).
    #[serde(default)]
    pub availability: Availability,
    /// The member's opt-ins (all off by default).
    #[serde(default)]
    pub preferences: Preferences,
}

/// Which pass a measurement is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase")]
pub enum PassTool {
    /// Prompt trim of one member message (or the prompt).
    PromptTrim,
    /// Tool-result compression of one tool result.
    ToolResult,
}

/// One pass's measurement, named by what it shaped (ids only: content-dark).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Pass {
    /// The tool.
    pub tool: PassTool,
    /// The turn it shaped (absent for a prompt not yet in the journal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    /// The tool call whose result it shaped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// Eligible and delivered bytes; applied, bypassed or failed.
    pub measurement: Measurement,
}

/// What the seams did, in the manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MemberManifest {
    /// The effective state the run used.
    pub state: EffectiveState,
    /// One measurement per shaped item (prompt trim of each member message,
    /// compression of each tool result), in context order; a recorder keeps
    /// one per key.
    pub passes: Vec<Pass>,
}

/// The shaped copy: replacement parts by position, the self-inspection
/// answer and the measurements.
#[derive(Debug, Default)]
pub(crate) struct Shaped {
    /// Replacement parts for tail turns, by index into the tail (empty, or
    /// one slot per tail turn).
    pub tail: Vec<Option<Vec<Part>>>,
    /// Replacement parts for the prompt.
    pub prompt: Option<Vec<Part>>,
    /// The server-rendered answer, when the newest message asks about settings.
    pub answer: Option<String>,
    /// What the seams did.
    pub manifest: Option<MemberManifest>,
}

/// Trim each text part; the parts (replaced only when something applied) and
/// one measurement for the message.
fn trim_parts(parts: &[Part]) -> (Option<Vec<Part>>, Measurement) {
    let mut out = Vec::with_capacity(parts.len());
    let mut changed = false;
    let mut m = Measurement {
        eligible_bytes: 0,
        delivered_bytes: 0,
        status: Status::Bypassed,
        reason: None,
        rules: Vec::new(),
    };
    let mut reasons: Vec<String> = Vec::new();
    for p in parts {
        let Part::Text { text } = p else {
            out.push(p.clone());
            continue;
        };
        let r = trim::trim(&TrimRequest { text: text.clone() });
        m.eligible_bytes += r.measurement.eligible_bytes;
        m.delivered_bytes += r.measurement.delivered_bytes;
        m.status = worse(m.status, r.measurement.status);
        reasons.extend(r.measurement.reason);
        for rule in r.measurement.rules {
            if !m.rules.contains(&rule) {
                m.rules.push(rule);
            }
        }
        changed |= r.text != *text;
        out.push(Part::Text { text: r.text });
    }
    if m.status != Status::Applied {
        m.reason = reasons.into_iter().next().or(Some("no_text".to_owned()));
    }
    (changed.then_some(out), m)
}

/// A failure outranks an application, which outranks a bypass.
fn worse(a: Status, b: Status) -> Status {
    match (a, b) {
        (Status::Failed, _) | (_, Status::Failed) => Status::Failed,
        (Status::Applied, _) | (_, Status::Applied) => Status::Applied,
        _ => Status::Bypassed,
    }
}

/// Compress one tool result's content: a JSON object is filtered field by
/// field; other text is treated as the tool's stdout.
fn compress_content(name: &str, private: bool, content: &str) -> (Option<String>, Measurement) {
    // The core's own parser and writer (serde_json's would add to the artifact).
    let parsed: Option<Value> = crate::decode::parse_value(content.as_bytes())
        .ok()
        .filter(Value::is_object);
    let wrapped = parsed.is_none();
    let result = parsed.unwrap_or_else(|| {
        let mut m = serde_json::Map::new();
        m.insert("stdout".to_owned(), Value::String(content.to_owned()));
        Value::Object(m)
    });
    let r = tool_result::compress(&ToolResultRequest {
        tool: name.to_owned(),
        private,
        result,
    });
    if r.measurement.status != Status::Applied {
        return (None, r.measurement);
    }
    let text = if wrapped {
        r.result
            .get("stdout")
            .and_then(Value::as_str)
            .map(str::to_owned)
    } else {
        String::from_utf8(crate::canonical::encode_value(&r.result)).ok()
    };
    match text {
        Some(t) => (Some(t), r.measurement),
        None => (
            None,
            Measurement::passthrough(content.len(), Status::Failed, "render_failed"),
        ),
    }
}

/// The system texts the state adds after the pinned turns, in order: the
/// plain-speak fragment (when on), then the settings projection.
pub(crate) fn fragments(input: &MemberInput) -> Vec<String> {
    let state = settings::effective(&input.availability, &input.preferences);
    let mut out = Vec::with_capacity(2);
    if state.plain_speak.enabled {
        out.push(settings::PLAIN_SPEAK_PROMPT.to_owned());
    }
    out.push(settings::projection(&state));
    out
}

/// The size of a context's fragments in `metric`, each measured as text.
pub(crate) fn fragments_size(metric: Metric, fragments: &[String]) -> u64 {
    fragments
        .iter()
        .map(|f| text_size(metric, foldline_json::char_count(f) as u64))
        .sum()
}

/// The most room any member's fragments take under `availability`: what
/// `plan` keeps beside the pinned turns, so that no member's context leaves
/// out a turn no summary covers to make room for them. None while the
/// surface is off (hosts then pass no member state). Two states bound every
/// other (`the_room_is_the_largest_of_every_member_state` tries all 16): the
/// longest projection (master off: every available tool gives the longest
/// off-reason), and the plain-speak fragment with the longest projection
/// beside it (master and plain-speak on, nothing else opted in).
pub(crate) fn room(availability: Availability) -> Sizes {
    let mut room = Sizes::default();
    if availability.surface {
        let speak = Preferences {
            master: true,
            plain_speak: true,
            ..Preferences::default()
        };
        for preferences in [Preferences::default(), speak] {
            let f = fragments(&MemberInput {
                availability,
                preferences,
            });
            room.chars = room.chars.max(fragments_size(Metric::Chars, &f));
            room.tokens = room.tokens.max(fragments_size(Metric::Tokens, &f));
        }
    }
    room
}

/// [`room`] for a native host's admission: the pinned turns a host
/// admits must leave the members' fragments this room too, or no
/// compaction could fit beside them (`Driver::check_events`). Not in the
/// artifact: the JS package measures the same with `select`.
#[cfg(not(target_arch = "wasm32"))]
pub fn fragments_room(availability: Availability) -> Sizes {
    room(availability)
}

/// Shape the model-bound copy of `tail` and `prompt` for `input`.
pub(crate) fn shape(input: &MemberInput, tail: &[&Turn], prompt: Option<&[Part]>) -> Shaped {
    let state = settings::effective(&input.availability, &input.preferences);
    let newest = match prompt {
        Some(_) => None,
        None => tail.iter().rposition(|t| t.role == Role::User),
    };
    let message = match (prompt, newest) {
        (Some(p), _) => Some(crate::render::format::texts(p)),
        (None, Some(i)) => Some(crate::render::format::texts(&tail[i].parts)),
        _ => None,
    };
    let mut shaped = Shaped {
        tail: vec![None; tail.len()],
        answer: message
            .filter(|m| settings::asks_about_settings(m))
            .map(|_| settings::answer(&state)),
        ..Shaped::default()
    };
    let mut passes = Vec::new();
    if state.prompt_trim.enabled {
        if let Some(p) = prompt {
            let (parts, m) = trim_parts(p);
            shaped.prompt = parts;
            passes.push(Pass {
                tool: PassTool::PromptTrim,
                turn_id: None,
                call_id: None,
                measurement: m,
            });
        }
        for (i, t) in tail
            .iter()
            .enumerate()
            .filter(|(_, t)| t.role == Role::User)
        {
            let (parts, m) = trim_parts(&t.parts);
            if let Some(parts) = parts {
                shaped.tail[i] = Some(parts);
            }
            passes.push(Pass {
                tool: PassTool::PromptTrim,
                turn_id: Some(t.turn_id.clone()),
                call_id: None,
                measurement: m,
            });
        }
    }
    if state.tool_result.enabled {
        compress_results(tail, &mut shaped, &mut passes);
    }
    shaped.manifest = Some(MemberManifest { state, passes });
    shaped
}

/// Compress every tool result of the tail, each with its measurement.
fn compress_results(tail: &[&Turn], shaped: &mut Shaped, passes: &mut Vec<Pass>) {
    let mut names: BTreeMap<&str, &str> = BTreeMap::new();
    for t in tail {
        for p in &t.parts {
            if let Part::ToolCall { call_id, name, .. } = p {
                names.insert(call_id, name);
            }
        }
    }
    for (i, t) in tail.iter().enumerate() {
        if !t.parts.iter().any(|p| matches!(p, Part::ToolResult { .. })) {
            continue;
        }
        let base: &[Part] = shaped.tail[i].as_deref().unwrap_or(&t.parts);
        let mut parts = Vec::with_capacity(base.len());
        let mut changed = false;
        for p in base {
            let Part::ToolResult {
                call_id,
                name,
                content,
                is_error,
            } = p
            else {
                parts.push(p.clone());
                continue;
            };
            let tool = if name.is_empty() {
                names.get(call_id.as_str()).copied().unwrap_or("")
            } else {
                name.as_str()
            };
            let (text, m) = compress_content(tool, t.sensitive, content);
            passes.push(Pass {
                tool: PassTool::ToolResult,
                turn_id: Some(t.turn_id.clone()),
                call_id: Some(call_id.clone()),
                measurement: m,
            });
            changed |= text.is_some();
            parts.push(Part::ToolResult {
                call_id: call_id.clone(),
                name: name.clone(),
                content: text.unwrap_or_else(|| content.clone()),
                is_error: *is_error,
            });
        }
        if changed {
            shaped.tail[i] = Some(parts);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bits(b: u8) -> [bool; 4] {
        [b & 1 != 0, b & 2 != 0, b & 4 != 0, b & 8 != 0]
    }

    #[test]
    fn the_room_is_the_largest_of_every_member_state() {
        for a in 0u8..16 {
            let [surface, tool_result, plain_speak, prompt_trim] = bits(a);
            let availability = Availability {
                surface,
                tool_result,
                plain_speak,
                prompt_trim,
            };
            let mut largest = Sizes::default();
            for p in 0u8..16 {
                let [master, tool_result, plain_speak, prompt_trim] = bits(p);
                let f = fragments(&MemberInput {
                    availability,
                    preferences: Preferences {
                        master,
                        tool_result,
                        plain_speak,
                        prompt_trim,
                    },
                });
                largest.chars = largest.chars.max(fragments_size(Metric::Chars, &f));
                largest.tokens = largest.tokens.max(fragments_size(Metric::Tokens, &f));
            }
            let expected = if surface { largest } else { Sizes::default() };
            assert_eq!(room(availability), expected, "{availability:?}");
        }
    }
}
