//! Builders shared by the core's integration tests.
#![allow(dead_code)]

use foldline_core::declaration::{Budget, Declaration};
use foldline_core::event::{Correction, Event, FailureEvent, Message, TriggerKind};
use foldline_core::frontier::Frontier;
use foldline_core::plan::{plan, PlanOutcome, PlanRequest, Trigger};
use foldline_core::turn::{Part, Role, Route};

pub fn route() -> Route {
    Route {
        conversation: "conv-1".into(),
        chat: "chat-1".into(),
        sender: "member-1".into(),
    }
}

pub fn text(s: &str) -> Vec<Part> {
    vec![Part::Text { text: s.into() }]
}

pub fn message(seq: u64, index: u32, id: &str, role: Role, parts: Vec<Part>) -> Message {
    let r = route();
    Message {
        conversation: r.conversation,
        chat: r.chat,
        sender: r.sender,
        source: String::new(),
        source_seq: seq,
        index,
        turn_id: id.into(),
        role,
        author_agent: None,
        parts,
        tokens: None,
        pinned: false,
        sensitive: false,
    }
}

pub fn msg(seq: u64, id: &str, role: Role, body: &str) -> Event {
    Event::Message(message(seq, 0, id, role, text(body)))
}

/// `n` turns, alternating user/assistant, one per source sequence starting at
/// `first`, each exactly `size` characters.
pub fn turns(first: u64, n: u64, size: usize) -> Vec<Event> {
    (first..first + n)
        .map(|s| {
            let role = if s % 2 == 1 {
                Role::User
            } else {
                Role::Assistant
            };
            let body: String = format!("t{s}:")
                .chars()
                .chain(std::iter::repeat('x'))
                .take(size)
                .collect();
            msg(s, &format!("t{s}"), role, &body)
        })
        .collect()
}

pub fn chars_decl(trigger: u64, retain: u64) -> Declaration {
    let mut d = Declaration::new("agent", "agent-compactor");
    d.budget = Budget::Chars { trigger, retain };
    d.summary.max_chars = 500;
    d
}

pub fn request(decl: &Declaration, events: Vec<Event>) -> PlanRequest {
    PlanRequest {
        declaration: decl.clone(),
        route: route(),
        owner: Some("member-1".into()),
        frontier: None,
        head: None,
        amendment: None,
        events,
        trigger: Trigger::Automatic,
        warm: None,
    }
}

/// Activate on `events` and return the frontier.
pub fn activate(decl: &Declaration, events: Vec<Event>) -> Frontier {
    match plan(&request(decl, events)) {
        PlanOutcome::Activate { frontier } => frontier,
        other => panic!("expected activate, got {other:?}"),
    }
}

pub fn correction(turn: &str, seq: u64, body: &str) -> Event {
    Event::Correction(Correction {
        turn_id: turn.into(),
        correction_seq: seq,
        parts: text(body),
        tokens: None,
    })
}

pub fn failure(run: &str, previous: Option<&str>) -> Event {
    Event::CompactionFailed(FailureEvent {
        run_id: run.into(),
        packet_id: "sha256:0".into(),
        previous_boundary_id: previous.map(Into::into),
        trigger: TriggerKind::Automatic,
        head_seq: 0,
        reason: "timeout".into(),
    })
}

pub fn code_of(o: &PlanOutcome) -> Option<&'static str> {
    match o {
        PlanOutcome::Refuse { error, .. } => Some(error.code.as_str()),
        _ => None,
    }
}
