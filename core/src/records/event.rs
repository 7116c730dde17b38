//! Journal events: the immutable record foldline reads and never edits.

use foldline_derive::{Decode, Encode};
use serde::Serialize;

use crate::error::{Code, Error, Result};
use crate::records::boundary::Boundary;
pub use crate::records::boundary::TriggerKind;
use crate::records::frontier::Frontier;
use crate::records::turn::{Part, Role, Route};

/// One journal event. Tagged by `type`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum Event {
    /// A source message.
    Message(Message),
    /// A message delivered after newer messages (same shape as a message).
    LateDelivery(Message),
    /// A correction of an earlier turn's content.
    Correction(Correction),
    /// A settled compaction boundary.
    Boundary(Box<Boundary>),
    /// An activation-frontier document.
    Frontier(Frontier),
    /// A manual-compaction task's lifecycle event.
    CompactionTask(TaskEvent),
    /// A failed compaction run (the reason is for audit only).
    CompactionFailed(FailureEvent),
    /// A turn described by its metadata only (sizes, role, tool links, hash),
    /// for hot paths that keep content on the host side: `select` with
    /// `render: false` answers which turns to keep, and a plan that must
    /// freeze it asks for its content with `needs_content`.
    TurnMeta(TurnMeta),
}

impl Event {
    /// The source sequence of a turn-bearing event (a message, a late
    /// delivery, a turn's metadata); `None` for every other event. A host
    /// numbers new messages after the greatest of these.
    pub fn turn_seq(&self) -> Option<u64> {
        match self {
            Event::Message(m) | Event::LateDelivery(m) => Some(m.source_seq),
            Event::TurnMeta(t) => Some(t.source_seq),
            _ => None,
        }
    }

    /// Whether the event is a pinned turn (a system or developer message, a
    /// document, a turn marked pinned): never folded.
    pub fn is_pinned(&self) -> bool {
        match self {
            Event::Message(m) | Event::LateDelivery(m) => m.pinned || m.role.always_pinned(),
            Event::TurnMeta(t) => t.pinned || t.role.always_pinned(),
            _ => false,
        }
    }

    /// The turn id of a turn-bearing event; `None` for every other event.
    pub fn turn_id(&self) -> Option<&str> {
        match self {
            Event::Message(m) | Event::LateDelivery(m) => Some(&m.turn_id),
            Event::TurnMeta(t) => Some(&t.turn_id),
            _ => None,
        }
    }
}

/// A turn's metadata without its content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TurnMeta {
    /// Conversation id.
    pub conversation: String,
    /// Chat id.
    #[serde(default)]
    pub chat: String,
    /// Sender id.
    #[serde(default)]
    pub sender: String,
    /// Message source.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source: String,
    /// Source sequence.
    pub source_seq: u64,
    /// Position inside the group.
    #[serde(default)]
    pub index: u32,
    /// Unique turn id.
    pub turn_id: String,
    /// Who speaks.
    pub role: Role,
    /// Authoring agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author_agent: Option<String>,
    /// Characters of the content.
    pub chars: u64,
    /// Tokens, when the host has a tokenizer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    /// The content hash.
    pub content_hash: String,
    /// Call ids of the tool calls the turn makes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<String>,
    /// Call ids of the tool results the turn carries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_results: Vec<String>,
    /// Never fold.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pinned: bool,
    /// Sensitive.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sensitive: bool,
}

impl TurnMeta {
    /// The metadata of a message (what a host keeps beside it, computed once
    /// when the message arrives; `turnMeta()` in the JS package). Uses the
    /// message's recorded content hash when it has one.
    pub fn of(m: &Message) -> TurnMeta {
        let ids = |result: bool| {
            m.parts
                .iter()
                .filter_map(|p| match p.link() {
                    Some((id, answers)) if answers == result => Some(id.to_owned()),
                    _ => None,
                })
                .collect()
        };
        TurnMeta {
            conversation: m.conversation.clone(),
            chat: m.chat.clone(),
            sender: m.sender.clone(),
            source: m.source.clone(),
            source_seq: m.source_seq,
            index: m.index,
            turn_id: m.turn_id.clone(),
            role: m.role,
            author_agent: m.author_agent.clone(),
            chars: crate::records::turn::parts_chars(&m.parts),
            tokens: m.tokens,
            content_hash: m
                .content_hash
                .clone()
                .unwrap_or_else(|| crate::records::turn::content_hash(&m.parts)),
            tool_calls: ids(false),
            tool_results: ids(true),
            pinned: m.pinned,
            sensitive: m.sensitive,
        }
    }

    /// Whether the turn is on the given route.
    pub fn on_route(&self, r: &Route) -> bool {
        r.holds(&self.conversation, &self.chat)
    }
}

/// A source message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Message {
    /// Conversation id.
    pub conversation: String,
    /// Chat id.
    #[serde(default)]
    pub chat: String,
    /// Sender id.
    #[serde(default)]
    pub sender: String,
    /// Message source (matched against the declaration's source patterns).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source: String,
    /// Source sequence; turns sharing one form a source group.
    pub source_seq: u64,
    /// Position inside the group.
    #[serde(default)]
    pub index: u32,
    /// Unique turn id.
    pub turn_id: String,
    /// Who speaks.
    pub role: Role,
    /// Authoring agent, for agent turns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author_agent: Option<String>,
    /// Content.
    pub parts: Vec<Part>,
    /// Token count from the host's real tokenizer, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    /// Never fold this turn (system, instructions and documents always are).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pinned: bool,
    /// Sensitive content.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sensitive: bool,
    /// The content hash ([`crate::turn::content_hash`] of `parts`), computed
    /// once when the message entered the journal. When present the core uses
    /// it instead of hashing the content again on every call; the journal is
    /// the trust root for it, as for the content itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_hash: Option<String>,
}

impl Message {
    /// A turn of `conversation` (no chat, no sender) with every optional
    /// field at its default: what a Rust host builds for a new message.
    pub fn new(
        conversation: &str,
        source_seq: u64,
        turn_id: &str,
        role: Role,
        parts: Vec<Part>,
    ) -> Message {
        Message {
            conversation: conversation.to_owned(),
            chat: String::new(),
            sender: String::new(),
            source: String::new(),
            source_seq,
            index: 0,
            turn_id: turn_id.to_owned(),
            role,
            author_agent: None,
            parts,
            tokens: None,
            pinned: false,
            sensitive: false,
            content_hash: None,
        }
    }

    /// The message's route.
    pub fn route(&self) -> Route {
        Route {
            conversation: self.conversation.clone(),
            chat: self.chat.clone(),
            sender: self.sender.clone(),
        }
    }

    /// Whether the message is on the given route.
    pub fn on_route(&self, r: &Route) -> bool {
        r.holds(&self.conversation, &self.chat)
    }
}

/// A correction of an earlier turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Correction {
    /// The corrected turn.
    pub turn_id: String,
    /// Order among corrections of the same turn; the highest wins.
    pub correction_seq: u64,
    /// The new content.
    pub parts: Vec<Part>,
    /// Token count of the new content, when the host has a tokenizer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
}

/// State of a manual-compaction task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase")]
pub enum TaskState {
    /// Accepted, running.
    Requested,
    /// Finished with a boundary.
    Completed,
    /// Finished without one.
    Failed,
}

/// A manual-compaction task event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskEvent {
    /// Task id.
    pub task_id: String,
    /// New state.
    pub state: TaskState,
    /// Who asked.
    pub actor: String,
    /// The journal head (last source sequence) the task was accepted at.
    pub head_seq: u64,
    /// The boundary it produced (completed tasks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boundary_id: Option<String>,
}

/// A failed compaction run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FailureEvent {
    /// Run id.
    pub run_id: String,
    /// Packet the run tried to settle.
    pub packet_id: String,
    /// The chain head the run tried to extend (`None`: no boundary yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_boundary_id: Option<String>,
    /// Automatic or manual.
    #[serde(default)]
    pub trigger: TriggerKind,
    /// Journal head when it failed.
    pub head_seq: u64,
    /// What kind of failure it was, as a field (`providerRefusal`,
    /// `timeout`, `budgetStop`, `unusableSummary`, `streamDropped`, `other`);
    /// absent only in records written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<FailureKind>,
    /// Audit reason (never shown to members).
    pub reason: String,
}

/// Kinds of compaction failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase")]
pub enum FailureKind {
    /// The provider refused the request.
    ProviderRefusal,
    /// The call timed out.
    Timeout,
    /// A budget (spend, tokens, rate) stopped the call.
    BudgetStop,
    /// The summary was rejected by settle.
    UnusableSummary,
    /// The stream dropped and could not be replayed.
    StreamDropped,
    /// Anything else (transport, host error).
    Other,
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
