//! Builders shared by the core's integration tests.
#![allow(dead_code)]

use foldline_core::declaration::{Budget, Declaration};
use foldline_core::event::{Correction, Event, FailureEvent, Message, TriggerKind};
use foldline_core::frontier::Frontier;
use foldline_core::plan::{plan, PlanOutcome, PlanRequest, Trigger};
use foldline_core::turn::{Part, Role, Route};

/// An exact turn of a context, to render.
pub fn context_message(role: Role, parts: Vec<Part>) -> foldline_core::format::ContextMessage {
    foldline_core::format::ContextMessage {
        kind: foldline_core::format::Kind::Turn,
        role,
        turn_id: None,
        parts,
    }
}

/// One text part.
pub fn text_part(t: &str) -> Part {
    Part::Text { text: t.into() }
}

/// A function call part, without provider options.
pub fn call_part(call_id: &str, name: &str, arguments: &str) -> Part {
    Part::ToolCall {
        call_id: call_id.into(),
        name: name.into(),
        arguments: arguments.into(),
        custom: false,
        provider_options: serde_json::Value::Null,
    }
}

/// A result part that is not an error.
pub fn result_part(call_id: &str, name: &str, content: &str) -> Part {
    Part::ToolResult {
        call_id: call_id.into(),
        name: name.into(),
        content: content.into(),
        is_error: false,
    }
}

pub fn route() -> Route {
    Route {
        conversation: "conv-1".into(),
        chat: "chat-1".into(),
        sender: "member-1".into(),
    }
}

/// A `select` request over `events` with no frontier, head or amendment,
/// in foldline's own form.
pub fn select_request(
    decl: &Declaration,
    events: Vec<Event>,
) -> foldline_core::select::SelectRequest {
    foldline_core::select::SelectRequest {
        declaration: decl.clone(),
        route: route(),
        frontier: None,
        head: None,
        amendment: None,
        events,
        prompt: None,
        prompt_sender: None,
        format: foldline_core::format::Format::Foldline,
        limit: None,
        render: true,
        member: None,
        carried: None,
    }
}

pub fn text(s: &str) -> Vec<Part> {
    vec![Part::Text { text: s.into() }]
}

pub fn message(seq: u64, index: u32, id: &str, role: Role, parts: Vec<Part>) -> Message {
    let r = route();
    Message {
        chat: r.chat,
        sender: r.sender,
        index,
        ..Message::new(&r.conversation, seq, id, role, parts)
    }
}

pub fn msg(seq: u64, id: &str, role: Role, body: &str) -> Event {
    Event::Message(message(seq, 0, id, role, text(body)))
}

/// `n` short turns, alternating user/assistant, with host-supplied token
/// counts of 100 each.
pub fn token_turns(n: u64) -> Vec<Event> {
    (1..=n)
        .map(|s| {
            let role = if s % 2 == 1 {
                Role::User
            } else {
                Role::Assistant
            };
            let mut m = message(s, 0, &format!("t{s}"), role, text(&format!("turn {s}")));
            m.tokens = Some(100);
            Event::Message(m)
        })
        .collect()
}

/// A turn at source `s` that the host counted as `tokens` tokens (its text
/// about four characters a token), alternating user/assistant.
pub fn counted_turn(s: u64, tokens: u64) -> Event {
    let mut e = turns(s, 1, (tokens * 4) as usize).remove(0);
    if let Event::Message(m) = &mut e {
        m.tokens = Some(tokens);
    }
    e
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
    d.summary.max_chars = Some(500);
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
        warm_held: false,
        carried: None,
        compression: Default::default(),
    }
}

/// Activate on `events` and return the frontier.
pub fn activate(decl: &Declaration, events: Vec<Event>) -> Frontier {
    match plan(&request(decl, events)) {
        PlanOutcome::Activate { frontier } => *frontier,
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
    failure_at(run, previous, 0)
}

/// A failed automatic run recorded when the journal's head was `head_seq`.
pub fn failure_at(run: &str, previous: Option<&str>, head_seq: u64) -> Event {
    Event::CompactionFailed(FailureEvent {
        run_id: run.into(),
        packet_id: "sha256:0".into(),
        previous_boundary_id: previous.map(Into::into),
        trigger: TriggerKind::Automatic,
        head_seq,
        kind: Some(foldline_core::stream::FailureKind::Timeout),
        reason: "timeout".into(),
    })
}

pub fn code_of(o: &PlanOutcome) -> Option<&'static str> {
    match o {
        PlanOutcome::Refuse { error, .. } => Some(error.code.as_str()),
        _ => None,
    }
}

use foldline_core::boundary::{Boundary, Usage};
use foldline_core::packet::Packet;
use foldline_core::resolve::{resolve, Resolution, ResolveRequest};
use foldline_core::settle::{settle, ModelOutput, SettleRequest};

pub fn output_for(p: &Packet, run: &str, summary: &str) -> ModelOutput {
    ModelOutput {
        packet_id: p.id.clone(),
        run_id: run.into(),
        model_id: "test-model".into(),
        usage: Usage {
            input_tokens: 1000,
            output_tokens: 50,
        },
        finish_reason: "stop".into(),
        summary: summary.into(),
    }
}

pub fn settle_ok(p: &Packet, run: &str, summary: &str) -> Boundary {
    settle(&SettleRequest {
        packet: p.clone(),
        output: output_for(p, run, summary),
        expected_run_id: None,
    })
    .expect("settle")
}

/// An in-memory journal driven through resolve → plan → settle, the way a
/// host driver runs it.
pub struct Sim {
    pub decl: Declaration,
    pub events: Vec<Event>,
    pub packets: Vec<Packet>,
    pub runs: u64,
    pub next_seq: u64,
    /// The deployment's member-compression availability, as a host passes
    /// it to every plan.
    pub compression: foldline_core::member::settings::Availability,
}

impl Sim {
    pub fn new(decl: Declaration) -> Sim {
        Sim {
            decl,
            events: Vec::new(),
            packets: Vec::new(),
            runs: 0,
            next_seq: 1,
            compression: Default::default(),
        }
    }

    pub fn resolve(&self) -> foldline_core::Result<Resolution> {
        resolve(&ResolveRequest {
            declaration: self.decl.clone(),
            compactor: None,
            route: route(),
            events: self.events.clone(),
            packets: self.packets.clone(),
            trusted: Vec::new(),
            verified: None,
        })
    }

    /// Append `n` turns of `size` characters.
    pub fn say(&mut self, n: u64, size: usize) {
        self.events.extend(turns(self.next_seq, n, size));
        self.next_seq += n;
    }

    /// One driver pass; returns the final plan outcome.
    pub fn step(&mut self) -> PlanOutcome {
        self.step_with(|runs, p| format!("summary {runs} through {}", p.covered_through_seq))
    }

    /// One driver pass whose model writes `summary(run number, packet)`.
    pub fn step_with(&mut self, summary: impl Fn(u64, &Packet) -> String) -> PlanOutcome {
        loop {
            let r = self.resolve().expect("resolve");
            let mut req = request(&self.decl, self.events.clone());
            req.frontier = r.frontier;
            req.head = r.head;
            req.amendment = r.amendment;
            req.carried = r.carried;
            req.compression = self.compression;
            match plan(&req) {
                PlanOutcome::Activate { frontier } => self.events.push(Event::Frontier(*frontier)),
                PlanOutcome::Compact { packet, .. } => {
                    self.runs += 1;
                    let text = summary(self.runs, &packet);
                    let b = settle_ok(&packet, &format!("run-{}", self.runs), &text);
                    self.packets.push(*packet.clone());
                    self.events.push(Event::Boundary(Box::new(b)));
                    return PlanOutcome::Compact { packet, warm: None };
                }
                other => return other,
            }
        }
    }

    pub fn boundaries(&self) -> Vec<Boundary> {
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::Boundary(b) => Some((**b).clone()),
                _ => None,
            })
            .collect()
    }
}

/// A chain of three boundaries on the default test declaration (retain
/// 10,000 of a 20,000 trigger), built by the driver loop.
pub fn three_links_with(decl: Declaration) -> Sim {
    let mut s = Sim::new(decl);
    s.say(1, 1_000);
    assert!(matches!(s.step(), PlanOutcome::Skip { .. }));
    for _ in 0..3 {
        s.say(20, 1_000);
        assert!(matches!(s.step(), PlanOutcome::Compact { .. }));
    }
    s
}

pub fn three_links() -> Sim {
    three_links_with(chars_decl(20_000, 10_000))
}

/// The same journal with its boundaries replaced by `f(boundaries)`.
pub fn with_boundaries(s: &Sim, f: impl Fn(&mut Vec<Boundary>)) -> Sim {
    let mut bs = s.boundaries();
    f(&mut bs);
    let mut t = Sim::new(s.decl.clone());
    t.packets = s.packets.clone();
    t.events = s
        .events
        .iter()
        .filter(|e| !matches!(e, Event::Boundary(_)))
        .cloned()
        .collect();
    t.events
        .extend(bs.into_iter().map(|b| Event::Boundary(Box::new(b))));
    t
}

pub fn rehash(b: &mut Boundary) {
    b.hash = b.compute_hash();
}

/// System prompt, a question, a tool call, its result, the answer.
pub fn tool_conversation() -> Vec<Event> {
    vec![
        msg(0, "sys", Role::System, "You are helpful."),
        msg(10, "q", Role::User, "What is 2+2?"),
        Event::Message(message(
            11,
            0,
            "call",
            Role::Assistant,
            vec![Part::ToolCall {
                call_id: "call_1".into(),
                name: "calc".into(),
                arguments: r#"{"expr":"2+2"}"#.into(),
                custom: false,
                provider_options: serde_json::Value::Null,
            }],
        )),
        Event::Message(message(
            12,
            0,
            "result",
            Role::Tool,
            vec![Part::ToolResult {
                call_id: "call_1".into(),
                name: "calc".into(),
                content: "4".into(),
                is_error: false,
            }],
        )),
        msg(13, "a", Role::Assistant, "It is 4."),
    ]
}

/// Every part kind: a custom tool call and a function call that needs the
/// member's approval, the denial (with its reason) and the error result it
/// led to, then the answer.
pub fn every_part_conversation() -> Vec<Event> {
    vec![
        msg(0, "sys", Role::System, "You are helpful."),
        msg(10, "q", Role::User, "Pay the invoice and grep the log."),
        Event::Message(message(
            11,
            0,
            "calls",
            Role::Assistant,
            vec![
                Part::Text {
                    text: "Checking.".into(),
                },
                Part::ToolCall {
                    call_id: "call_g".into(),
                    name: "grep".into(),
                    arguments: "error|warn".into(),
                    custom: true,
                    provider_options: serde_json::Value::Null,
                },
                Part::ToolCall {
                    call_id: "call_p".into(),
                    name: "pay".into(),
                    arguments: r#"{"invoice":7}"#.into(),
                    custom: false,
                    provider_options: serde_json::Value::Null,
                },
                Part::ApprovalRequest {
                    approval_id: "ap_1".into(),
                    call_id: "call_p".into(),
                },
            ],
        )),
        Event::Message(message(
            12,
            0,
            "answers",
            Role::Tool,
            vec![
                Part::ToolResult {
                    call_id: "call_g".into(),
                    name: "grep".into(),
                    content: "2 lines".into(),
                    is_error: false,
                },
                Part::ApprovalResponse {
                    approval_id: "ap_1".into(),
                    approved: false,
                    reason: "not this month".into(),
                },
                Part::ToolResult {
                    call_id: "call_p".into(),
                    name: "pay".into(),
                    content: "execution denied: not this month".into(),
                    is_error: true,
                },
            ],
        )),
        msg(13, "a", Role::Assistant, "The payment was declined."),
    ]
}

/// Eight 400-character turns, then a call (seq 9), its 1,500-character result
/// (seq 10) and a 300-character answer (seq 11): the tail boundary of a
/// 2,000-character retain falls inside the pair.
pub fn tool_pair_at_the_tail_edge() -> Vec<Event> {
    let mut events = turns(1, 8, 400);
    events.push(Event::Message(message(
        9,
        0,
        "call",
        Role::Assistant,
        vec![call_part("c1", "run_code", "{}")],
    )));
    events.push(Event::Message(message(
        10,
        0,
        "result",
        Role::Tool,
        vec![result_part("c1", "run_code", &"r".repeat(1_500))],
    )));
    events.push(msg(11, "answer", Role::Assistant, &"a".repeat(300)));
    events
}

/// The request a host sends once it verified the chain through `bs[..k]`:
/// the chain events (frontier, later boundaries, corrections, late
/// deliveries; no turns the prefix covers), the head `bs[k - 1]` in full,
/// and what the prefix holds for the turns that corrections touch.
pub fn from_verified(s: &Sim, k: usize) -> foldline_core::resolve::ResolveRequest {
    use foldline_core::resolve::{ResolveRequest, Verified};
    let bs = s.boundaries();
    let prefix: Vec<&str> = bs[..k].iter().map(|b| b.id.as_str()).collect();
    let touched: Vec<&str> = s
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Correction(c) => Some(c.turn_id.as_str()),
            _ => None,
        })
        .collect();
    let turns = bs[..k]
        .iter()
        .flat_map(|b| &b.input.turns)
        .filter(|t| touched.contains(&t.turn_id.as_str()))
        .cloned()
        .collect();
    ResolveRequest {
        declaration: s.decl.clone(),
        compactor: None,
        route: route(),
        events: s
            .events
            .iter()
            .filter(|e| match e {
                Event::Boundary(b) => !prefix.contains(&b.id.as_str()),
                Event::Message(m) => m.source_seq > bs[k - 1].covered_through_seq,
                _ => true,
            })
            .cloned()
            .collect(),
        packets: s.packets[k..].to_vec(),
        trusted: Vec::new(),
        verified: Some(Verified {
            boundary: bs[k - 1].clone(),
            length: k as u64,
            turns,
        }),
    }
}

/// A long, repetitive `run_code` output: progress lines and a build log
/// that repeats itself.
pub fn long_run_code_output() -> String {
    let mut s = String::new();
    for i in 0..200 {
        s.push_str(&format!("\x1b[32mcompiling\x1b[0m crate {}\n", i % 3));
    }
    for _ in 0..60 {
        s.push_str("warning: unused import\n");
    }
    s.push_str("done in 4.2s\n");
    s
}

/// A member's agent run: a hedged question, `run_code` with long repetitive
/// output, a search whose results must pass byte for byte, an answer; then
/// (optionally) the member's next message.
pub fn member_conversation(next: Option<&str>) -> Vec<Event> {
    let call = |seq: u64, id: &str, call_id: &str, name: &str| {
        Event::Message(message(
            seq,
            0,
            id,
            Role::Assistant,
            vec![Part::ToolCall {
                call_id: call_id.into(),
                name: name.into(),
                arguments: "{}".into(),
                custom: false,
                provider_options: serde_json::Value::Null,
            }],
        ))
    };
    let result = |seq: u64, id: &str, call_id: &str, content: String| {
        Event::Message(message(
            seq,
            0,
            id,
            Role::Tool,
            vec![Part::ToolResult {
                call_id: call_id.into(),
                name: String::new(),
                content,
                is_error: false,
            }],
        ))
    };
    let search = format!(
        "{}\n",
        "result: https://example.org/a \"exact quote\"\n".repeat(40)
    );
    let mut e = vec![
        msg(0, "sys", Role::System, "You are helpful."),
        msg(
            1,
            "q1",
            Role::User,
            "I was just wondering if maybe you could possibly build the project with `cargo build --release` for me. Thanks so much!",
        ),
        call(2, "c1", "call_run", "run_code"),
        result(3, "r1", "call_run", long_run_code_output()),
        call(4, "c2", "call_search", "search"),
        result(5, "r2", "call_search", search),
        msg(6, "a1", Role::Assistant, "The build passed; the search found the docs."),
    ];
    if let Some(text) = next {
        e.push(msg(7, "q2", Role::User, text));
    }
    e
}
