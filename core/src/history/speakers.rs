//! Who said what in a room: the model-visible copy of a member's turn names
//! its sender when the turns come from more than one member.
//!
//! A room's members all speak as `user` (each turn keeps its own `sender`
//! in the journal; the route binds the room, not the speaker). Sent as
//! they are, "I vote for Lisbon" and "I vote for Porto" reach the model and
//! the compactor as the same voice. So once the user turns of a
//! reconstruction come from two or more senders, each user turn with a
//! sender is *attributed*: the context sends it with the label
//! `[alice] ` before its text, and the compactor's transcript line reads
//! `[source 3 · user alice]`. A conversation of one member is sent as
//! before, byte for byte.
//!
//! The label is counted where the turn is measured: an attributed turn's
//! `chars` and `tokens` grow by the label's ([`label_size`]: a token per
//! character, which no tokenizer exceeds on ordinary ids), so `plan`,
//! `select` and every budget rule see the room's context as the model will.
//! A member's text cannot speak for another: in an attributed turn, a line
//! of text that begins with `[` is sent with a `\` before it (`[bob] Sure.
//! \[alice] I vote for Porto.`), so only a label begins a line that way;
//! each such `\` counts as a character and a token ([`escapes`]). The
//! compactor's transcript escapes every turn's text alike
//! (`render/envelope.rs`), so no text forges a `[source …]` line.
//!
//! Snapshots and amendments compare content hashes, which the label never
//! touches, so a member joining later changes no boundary. The append check
//! counts a label for any user message with a sender
//! ([`crate::validate`]), so a turn accepted alone still fits once its room
//! fills.

use crate::records::turn::{Part, Role, Turn};

/// Mark the user turns of a room of several senders as attributed and add
/// their labels to their sizes. Nothing changes when the user turns come
/// from one sender or none.
pub fn attribute(turns: &mut [Turn]) {
    let mut senders = turns
        .iter()
        .filter(|t| t.role == Role::User && !t.sender.is_empty())
        .map(|t| t.sender.as_str());
    let Some(first) = senders.next() else {
        return;
    };
    if senders.all(|s| s == first) {
        return;
    }
    label_all(turns);
}

/// Whether the prompt of `sender` (the newest message, not yet in the
/// journal) is sent with its label: when the turns in view are already a
/// room's, or when its sender is a new voice beside theirs — then the
/// turns are attributed too, before they are measured, on a reconstruction
/// of their own (one held between calls stays as it is): `None` says so.
pub fn prompt_labeled(turns: &[Turn], sender: &str) -> Option<bool> {
    if sender.is_empty() {
        return Some(false);
    }
    let mut senders = turns
        .iter()
        .filter(|t| t.role == Role::User && !t.sender.is_empty());
    match senders.next() {
        Some(t) if t.attributed => Some(true),
        Some(t) if t.sender != sender => None,
        _ => Some(false),
    }
}

/// Attribute every user turn with a sender (the turns of a room).
pub fn label_all(turns: &mut [Turn]) {
    for t in turns
        .iter_mut()
        .filter(|t| t.role == Role::User && !t.sender.is_empty())
    {
        let (chars, tokens) = attributed_size(&t.sender, &t.parts);
        t.attributed = true;
        t.chars = t.chars.saturating_add(chars);
        t.tokens = t.tokens.saturating_add(tokens);
    }
}

/// The label that names a sender before their turn's text: `[alice] `.
pub fn label(sender: &str) -> String {
    format!("[{sender}] ")
}

/// Characters and tokens a sender's label adds to a turn: the label's
/// characters, and as many tokens. Not the estimate's one per four: member
/// ids tokenize badly (o200k: `[alice] ` is 3 tokens, `[u_83f2a9c1] ` 10
/// of its 13 characters), and a host that counts real tokens counts the
/// message without its label, so the label's count must not fall short.
pub fn label_size(sender: &str) -> (u64, u64) {
    let chars = foldline_json::char_count(sender) as u64 + 3;
    (chars, chars)
}

/// Characters and tokens an attributed turn of `parts` adds: its label's
/// and one for each escaped line ([`escapes`]).
pub fn attributed_size(sender: &str, parts: &[Part]) -> (u64, u64) {
    let (chars, tokens) = label_size(sender);
    let escapes = escapes(parts);
    (chars + escapes, tokens + escapes)
}

/// Lines of the text parts of `parts` that begin with `[`: each is sent
/// with a `\` before it ([`escaped`](crate::render::envelope::escaped)).
pub fn escapes(parts: &[Part]) -> u64 {
    // Counted, not written: the append check measures every member's
    // message. A line's start is the text's or a newline's end, as
    // `escaped` finds them.
    let lines = |t: &str| usize::from(t.starts_with('[')) + t.matches("\n[").count();
    parts
        .iter()
        .map(|p| match p {
            Part::Text { text } => lines(text) as u64,
            _ => 0,
        })
        .sum()
}

/// An attributed turn's parts as the model sees them: its text escaped,
/// the label joining the first part when it is text, else first as a text
/// part of its own (one character shorter than counted: the label's space).
pub fn labeled(sender: &str, parts: &[Part]) -> Vec<Part> {
    crate::render::envelope::escaped_parts(parts, &label(sender))
}
