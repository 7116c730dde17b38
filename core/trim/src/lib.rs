//! Prompt trim, the algorithm: a fixed list of commented rules over the
//! model-bound copy of a member's message. No model, no network, no
//! settings lookup. In a crate of its own so the size-optimized WebAssembly
//! artifact compiles it for speed (`scripts/build-wasm`), as `foldline-json`;
//! `foldline-core`'s `member::trim` wraps it in the wire types and the
//! measurement.
//!
//! Protections, all absolute:
//! - fenced code, inline code, quoted spans (`"…"`, `“…”`, `«…»`) and URLs are
//!   never rewritten;
//! - no rule fires inside a sentence that carries a negation, because
//!   removing a filler word there can invert the meaning;
//! - a result that is empty, or shorter than [`MIN_SHARE_PERMILLE`] of the
//!   original characters, is discarded for the original;
//! - a self-check that every protected span survives verbatim, in order;
//!   if it fails, the original is returned and the pass records `failed`.
//!
//! The rule list is the known ceiling: it removes only the English phrasing it
//! lists, so unusual hedging (and other languages) pass through.

#![forbid(unsafe_code)]

/// What the rules made of a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The trimmed text.
    Applied(String),
    /// The original stands, for this reason (`no_rule_matched`,
    /// `empty_result`, `too_short`, `not_smaller`).
    Bypassed(&'static str),
    /// The self-check failed (`protected_span_changed`): the original stands.
    Failed(&'static str),
}

/// The smallest share of the original characters a trimmed result may keep.
pub const MIN_SHARE_PERMILLE: u64 = 300;

/// One rule: its name, what it removes, where it applies, its phrases.
pub struct Rule {
    /// Stable name recorded in the measurement.
    pub name: &'static str,
    /// Where the phrases may match.
    pub place: Place,
    /// Lower-case phrases, longest first.
    pub phrases: &'static [&'static str],
}

/// Where a rule's phrases may match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// At the start of a sentence (the following comma is removed too).
    SentenceStart,
    /// Anywhere, as whole words.
    Anywhere,
    /// As a whole trailing sentence of the message.
    ClosingSentence,
}

/// The rules, applied in this order.
pub const RULES: &[Rule] = &[
    // An apologetic hedge before the actual request: "Sorry to bother you,".
    // No phrase here contains a negation: those sentences are never touched.
    Rule {
        name: "apologetic_hedge",
        place: Place::SentenceStart,
        phrases: &[
            "sorry if this is a dumb question, but",
            "sorry if this is a silly question, but",
            "sorry if this is a stupid question, but",
            "this might be a silly question, but",
            "this might be a dumb question, but",
            "sorry to bother you again, but",
            "sorry to bother you, but",
            "sorry for the trouble, but",
            "sorry to bother you again",
            "sorry to bother you",
            "apologies in advance",
            "sorry for the trouble",
            "sorry to ask, but",
            "sorry in advance",
        ],
    },
    // A request preamble: "I was just wondering if maybe you could possibly".
    Rule {
        name: "request_preamble",
        place: Place::SentenceStart,
        phrases: &[
            "i was just wondering if maybe you could possibly",
            "i was just wondering if you could possibly",
            "i was wondering if maybe you could possibly",
            "i was just wondering if you could",
            "i was wondering if you could possibly",
            "i was wondering if you could",
            "would you be so kind as to",
            "could you possibly please",
            "could you please",
            "would you please",
            "can you please",
            "could you possibly",
            "i would like you to",
            "i'd like you to",
            "please could you",
            "if possible,",
            "please kindly",
            "kindly",
            "please",
        ],
    },
    // A filler adverb that carries no meaning in a request.
    Rule {
        name: "filler_adverb",
        place: Place::Anywhere,
        phrases: &[
            "basically",
            "literally",
            "actually",
            "honestly",
            "really",
            "just",
        ],
    },
    // A closing courtesy as the message's last sentence(s).
    Rule {
        name: "closing_courtesy",
        place: Place::ClosingSentence,
        phrases: &[
            "thanks in advance for your help",
            "thank you in advance for your help",
            "any help would be greatly appreciated",
            "any help would be appreciated",
            "any help is appreciated",
            "thank you so much in advance",
            "thanks so much in advance",
            "thank you in advance",
            "thanks in advance",
            "thanks a lot",
            "thanks so much",
            "thank you so much",
            "thank you very much",
            "much appreciated",
            "thank you",
            "thanks",
            "cheers",
            "ty",
        ],
    },
];

/// Words that mark a sentence as negated.
const NEGATIONS: &[&str] = &[
    "not", "no", "never", "none", "nobody", "nothing", "nowhere", "neither", "nor", "without",
    "cannot",
];

#[derive(Debug, Clone)]
struct Seg {
    text: String,
    protected: bool,
}

/// Trim a message: what the rules made of it, and the rules that fired,
/// in order.
pub fn trim_text(original: &str) -> (Outcome, Vec<&'static str>) {
    let bytes = original.len();
    let segs = segments(original);
    let protected_before: Vec<String> = segs
        .iter()
        .filter(|s| s.protected)
        .map(|s| s.text.clone())
        .collect();
    let mut sentences = sentences(segs);
    // Whether each sentence carries a negation, judged once: no rule's
    // phrase holds a negation word, so removing one never changes it.
    let negated: Vec<bool> = sentences.iter().map(|s| negated(s)).collect();
    let free = |i: &usize| !negated[*i];
    let mut fired: Vec<&'static str> = Vec::new();

    for rule in RULES {
        let hit = match rule.place {
            Place::SentenceStart => (0..sentences.len()).filter(free).fold(false, |hit, i| {
                // Phrases can stack ("Please, could you please ..."): repeat.
                let mut any = false;
                while apply_start(&mut sentences[i], rule) {
                    any = true;
                }
                any | hit
            }),
            Place::Anywhere => (0..sentences.len()).filter(free).fold(false, |hit, i| {
                apply_anywhere(&mut sentences[i], rule) | hit
            }),
            Place::ClosingSentence => apply_closing(&mut sentences, rule),
        };
        if hit {
            fired.push(rule.name);
        }
    }
    if fired.is_empty() {
        return (Outcome::Bypassed("no_rule_matched"), fired);
    }
    let out: String = sentences
        .iter()
        .flat_map(|s| s.iter())
        .map(|s| s.text.as_str())
        .collect();
    let out = out.trim().to_owned();
    // Self-check: every protected span survives verbatim, in order.
    let protected_after: Vec<String> = segments(&out)
        .into_iter()
        .filter(|s| s.protected)
        .map(|s| s.text)
        .collect();
    if protected_after != protected_before {
        return (Outcome::Failed("protected_span_changed"), fired);
    }
    if out.is_empty() {
        return (Outcome::Bypassed("empty_result"), fired);
    }
    let (n_out, n_in) = (out.chars().count() as u64, original.chars().count() as u64);
    if n_out * 1000 < n_in * MIN_SHARE_PERMILLE {
        return (Outcome::Bypassed("too_short"), fired);
    }
    if out.len() >= bytes {
        return (Outcome::Bypassed("not_smaller"), fired);
    }
    (Outcome::Applied(out), fired)
}

/// Split into protected and free segments, in one pass over the bytes:
/// only the bytes that can open a protected span are looked at closely,
/// and free text is copied in runs, not character by character.
fn segments(text: &str) -> Vec<Seg> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let (mut free_from, mut i) = (0, 0);
    // An opener whose closer does not occur later never closes again: no
    // second scan to the end for each later opener of the same kind.
    let (mut no_curly, mut no_guillemet) = (false, false);
    while i < b.len() {
        // Openers are ASCII or UTF-8 lead bytes: stepping a byte at a time
        // never looks inside a character for one.
        if !matches!(b[i], b'`' | b'"' | 0xE2 | 0xC2 | b'h' | b'w') {
            i += 1;
            continue;
        }
        let rest = &text[i..];
        let end = match b[i] {
            b'`' if rest.starts_with("```") => {
                Some(rest[3..].find("```").map_or(rest.len(), |j| j + 6))
            }
            b'`' => rest[1..].find('`').map(|j| j + 2),
            b'"' => rest[1..].find('"').map(|j| j + 2),
            0xE2 if !no_curly && rest.starts_with('“') => {
                let end = rest.find('”').map(|j| j + '”'.len_utf8());
                no_curly = end.is_none();
                end
            }
            0xC2 if !no_guillemet && rest.starts_with('«') => {
                let end = rest.find('»').map(|j| j + '»'.len_utf8());
                no_guillemet = end.is_none();
                end
            }
            b'h' | b'w'
                if (rest.starts_with("http://")
                    || rest.starts_with("https://")
                    || rest.starts_with("www."))
                    && (i == 0 || !b[i - 1].is_ascii_alphanumeric()) =>
            {
                Some(rest.find(char::is_whitespace).unwrap_or(rest.len()))
            }
            _ => None,
        };
        match end {
            Some(n) => {
                if free_from < i {
                    out.push(Seg {
                        text: text[free_from..i].to_owned(),
                        protected: false,
                    });
                }
                out.push(Seg {
                    text: rest[..n].to_owned(),
                    protected: true,
                });
                i += n;
                free_from = i;
            }
            None => i += 1,
        }
    }
    if free_from < text.len() {
        out.push(Seg {
            text: text[free_from..].to_owned(),
            protected: false,
        });
    }
    out
}

/// Group segments into sentences; a sentence ends after `.`, `!`, `?`, `;`
/// or a newline in free text (with the `.`, `!`, `?` and whitespace that
/// follow).
fn sentences(segs: Vec<Seg>) -> Vec<Vec<Seg>> {
    let mut out: Vec<Vec<Seg>> = Vec::new();
    let mut cur: Vec<Seg> = Vec::new();
    for seg in segs {
        if seg.protected {
            cur.push(seg);
            continue;
        }
        let t = seg.text.as_str();
        let mut from = 0;
        let mut i = 0;
        while let Some(j) = t.as_bytes()[i..]
            .iter()
            .position(|c| matches!(c, b'.' | b'!' | b'?' | b';' | b'\n'))
        {
            // The terminator, then what follows it.
            let mut end = i + j + 1;
            for c in t[end..].chars() {
                if matches!(c, '.' | '!' | '?') || c.is_whitespace() {
                    end += c.len_utf8();
                } else {
                    break;
                }
            }
            cur.push(Seg {
                text: t[from..end].to_owned(),
                protected: false,
            });
            out.push(std::mem::take(&mut cur));
            from = end;
            i = end;
        }
        if from < t.len() {
            cur.push(Seg {
                text: t[from..].to_owned(),
                protected: false,
            });
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn free_text(s: &[Seg]) -> String {
    s.iter()
        .filter(|x| !x.protected)
        .map(|x| x.text.to_ascii_lowercase())
        .collect::<Vec<_>>()
        .join(" ")
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '\'' || c == '’'
}

/// Whether a sentence carries a negation (any case), without copying it.
fn negated(s: &[Seg]) -> bool {
    let negation = |w: &str| {
        let b = w.as_bytes();
        // Every negation word starts with n, w or c; "…n't" holds an apostrophe.
        (matches!(
            b.first().map(u8::to_ascii_lowercase),
            Some(b'n' | b'w' | b'c')
        ) && NEGATIONS
            .iter()
            .any(|n| n.len() == w.len() && w.eq_ignore_ascii_case(n)))
            || ((w.contains('\'') || w.contains('’')) && {
                let w = w.to_ascii_lowercase();
                w.ends_with("n't") || w.ends_with("n’t")
            })
    };
    s.iter()
        .filter(|x| !x.protected)
        .any(|x| x.text.split(|c: char| !is_word_char(c)).any(negation))
}

/// Case-insensitive match of a lower-case ASCII phrase at the start of `text`,
/// ending at a word boundary. Returns the matched byte length.
fn match_at(text: &str, phrase: &str) -> Option<usize> {
    let n = phrase.len();
    let first = |s: &str| s.as_bytes().first().map(u8::to_ascii_lowercase);
    if text.len() < n
        || first(text) != first(phrase)
        || !text.is_char_boundary(n)
        || !text[..n].eq_ignore_ascii_case(phrase)
    {
        return None;
    }
    let next = text[n..].chars().next();
    let last = phrase.chars().last();
    match (next, last) {
        (Some(c), Some(l)) if is_word_char(c) && is_word_char(l) => None,
        _ => Some(n),
    }
}

/// Remove a phrase of `rule` that opens the (negation-free) sentence.
fn apply_start(s: &mut [Seg], rule: &Rule) -> bool {
    let alone = s.len() == 1;
    let Some(first) = s.first_mut() else {
        return false;
    };
    if first.protected {
        return false;
    }
    let lead = first.text.len() - first.text.trim_start().len();
    let body = &first.text[lead..];
    for phrase in rule.phrases {
        if let Some(n) = match_at(body, phrase) {
            let rest = body[n..].trim_start_matches(',').trim_start();
            if alone && rest.trim_start_matches(['.', '!', '?']).trim().is_empty() {
                // The phrase is the whole sentence: drop the sentence.
                first.text = String::new();
                return true;
            }
            let mut fixed = String::with_capacity(first.text.len());
            fixed.push_str(&first.text[..lead]);
            let mut cs = rest.chars();
            if let Some(c) = cs.next() {
                fixed.push(c.to_ascii_uppercase());
                fixed.push_str(cs.as_str());
            }
            first.text = fixed;
            return true;
        }
    }
    false
}

/// Remove `rule`'s words anywhere in the (negation-free) sentence.
fn apply_anywhere(s: &mut [Seg], rule: &Rule) -> bool {
    let mut hit = false;
    let total_words: usize = s
        .iter()
        .filter(|x| !x.protected)
        .map(|x| x.text.split_whitespace().count())
        .sum();
    if total_words <= 2 {
        return false;
    }
    for seg in s.iter_mut().filter(|x| !x.protected) {
        let t = seg.text.as_str();
        let b = t.as_bytes();
        let mut out = String::new();
        let (mut copied, mut i) = (0, 0);
        while i < b.len() {
            // A phrase can only start at an ASCII letter that some phrase
            // starts with, at the start of a word.
            let first = b[i].to_ascii_lowercase();
            let candidate = first.is_ascii_lowercase()
                && rule
                    .phrases
                    .iter()
                    .any(|p| p.as_bytes().first() == Some(&first))
                && (i == 0 || !t[..i].chars().next_back().is_some_and(is_word_char));
            let found = if candidate {
                rule.phrases.iter().find_map(|p| match_at(&t[i..], p))
            } else {
                None
            };
            match found {
                // Remove the word and one following space; a sentence-initial
                // word, one followed by punctuation or one after a comma stays.
                Some(n)
                    if t[i + n..].starts_with(' ')
                        && i > 0
                        && !t[..i].trim_end().ends_with(',') =>
                {
                    out.push_str(&t[copied..i]);
                    i += n + 1;
                    copied = i;
                }
                // Not a phrase start: step a byte (a phrase never starts
                // inside a character, whose bytes are not ASCII letters).
                _ => i += 1,
            }
        }
        if copied > 0 {
            out.push_str(&t[copied..]);
            seg.text = out;
            hit = true;
        }
    }
    hit
}

fn apply_closing(sentences: &mut Vec<Vec<Seg>>, rule: &Rule) -> bool {
    let mut hit = false;
    loop {
        // Trailing sentences without letters or digits (emoji, punctuation)
        // belong to the courtesy before them.
        let mut j = sentences.len();
        while j > 0
            && !free_text(&sentences[j - 1])
                .chars()
                .any(char::is_alphanumeric)
        {
            j -= 1;
        }
        if j < 2 {
            break;
        }
        let last = &sentences[j - 1];
        if last.iter().any(|x| x.protected) {
            break;
        }
        let text = free_text(last);
        let core = text
            .trim()
            .trim_end_matches(|c: char| !c.is_alphanumeric())
            .trim_end_matches(" again")
            .trim_end_matches(',');
        if rule.phrases.contains(&core) {
            sentences.truncate(j - 1);
            hit = true;
        } else {
            break;
        }
    }
    hit
}
