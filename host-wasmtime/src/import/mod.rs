//! Importing conversations: a JSON array or JSON Lines of OpenAI-style
//! messages (`role`, `content`, optional `name`, `tool_calls`,
//! `tool_call_id`), of OpenAI Responses API items (`responses.rs`), of
//! Anthropic messages (`anthropic.rs`), of AI SDK model messages
//! (`ai_sdk.rs`) or of foldline events. Everything is parsed and checked
//! before anything is appended, so bad input never half-writes the journal.

mod ai_sdk;
mod anthropic;
mod js_json;
mod responses;
pub mod resume;

use foldline_core::event::{Event, Message};
use foldline_core::turn::{Part, Role, Route};
use serde_json::value::RawValue;
use serde_json::Value;

use crate::error::{HostError, Result};

/// The shape of messages handed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Incoming {
    /// OpenAI chat-completions messages (and, where events are taken,
    /// foldline events).
    #[default]
    OpenAi,
    /// OpenAI Responses API items: a request's `input`, a response's
    /// `output` (`openai-responses`).
    OpenAiResponses,
    /// Anthropic Messages API messages (`anthropic`).
    Anthropic,
    /// Vercel AI SDK `ModelMessage`s (`ai-sdk`).
    AiSdk,
}

impl std::str::FromStr for Incoming {
    type Err = HostError;

    /// `openai` (chat), `openai-responses` / `openaiResponses`,
    /// `anthropic` or `ai-sdk` / `aiSdk`, as a context's format is named.
    fn from_str(name: &str) -> Result<Incoming> {
        match name {
            "openai" => Ok(Incoming::OpenAi),
            "openai-responses" | "openaiResponses" => Ok(Incoming::OpenAiResponses),
            "anthropic" => Ok(Incoming::Anthropic),
            "ai-sdk" | "aiSdk" => Ok(Incoming::AiSdk),
            other => Err(HostError::Input(format!(
                "messages are openai (chat), openai-responses, anthropic or ai-sdk, not {}",
                Value::from(other)
            ))),
        }
    }
}

/// Parse a file's text into events for `route`, numbering source sequences
/// after `after_seq`.
///
/// # Errors
/// `invalid_input` naming the line (JSON Lines) or item (array) at fault.
pub fn parse(text: &str, route: &Route, after_seq: u64) -> Result<Vec<Event>> {
    parse_items(text, route, after_seq, Some(Incoming::OpenAi)).map(|(events, _)| events)
}

/// [`parse`] of messages in the `incoming` shape (foldline events only with
/// OpenAI chat messages), and whether any item was a raw foldline event
/// (whose turn id is its own).
///
/// # Errors
/// As [`parse`].
pub fn parse_as(
    text: &str,
    route: &Route,
    after_seq: u64,
    incoming: Incoming,
) -> Result<(Vec<Event>, bool)> {
    parse_items(text, route, after_seq, Some(incoming))
}

/// [`parse`] for the HTTP messages route: OpenAI-style messages only. The
/// server numbers turns and writes every other event itself, so a raw
/// foldline event (anything with a `type`) is refused, naming its item.
///
/// # Errors
/// As [`parse`].
pub fn parse_messages(text: &str, route: &Route, after_seq: u64) -> Result<Vec<Event>> {
    parse_messages_as(text, route, after_seq, Incoming::OpenAi)
}

/// [`parse_messages`] in the `incoming` shape.
///
/// # Errors
/// As [`parse`].
pub fn parse_messages_as(
    text: &str,
    route: &Route,
    after_seq: u64,
    incoming: Incoming,
) -> Result<Vec<Event>> {
    match incoming {
        Incoming::OpenAi => parse_items(text, route, after_seq, None),
        _ => parse_items(text, route, after_seq, Some(incoming)),
    }
    .map(|(events, _)| events)
}

/// The items of `text`, and whether any was a raw foldline event;
/// `events_too`: the shape to read them in, foldline events taken beside
/// OpenAI chat messages (`None`: chat messages only).
fn parse_items(
    text: &str,
    route: &Route,
    after_seq: u64,
    events_too: Option<Incoming>,
) -> Result<(Vec<Event>, bool)> {
    let trimmed = text.trim_start();
    let items: Vec<(String, Value)> = if trimmed.starts_with('[') {
        let v: Vec<Value> = serde_json::from_str(text).map_err(|e| {
            HostError::Input(format!(
                "broken JSON at line {} column {}: {e}",
                e.line(),
                e.column()
            ))
        })?;
        v.into_iter()
            .enumerate()
            .map(|(i, v)| (format!("item {}", i + 1), v))
            .collect()
    } else {
        let mut out = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let v: Value = serde_json::from_str(line)
                .map_err(|e| HostError::Input(format!("broken JSON on line {}: {e}", i + 1)))?;
            out.push((format!("line {}", i + 1), v));
        }
        out
    };
    let drafts = match events_too {
        Some(Incoming::OpenAiResponses) => Some(responses::drafts(&items)?),
        Some(Incoming::Anthropic) => Some(anthropic::drafts(&items, &as_written(text)?)?),
        Some(Incoming::AiSdk) => Some(ai_sdk::drafts(&items, &as_written(text)?)?),
        _ => None,
    };
    if let Some(drafts) = drafts {
        return Ok((after_seq + 1..)
            .zip(drafts)
            .map(|(seq, (role, parts))| Event::Message(turn(route, seq, role, parts, None)))
            .collect::<Vec<_>>())
        .map(|events| (events, false));
    }
    let events_too = events_too.is_some();
    let mut events = Vec::with_capacity(items.len());
    let mut raw = false;
    let mut seq = after_seq;
    for (place, v) in items {
        if !v.is_object() {
            return Err(HostError::Input(format!(
                "{place}: a message is a JSON object"
            )));
        }
        if v.get("type").is_some() && !events_too {
            return Err(HostError::Input(format!(
                "{place}: raw foldline events are not accepted here; send OpenAI-style messages ({{\"role\", \"content\"}}): the server numbers turns and writes every other event itself"
            )));
        }
        if v.get("type").is_some() {
            let e: Event = serde_json::from_value(v)
                .map_err(|e| HostError::Input(format!("{place}: not a foldline event: {e}")))?;
            events.push(e);
            raw = true;
            continue;
        }
        seq += 1;
        events.push(Event::Message(message(&place, &v, route, seq)?));
    }
    Ok((events, raw))
}

/// The items of `text` (already read as values) as their sender wrote
/// them, for what is stored as JavaScript would write it (`js_json.rs`).
fn as_written(text: &str) -> Result<Vec<&RawValue>> {
    let broken = |e: serde_json::Error| HostError::Input(format!("broken JSON: {e}"));
    if text.trim_start().starts_with('[') {
        return serde_json::from_str(text).map_err(broken);
    }
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str(line).map_err(broken))
        .collect()
}

/// An Anthropic body in a request's shape, `{"system", "messages"}` (as the
/// JS driver's `append` takes it): the system prompt and the messages'
/// text as written, or `None` for any other body (an array, one message,
/// broken JSON: the usual path answers those). The system prompt, a
/// string or text blocks, goes in as a system turn before the messages
/// ([`anthropic_system`]).
///
/// # Errors
/// `invalid_input`: another member beside `system` and `messages` (the
/// whole request posted, which would store its history again), a `system`
/// that is not a string, `messages` that is not an array.
pub fn anthropic_request(text: &str) -> Result<Option<(Option<Value>, String)>> {
    // One pass, each member kept as written (a body may hold thousands of
    // messages: they are parsed once, later, as any body's).
    let Ok(map) = serde_json::from_str::<std::collections::BTreeMap<String, &RawValue>>(text)
    else {
        return Ok(None);
    };
    if map.contains_key("role") || !map.contains_key("messages") {
        return Ok(None);
    }
    if let Some(other) = map.keys().find(|k| *k != "system" && *k != "messages") {
        return Err(HostError::Input(format!(
            "a request-shaped body holds system and messages only, not {}: post the new messages, not the whole request",
            Value::from(other.as_str())
        )));
    }
    let system = match map
        .get("system")
        .map(|r| serde_json::from_str::<Value>(r.get()))
    {
        None => None,
        Some(Ok(s @ (Value::String(_) | Value::Array(_)))) => Some(s),
        Some(_) => {
            return Err(HostError::Input(
                "system must be a string or an array of text blocks".into(),
            ))
        }
    };
    match map["messages"].get() {
        m if m.starts_with('[') => Ok(Some((system, m.to_owned()))),
        _ => Err(HostError::Input(
            "messages must be an array of Anthropic messages".into(),
        )),
    }
}

/// The system turn of a request's Anthropic system prompt (a string or
/// text blocks), by a system message's rules, its faults named `system`;
/// none for an empty prompt.
///
/// # Errors
/// `invalid_input` as for a system message in the conversation.
pub fn anthropic_system(system: &Value, route: &Route) -> Result<Vec<Event>> {
    let empty = match system {
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    };
    if empty {
        return Ok(Vec::new());
    }
    let message = serde_json::json!({"role": "system", "content": system});
    let raw = RawValue::from_string(message.to_string())
        .map_err(|e| HostError::Input(format!("system: {e}")))?;
    let drafts = anthropic::drafts(&[("system".to_owned(), message)], &[&raw])?;
    Ok((1..)
        .zip(drafts)
        .map(|(seq, (role, parts))| Event::Message(turn(route, seq, role, parts, None)))
        .collect())
}

/// Number imported messages again, after `after_seq`, as [`parse`] numbers
/// them (source sequence and turn id): what a writer does when the journal
/// moved between parsing a batch and writing it.
pub fn renumber(events: &mut [Event], route: &Route, after_seq: u64) {
    let messages = events.iter_mut().filter_map(|e| match e {
        Event::Message(m) => Some(m),
        _ => None,
    });
    for (seq, m) in (after_seq + 1..).zip(messages) {
        number(m, route, seq);
    }
}

/// An imported message's numbering: its source sequence and the turn id
/// derived from it.
fn number(m: &mut Message, route: &Route, seq: u64) {
    m.source_seq = seq;
    m.turn_id = format!("{}-{seq}", route.conversation);
}

/// A file, image or audio part's place in a journal of text: a text part
/// `[file <kind> <name>]`, so the model still knows one was there
/// (docs/formats.md; `fileMark` in js/src/convert.ts).
fn file_mark(kind: &str, name: Option<&str>) -> String {
    match name.filter(|n| !n.is_empty()) {
        Some(n) => format!("[file {kind} {n}]"),
        None => format!("[file {kind}]"),
    }
}

/// The mark a file or image of a given media type leaves, as a text part:
/// `fileMark` in js/src/convert.ts (`file` when there is no media type).
fn file_part(media: Option<&str>, name: Option<&str>) -> Part {
    let media = media.filter(|m| !m.is_empty()).unwrap_or("file");
    Part::Text {
        text: file_mark(media, name),
    }
}

/// OpenAI `content`: absent, `null`, a string, or an array of content parts
/// (`text`; `refusal` from the assistant; `image_url`, `input_audio` and
/// `file`, which leave a [`file_mark`]; in the Responses API's vocabulary
/// `input_text` and `output_text`, `input_image` and `input_file`). The
/// text parts joined with a newline, and the marks.
fn content_of(
    place: &str,
    content: &Value,
    role: Role,
    incoming: Incoming,
) -> Result<(String, Vec<String>)> {
    let parts = match content {
        Value::Null => return Ok((String::new(), Vec::new())),
        Value::String(s) => return Ok((s.clone(), Vec::new())),
        Value::Array(parts) => parts,
        _ => {
            return Err(HostError::Input(format!(
                "{place}: content must be a string or an array of content parts"
            )))
        }
    };
    let (mut texts, mut files) = (Vec::new(), Vec::new());
    for (k, p) in parts.iter().enumerate() {
        let at = format!("{place}: content[{k}]");
        if !p.is_object() {
            return Err(HostError::Input(format!(
                "{at}: a content part is an object"
            )));
        }
        let chat = incoming == Incoming::OpenAi;
        match p.get("type").and_then(Value::as_str) {
            Some("text") if chat => {
                texts.push(opt_str(&at, p, "text")?.unwrap_or_default().to_owned())
            }
            Some("input_text" | "output_text") if !chat => {
                texts.push(opt_str(&at, p, "text")?.unwrap_or_default().to_owned())
            }
            Some("refusal") if role == Role::Assistant => {
                texts.push(opt_str(&at, p, "refusal")?.unwrap_or_default().to_owned())
            }
            Some("image_url") if chat => files.push(file_mark("image", None)),
            Some("input_image") if !chat => files.push(file_mark("image", None)),
            Some("input_audio") if chat => files.push(file_mark("audio", None)),
            Some("file") if chat => files.push(file_mark(
                "file",
                p.get("file")
                    .and_then(|f| f.get("filename"))
                    .and_then(Value::as_str),
            )),
            Some("input_file") if !chat => {
                files.push(file_mark("file", p.get("filename").and_then(Value::as_str)))
            }
            // A type echoed back is a string or null, which both hosts
            // quote alike (an object's keys they would order differently).
            _ => match p.get("type") {
                None | Some(Value::Null | Value::String(_)) => {
                    let kind = p.get("type").unwrap_or(&Value::Null);
                    return Err(HostError::Input(format!(
                        "{at}: unsupported content part {kind}{}",
                        format_hint(kind.as_str().unwrap_or_default(), chat)
                    )));
                }
                Some(_) => {
                    return Err(HostError::Input(format!(
                        "{at}: a content part's type must be a string"
                    )))
                }
            },
        }
    }
    Ok((texts.join("\n"), files))
}

/// ` (a part of the <format> format: …)` for a part type another format
/// has (`formatHint` in js/src/convert.ts), else nothing.
fn format_hint(kind: &str, chat: bool) -> String {
    let other = match kind {
        "tool_use" | "tool_result" | "thinking" | "redacted_thinking" | "document" => "anthropic",
        "tool-call"
        | "tool-result"
        | "reasoning"
        | "tool-approval-request"
        | "tool-approval-response" => "ai-sdk",
        "input_text" | "output_text" | "input_image" | "input_file" if chat => "openai-responses",
        "text" | "image_url" | "input_audio" | "file" if !chat => "openai",
        _ => return String::new(),
    };
    format!(" (a part of the {other} format: send such messages as {other})")
}

/// A content's text (when there is any), then its marks: one text part
/// each, or a tool result's lines.
fn joined(text: String, files: Vec<String>) -> impl Iterator<Item = String> {
    std::iter::once(text).filter(|t| !t.is_empty()).chain(files)
}

/// An optional string field: absent or `null`, or a string (any other type
/// is refused, naming the field).
fn opt_str<'a>(place: &str, v: &'a Value, field: &str) -> Result<Option<&'a str>> {
    match v.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(HostError::Input(format!(
            "{place}: {field} must be a string"
        ))),
    }
}

/// A required string field: present, a string, not empty.
fn required<'a>(place: &str, v: &'a Value, field: &str) -> Result<&'a str> {
    v.get(field)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| HostError::Input(format!("{place}: {field} must be a non-empty string")))
}

/// A required string field, owned.
fn owned(place: &str, v: &Value, field: &str) -> Result<String> {
    required(place, v, field).map(str::to_owned)
}

/// A tool call's input as JSON text (`inputText` in js/src/convert.ts),
/// from the value as its sender wrote it: a string is the JSON text it
/// already is, absent or `null` is `{}`, any other value is written as
/// JavaScript writes it.
fn input_text(raw: Option<&RawValue>) -> Result<String> {
    js_json::text_or(raw, "{}")
}

/// The tool calls of an assistant message: `tool_calls` absent, `null`, or
/// an array of `{"id": string, "type": "function", "function": {"name":
/// string, "arguments": string}}` or custom tool calls `{"id": string,
/// "type": "custom", "custom": {"name": string, "input": string}}`;
/// anything else is refused, naming it.
fn tool_calls(place: &str, v: &Value) -> Result<Vec<Part>> {
    let calls = match v.get("tool_calls") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(a)) => a,
        Some(_) => {
            return Err(HostError::Input(format!(
                "{place}: tool_calls must be an array of tool calls"
            )))
        }
    };
    let mut out = Vec::with_capacity(calls.len());
    for (i, c) in calls.iter().enumerate() {
        let at = format!("{place}: tool_calls[{i}]");
        let id = c
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        // A function call `{"function": {"name", "arguments"}}`, or a custom
        // tool call `{"type": "custom", "custom": {"name", "input"}}`.
        let custom = c.get("type").and_then(Value::as_str) == Some("custom");
        let (key, input, default) = if custom {
            ("custom", "input", "")
        } else {
            ("function", "arguments", "{}")
        };
        let f = c.get(key).filter(|f| f.is_object());
        let (Some(id), Some(f)) = (id, f) else {
            return Err(HostError::Input(format!(
                "{at}: needs an id and a {key} {{\"name\", \"{input}\"}}"
            )));
        };
        let name = f
            .get("name")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| {
                HostError::Input(format!("{at}: {key}.name must be a non-empty string"))
            })?;
        let arguments = match f.get(input) {
            None | Some(Value::Null) => default.to_owned(),
            Some(Value::String(s)) => s.clone(),
            Some(_) => {
                return Err(HostError::Input(format!(
                    "{at}: {key}.{input} must be a string"
                )))
            }
        };
        out.push(Part::ToolCall {
            call_id: id.to_owned(),
            name: name.to_owned(),
            arguments,
            custom,
            provider_options: serde_json::Value::Null,
        });
    }
    Ok(out)
}

fn message(place: &str, v: &Value, route: &Route, seq: u64) -> Result<Message> {
    let refuse = |why: &str| HostError::Input(format!("{place}: {why}"));
    let role = match v.get("role").and_then(Value::as_str) {
        Some("system") => Role::System,
        Some("developer") => Role::Developer,
        Some("user") => Role::User,
        Some("assistant") => Role::Assistant,
        Some("tool") => Role::Tool,
        Some("function") => return Err(refuse(
            "the deprecated \"function\" role is not imported; send tool calls and \"tool\" messages",
        )),
        Some(other) => return Err(refuse(&format!("unknown role {}", Value::from(other)))),
        None => return Err(refuse("a message needs a role")),
    };
    let name = opt_str(place, v, "name")?;
    let present = |field: &str| !matches!(v.get(field), None | Some(Value::Null));
    if present("function_call") {
        return Err(refuse(
            "the deprecated function_call is not imported; send tool_calls",
        ));
    }
    if role != Role::Assistant && present("tool_calls") {
        return Err(refuse("only an assistant message carries tool_calls"));
    }
    // A tool message names its call before its content is read.
    let call_id = match role {
        Role::Tool => opt_str(place, v, "tool_call_id")?
            .filter(|s| !s.is_empty())
            .ok_or_else(|| refuse("a tool message needs tool_call_id"))?,
        _ => "",
    };
    let content = v.get("content").unwrap_or(&Value::Null);
    let (text, files) = content_of(place, content, role, Incoming::OpenAi)?;
    let mut parts = Vec::new();
    if role == Role::Tool {
        parts.push(Part::ToolResult {
            call_id: call_id.to_owned(),
            name: name.unwrap_or_default().to_owned(),
            content: joined(text, files).collect::<Vec<_>>().join("\n"),
            is_error: false,
        });
    } else {
        parts.extend(joined(text, files).map(|text| Part::Text { text }));
        if role == Role::Assistant {
            if let Some(r) = opt_str(place, v, "refusal")?.filter(|r| !r.is_empty()) {
                parts.push(Part::Text { text: r.to_owned() });
            }
            parts.extend(tool_calls(place, v)?);
        }
    }
    let author = name.filter(|_| role == Role::Assistant).map(str::to_owned);
    let mut m = turn(route, seq, role, parts, author);
    // A member's `name` names the participant ("to differentiate between
    // participants of the same role"): who of a room sent it. The servers
    // write the authenticated member over it.
    if let Some(sender) = name.filter(|n| role == Role::User && !n.is_empty()) {
        m.sender = sender.to_owned();
    }
    Ok(m)
}

/// An imported turn of `route`, numbered `seq`.
fn turn(route: &Route, seq: u64, role: Role, parts: Vec<Part>, author: Option<String>) -> Message {
    let mut m = Message {
        conversation: route.conversation.clone(),
        chat: route.chat.clone(),
        sender: route.sender.clone(),
        source: String::new(),
        source_seq: 0,
        index: 0,
        turn_id: String::new(),
        role,
        author_agent: author,
        parts,
        tokens: None,
        pinned: false,
        sensitive: false,
        content_hash: None,
    };
    number(&mut m, route, seq);
    m
}

/// A long, deterministic, chat-shaped conversation for `foldline demo`:
/// a member planning a trip with an assistant that runs code now and then.
pub fn demo_conversation(turns: usize) -> Vec<Value> {
    let topics = [
        "the train from Lisbon to Porto",
        "a budget of 1,400 euros for ten days",
        "vegetarian restaurants in Porto",
        "a day trip to the Douro valley",
        "museum opening hours on Mondays",
        "renting bikes along the river",
        "the weather forecast for late May",
        "booking a hostel near São Bento station",
        "learning a few Portuguese phrases",
        "travel insurance that covers hiking",
    ];
    let mut out = vec![
        serde_json::json!({"role": "system", "content": "You are a careful travel assistant. Keep track of the member's budget and bookings."}),
    ];
    for i in 0..turns {
        let topic = topics[i % topics.len()];
        if i % 9 == 8 {
            let id = format!("call_{i}");
            // The budget shrinks by 3 a turn and starts over (no underflow
            // in conversations longer than 466 turns).
            let left = 1400 - (i * 3) % 1400;
            out.push(serde_json::json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": id, "type": "function", "function": {"name": "run_code", "arguments": format!("{{\"code\":\"budget_left({left})\"}}")}}]}));
            out.push(
                serde_json::json!({"role": "tool", "tool_call_id": id, "name": "run_code",
                "content": format!("remaining budget: {left} euros\n{}", "ok\n".repeat(20))}),
            );
        } else if i % 2 == 0 {
            out.push(serde_json::json!({"role": "user", "content": format!(
                "Turn {i}: I have a question about {topic}. {} Can you help me decide?",
                "I was reading several blog posts and forum threads about this and they disagree with each other. ".repeat(1 + i % 4))}));
        } else {
            out.push(serde_json::json!({"role": "assistant", "content": format!(
                "Turn {i}: About {topic}: here is what I found. {} Shall I note this in your plan?",
                "The options differ mainly in price and timing, and the cheaper one needs booking two weeks ahead. ".repeat(2 + i % 5))}));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_demo_conversation_has_any_length() {
        // The tool turns' budget used to underflow after 466 turns.
        let long = super::demo_conversation(2_000);
        assert!(long.len() > 2_000);
        assert_eq!(
            super::demo_conversation(400)[..],
            long[..super::demo_conversation(400).len()]
        );
    }

    /// OpenAI's custom tool calls keep their kind and free-form input; one
    /// without a name is refused naming the field.
    #[test]
    fn custom_tool_calls_keep_their_kind() {
        use foldline_core::event::Event;
        use foldline_core::turn::{Part, Route};
        let route = Route {
            conversation: "c".into(),
            ..Route::default()
        };
        let text = r#"{"role":"assistant","content":null,"tool_calls":[{"id":"k1","type":"custom","custom":{"name":"grep","input":"warn|error"}},{"id":"f1","type":"function","function":{"name":"pay","arguments":"{}"}}]}"#;
        let events = super::parse_messages(text, &route, 0).unwrap();
        let Event::Message(m) = &events[0] else {
            panic!("{events:?}")
        };
        assert_eq!(
            m.parts,
            vec![
                Part::ToolCall {
                    call_id: "k1".into(),
                    name: "grep".into(),
                    arguments: "warn|error".into(),
                    custom: true,
                    provider_options: serde_json::Value::Null,
                },
                Part::ToolCall {
                    call_id: "f1".into(),
                    name: "pay".into(),
                    arguments: "{}".into(),
                    custom: false,
                    provider_options: serde_json::Value::Null,
                },
            ]
        );
        let bad = r#"{"role":"assistant","tool_calls":[{"id":"k1","type":"custom","custom":{"input":"x"}}]}"#;
        let e = super::parse_messages(bad, &route, 0).unwrap_err();
        assert!(e.to_string().contains("custom.name"), "{e}");
    }
}
