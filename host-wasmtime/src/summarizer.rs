//! The offline summarizer: deterministic, extractive, no network.
//!
//! It reads the packet by its structure: the frozen turns are the packet's
//! `input.turns` (source sequence and role), each found in the transcript by
//! its `[source N · …]` line; the previous summary and the amendment are
//! their own messages. Every sentence becomes a candidate fact, scored by
//! what a later turn is likely to need — numbers, names, decisions and
//! commitments, open questions, tool outcomes — and the summary keeps:
//!
//! 1. coverage: the folded range (previous summary's facts included) is cut
//!    into equal slices and the best fact of each slice is taken first, so
//!    no stretch of the conversation is dropped wholesale;
//! 2. then the best remaining facts by score, until the bounds are full.
//!
//! The previous summary's lines compete as facts on equal terms with the new
//! turns, so an old fact survives as long as it outranks new ones — no
//! geometric decay by position. Lines keep who said it (`user:`,
//! `assistant:`, `tool run_code:`) and come out in conversation order.

use foldline_core::packet::{CompactorRole, Packet};

/// One candidate fact; facts are kept in conversation order (the previous
/// summary's first).
#[derive(Debug, Clone)]
struct Fact {
    /// Who said it.
    who: String,
    text: String,
    score: u32,
}

const DECISIONS: &[&str] = &[
    "decided",
    "decide",
    "agreed",
    "agree",
    "will ",
    "won't",
    "going to",
    "plan",
    "booked",
    "book ",
    "confirmed",
    "confirm",
    "chose",
    "choose",
    "must",
    "need",
    "deadline",
    "promise",
    "budget",
    "prefer",
    "allergic",
    "favorite",
    "favourite",
    "always",
    "never",
    "remember",
    "don't forget",
    "important",
];

/// How much a later turn is likely to need this sentence.
fn score(text: &str, who: &str) -> u32 {
    let mut s: u32 = 0;
    let lower = text.to_lowercase();
    for (i, w) in text.split_whitespace().enumerate() {
        let w = w.trim_matches(|c: char| !c.is_alphanumeric());
        if w.chars().any(|c| c.is_ascii_digit()) {
            s += 3;
        } else if i > 0
            && w.chars().count() > 1
            && w.chars().next().is_some_and(char::is_uppercase)
            && w != "I"
            && !w.starts_with("I'")
        {
            s += 2;
        }
    }
    if DECISIONS.iter().any(|d| lower.contains(d)) {
        s += 3;
    }
    if text.contains('?') {
        s += 2;
    }
    if who.starts_with("tool") {
        s += 2;
    }
    let n = text.chars().count();
    if n < 20 {
        s = s.saturating_sub(2);
    } else {
        s += (n as u32 / 60).min(2);
    }
    s
}

/// Sentences of a turn's text, each at most `max` characters.
fn sentences(text: &str, max: usize) -> Vec<String> {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out = Vec::new();
    let mut cur = String::new();
    for c in flat.chars() {
        cur.push(c);
        if matches!(c, '.' | '?' | '!') && cur.trim().chars().count() > 1 {
            out.push(std::mem::take(&mut cur));
        }
    }
    out.push(cur);
    out.into_iter()
        .map(|s| s.trim().to_owned())
        .filter(|s| s.chars().any(char::is_alphanumeric))
        .map(|s| {
            if s.chars().count() > max {
                let mut t: String = s.chars().take(max - 1).collect();
                t.push('…');
                t
            } else {
                s
            }
        })
        .collect()
}

/// The frozen turns' texts, by the packet's turn list.
fn turns(packet: &Packet) -> Vec<(String, String)> {
    let Some(transcript) = packet.messages.iter().rev().find(|m| {
        m.role == CompactorRole::User && m.content.starts_with("Conversation to summarize")
    }) else {
        return Vec::new();
    };
    let body = transcript.content.split_once('\n').map_or("", |x| x.1);
    let mut out = Vec::with_capacity(packet.input.turns.len());
    let mut rest = body;
    for (i, t) in packet.input.turns.iter().enumerate() {
        let start = format!("[source {} · ", t.source_seq);
        let Some(at) = rest.find(&start) else {
            continue;
        };
        let line = &rest[at..];
        let end = packet
            .input
            .turns
            .get(i + 1)
            .and_then(|n| line.find(&format!("\n[source {} · ", n.source_seq)))
            .unwrap_or(line.len());
        let (head, text) = line[..end].split_once("] ").unwrap_or((&line[..end], ""));
        let who = head
            .trim_start_matches('[')
            .split(" · ")
            .nth(1)
            .unwrap_or("");
        // A tool result names its tool; a tool call reads as what was called.
        let (who, text) = match text
            .strip_prefix("[tool result")
            .and_then(|r| r.split_once("] "))
        {
            Some((name, rest)) => (format!("tool{name}"), rest.to_owned()),
            None => (who.to_owned(), text.replace("[tool call ", "called [")),
        };
        out.push((who, text));
        rest = &line[end..];
    }
    out
}

/// Summarize a packet within its character and token bounds (its tokens
/// by the core's estimate).
pub fn summarize(packet: &Packet) -> String {
    let max = chars_bound(packet);
    let out = choose(&facts_of(packet), max);
    finish(out, max)
}

/// [`summarize`] with the summary's tokens as the host's tokenizer counts
/// them: the characters' bound narrows until the count fits the token bound
/// too (as the estimate's does: four tokens under it), so a summary in a
/// language the estimate undercounts (most CJK text is a token a
/// character) stays within the tokens the plan reserved for it.
pub fn summarize_counted(packet: &Packet, count: &dyn Fn(&str) -> u64) -> String {
    let limit = packet.bounds.max_tokens.saturating_sub(4);
    let facts = facts_of(packet);
    let mut max = chars_bound(packet);
    loop {
        let out = finish(choose(&facts, max), max);
        let n = count(&out);
        if n <= limit || max <= 1 {
            return out;
        }
        // Narrowed in proportion, and always by at least one character.
        let scaled = u64::try_from(max).unwrap_or(u64::MAX).saturating_mul(limit) / n;
        max = usize::try_from(scaled).unwrap_or(usize::MAX).min(max - 1);
    }
}

/// The characters a summary may have: the character bound, and the token
/// bound by the estimate.
fn chars_bound(packet: &Packet) -> usize {
    let by_tokens = packet.bounds.max_tokens.saturating_sub(4).saturating_mul(4);
    usize::try_from(packet.bounds.max_chars.min(by_tokens)).unwrap_or(usize::MAX)
}

/// The facts of a packet, in order, scored: the previous summary's lines,
/// the amendment's corrections, then each sentence of the frozen turns; a
/// sentence said twice is one fact, and boilerplate scores low.
fn facts_of(packet: &Packet) -> Vec<Fact> {
    let mut facts: Vec<Fact> = Vec::new();
    let mut push = |who: String, text: String| {
        let score = score(&text, &who);
        facts.push(Fact { who, text, score });
    };
    for m in packet
        .messages
        .iter()
        .filter(|m| m.role == CompactorRole::User)
    {
        if m.content.starts_with("Previous summary") {
            for line in m.content.lines().skip(1) {
                match line.split_once(": ") {
                    Some((who, text)) if !who.contains(' ') || who.starts_with("tool") => {
                        push(who.to_owned(), text.to_owned())
                    }
                    _ if !line.trim().is_empty() => push(String::new(), line.trim().to_owned()),
                    _ => {}
                }
            }
        } else if m.content.starts_with("[untrusted-history-summary") {
            for line in m.content.lines().filter(|l| l.starts_with("[source ")) {
                if let Some((_, text)) = line.split_once("] ") {
                    for s in sentences(text, 200) {
                        push("correction".into(), s);
                    }
                }
            }
        }
    }
    for (who, text) in turns(packet) {
        for s in sentences(&text, 200) {
            push(who.clone(), s);
        }
    }
    // The same sentence said twice is one fact (its first place).
    let mut seen = std::collections::BTreeSet::new();
    facts.retain(|f| seen.insert(f.text.to_lowercase()));
    // A sentence whose shape (without its numbers) recurs is boilerplate
    // ("turn 12: nothing new"), whatever numbers it carries.
    let shape = |t: &str| -> String {
        t.to_lowercase()
            .chars()
            .filter(|c| c.is_alphabetic() || *c == ' ')
            .collect()
    };
    let mut shapes: std::collections::BTreeMap<String, usize> = Default::default();
    for f in &facts {
        *shapes.entry(shape(&f.text)).or_default() += 1;
    }
    for f in &mut facts {
        if shapes[&shape(&f.text)] >= 3 {
            f.score = f.score.saturating_sub(6);
        }
    }
    facts
}

/// The facts that fit in `max` characters, in their order: first the best of
/// each of equal slices (coverage), then the best of the rest.
fn choose(facts: &[Fact], max: usize) -> String {
    let line = |f: &Fact| {
        if f.who.is_empty() {
            f.text.clone()
        } else {
            format!("{}: {}", f.who, f.text)
        }
    };
    let cost = |f: &Fact| line(f).chars().count() + 1;
    let mut chosen = vec![false; facts.len()];
    let mut used = 0usize;
    let take = |i: usize, chosen: &mut Vec<bool>, used: &mut usize| {
        if !chosen[i] && *used + cost(&facts[i]) <= max {
            chosen[i] = true;
            *used += cost(&facts[i]);
        }
    };
    if !facts.is_empty() {
        // 1. Coverage: the best fact of each of `slices` equal slices.
        let avg = facts.iter().map(cost).sum::<usize>() / facts.len();
        let slices = (max / avg.max(1) / 2).clamp(1, facts.len());
        for k in 0..slices {
            let (a, b) = (k * facts.len() / slices, (k + 1) * facts.len() / slices);
            if let Some(best) = (a..b).max_by_key(|&i| (facts[i].score, std::cmp::Reverse(i))) {
                take(best, &mut chosen, &mut used);
            }
        }
        // 2. The best of the rest.
        let mut rest: Vec<usize> = (0..facts.len()).filter(|&i| !chosen[i]).collect();
        rest.sort_by_key(|&i| (std::cmp::Reverse(facts[i].score), i));
        for i in rest {
            take(i, &mut chosen, &mut used);
        }
    }
    facts
        .iter()
        .zip(&chosen)
        .filter(|(_, c)| **c)
        .map(|(f, _)| line(f))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A summary as the bounds allow it: never empty, no control characters
/// but newlines, at most `max` characters.
pub(crate) fn finish(out: String, max: usize) -> String {
    let out = if out.trim().is_empty() {
        "(nothing to summarize)".to_owned()
    } else {
        out
    };
    out.chars()
        .filter(|c| !c.is_control() || *c == '\n')
        .take(max)
        .collect()
}
