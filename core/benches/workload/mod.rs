//! Deterministic workloads shared by the benchmarks.
#![allow(dead_code)]

use foldline_core::boundary::ChainHead;
use foldline_core::declaration::{Budget, Declaration};
use foldline_core::event::{Event, Message};
use foldline_core::frontier::Frontier;
use foldline_core::plan::{plan, PlanOutcome, PlanRequest, Trigger};
use foldline_core::turn::{Part, Role, Route};

pub fn route() -> Route {
    Route {
        conversation: "bench".into(),
        chat: "c".into(),
        sender: "s".into(),
    }
}

/// A chat-shaped turn: lengths cycle through short and long, every seventh
/// assistant turn is a tool call answered by the next turn.
pub fn turn(seq: u64) -> Event {
    let r = route();
    let len = [40usize, 180, 900, 60, 2_400, 120, 300][(seq % 7) as usize];
    let (role, parts) = match seq % 14 {
        6 => (
            Role::Assistant,
            vec![Part::ToolCall {
                call_id: format!("c{seq}"),
                name: "run_code".into(),
                arguments: "{\"code\":\"print(1)\"}".into(),
                custom: false,
                provider_options: serde_json::Value::Null,
            }],
        ),
        7 => (
            Role::Tool,
            vec![Part::ToolResult {
                call_id: format!("c{}", seq - 1),
                name: "run_code".into(),
                content: "o".repeat(len),
                is_error: false,
            }],
        ),
        s if s % 2 == 0 => (
            Role::User,
            vec![Part::Text {
                text: "u".repeat(len),
            }],
        ),
        _ => (
            Role::Assistant,
            vec![Part::Text {
                text: "a".repeat(len),
            }],
        ),
    };
    Event::Message(Message {
        chat: r.chat,
        sender: r.sender,
        ..Message::new(&r.conversation, seq, &format!("t{seq}"), role, parts)
    })
}

pub fn decl() -> Declaration {
    let mut d = Declaration::new("agent", "agent-compactor");
    d.budget = Budget::Chars {
        trigger: 80_000,
        retain: 40_000,
    };
    d
}

pub fn system() -> Event {
    let r = route();
    Event::Message(Message {
        conversation: r.conversation,
        chat: r.chat,
        sender: r.sender,
        source: String::new(),
        source_seq: 0,
        index: 0,
        turn_id: "system".into(),
        role: Role::System,
        author_agent: None,
        parts: vec![Part::Text {
            text: "You are a helpful assistant.".into(),
        }],
        tokens: None,
        pinned: false,
        sensitive: false,
        content_hash: None,
    })
}

pub fn frontier(d: &Declaration) -> Frontier {
    let req = PlanRequest {
        declaration: d.clone(),
        route: route(),
        owner: None,
        frontier: None,
        head: None,
        amendment: None,
        events: vec![turn(1)],
        trigger: Trigger::Automatic,
        warm: None,
        warm_held: false,
        carried: None,
        compression: Default::default(),
    };
    match plan(&req) {
        PlanOutcome::Activate { frontier } => *frontier,
        o => panic!("{o:?}"),
    }
}

/// The plan request a host sends on a new message when `history` turns lie
/// behind the latest boundary and `tail` turns follow it.
pub fn request_after_boundary(history: u64, tail: u64) -> PlanRequest {
    let d = decl();
    let f = frontier(&d);
    let head = ChainHead {
        boundary_id: "boundary:bench".into(),
        boundary_hash: "sha256:bench".into(),
        covered_through_seq: history,
        covered_through_turn_id: format!("t{history}"),
        frontier_id: f.id.clone(),
        summary: "s".repeat(4_000),
        length: history / 100,
    };
    let mut events = vec![system()];
    events.extend((history + 1..=history + tail).map(turn));
    PlanRequest {
        declaration: d,
        route: route(),
        owner: None,
        frontier: Some(f),
        head: Some(head),
        amendment: None,
        events,
        trigger: Trigger::Automatic,
        warm: None,
        warm_held: false,
        carried: None,
        compression: Default::default(),
    }
}
