//! Tool-result compression of the model-bound copy of `run_code` stdout and
//! stderr. The raw result stays canonical for audit and presentation; only
//! the copy sent to the model gets smaller.
//!
//! Deterministic filters, in order: terminal escape codes, carriage-return
//! progress lines, runs of repeated lines, and a long middle elided with an
//! explicit marker saying how much was elided. Exit status, artifact
//! references, diagnostics, source ids and member-facing summaries — every
//! field other than `stdout` and `stderr` — pass through untouched. Search,
//! conversation-history search, document retrieval, any other tool and
//! private output pass byte-for-byte. A result that would not get smaller
//! passes through as a bypass; any failure returns the original.

use foldline_derive::{Decode, Encode};
use serde::Serialize;
use serde_json::Value;

use super::{Measurement, Status};

/// The only eligible tool.
pub const ELIGIBLE_TOOL: &str = "run_code";
/// Fields that are filtered; every other field passes through.
pub const FILTERED_FIELDS: [&str; 2] = ["stdout", "stderr"];
/// A run of identical lines longer than this collapses to one line + marker.
pub const REPEAT_RUN: usize = 3;
/// Lines kept at the head and at the tail when the middle is elided.
pub const KEEP_LINES: usize = 40;
/// Characters kept at each end when a stream is still over [`MAX_CHARS`].
pub const KEEP_CHARS: usize = 4_000;
/// Most characters a filtered stream keeps before its middle is elided.
pub const MAX_CHARS: usize = 12_000;

/// A tool-result compression request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolResultRequest {
    /// Tool name (`run_code`, `search`, `conversation_search`, `document_retrieval`, ...).
    pub tool: String,
    /// Private collaboration output: never compressed.
    #[serde(default)]
    pub private: bool,
    /// The authorized result object.
    pub result: Value,
}

/// The model-bound copy and the measurement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolResultResponse {
    /// What goes to the model.
    pub result: Value,
    /// What the pass did.
    pub measurement: Measurement,
}

/// Compress the model-bound copy of a tool result.
pub fn compress(req: &ToolResultRequest) -> ToolResultResponse {
    let eligible_bytes: usize = match &req.result {
        Value::Object(m) => FILTERED_FIELDS
            .iter()
            .filter_map(|f| m.get(*f).and_then(Value::as_str))
            .map(str::len)
            .sum(),
        _ => 0,
    };
    let pass = |status, reason: &str| ToolResultResponse {
        result: req.result.clone(),
        measurement: Measurement::passthrough(eligible_bytes, status, reason),
    };
    if req.tool != ELIGIBLE_TOOL {
        return pass(Status::Bypassed, "tool_not_eligible");
    }
    if req.private {
        return pass(Status::Bypassed, "private_output");
    }
    let Value::Object(map) = &req.result else {
        return pass(Status::Failed, "result_not_an_object");
    };
    if eligible_bytes == 0 {
        return pass(Status::Bypassed, "no_output");
    }
    let mut out = map.clone();
    let mut rules: Vec<String> = Vec::new();
    let mut delivered = 0usize;
    for field in FILTERED_FIELDS {
        if let Some(Value::String(s)) = map.get(field) {
            let (filtered, fired) = filter(s);
            for f in fired {
                if !rules.iter().any(|r| r == f) {
                    rules.push(f.to_owned());
                }
            }
            delivered += filtered.len();
            out.insert(field.to_owned(), Value::String(filtered));
        }
    }
    if delivered >= eligible_bytes {
        return pass(Status::Bypassed, "not_smaller");
    }
    ToolResultResponse {
        result: Value::Object(out),
        measurement: Measurement {
            eligible_bytes: eligible_bytes as u64,
            delivered_bytes: delivered as u64,
            status: Status::Applied,
            reason: None,
            rules,
        },
    }
}

/// Run the filters over one stream; returns the text and the filters that fired.
pub fn filter(s: &str) -> (String, Vec<&'static str>) {
    let mut fired = Vec::new();
    let mut text = strip_ansi(s);
    if text != s {
        fired.push("ansi_escapes");
    }
    let cr = collapse_carriage_returns(&text);
    if cr != text {
        fired.push("carriage_return_progress");
        text = cr;
    }
    let rep = collapse_repeats(&text);
    if rep != text {
        fired.push("repeated_lines");
        text = rep;
    }
    let el = elide_middle(&text);
    if el != text {
        fired.push("middle_elided");
        text = el;
    }
    (text, fired)
}

/// Remove CSI (`ESC [ … final`), OSC (`ESC ] … BEL|ESC \`) and two-byte escapes.
fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('[') => {
                for n in it.by_ref() {
                    if ('\u{40}'..='\u{7e}').contains(&n) {
                        break;
                    }
                }
            }
            Some(']') => {
                while let Some(n) = it.next() {
                    if n == '\u{7}' {
                        break;
                    }
                    if n == '\u{1b}' && it.peek() == Some(&'\\') {
                        it.next();
                        break;
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// Keep only what follows the last carriage return of each line (CRLF is a
/// plain line end).
fn collapse_carriage_returns(s: &str) -> String {
    if !s.contains('\r') {
        return s.to_owned();
    }
    s.split('\n')
        .map(|line| {
            let line = line.strip_suffix('\r').unwrap_or(line);
            match line.rfind('\r') {
                Some(i) => &line[i + 1..],
                None => line,
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn collapse_repeats(s: &str) -> String {
    let lines: Vec<&str> = s.split('\n').collect();
    let mut out: Vec<String> = Vec::with_capacity(lines.len());
    let mut i = 0;
    while i < lines.len() {
        let mut j = i + 1;
        while j < lines.len() && lines[j] == lines[i] {
            j += 1;
        }
        let run = j - i;
        out.push(lines[i].to_owned());
        if run >= REPEAT_RUN && !lines[i].is_empty() {
            out.push(format!("[… previous line repeated {} more times]", run - 1));
        } else {
            for _ in 1..run {
                out.push(lines[i].to_owned());
            }
        }
        i = j;
    }
    out.join("\n")
}

fn elide_middle(s: &str) -> String {
    let lines: Vec<&str> = s.split('\n').collect();
    let mut text = if lines.len() > 2 * KEEP_LINES + 1 && s.chars().count() > MAX_CHARS {
        let middle = &lines[KEEP_LINES..lines.len() - KEEP_LINES];
        let bytes: usize = middle.iter().map(|l| l.len() + 1).sum();
        let mut v: Vec<String> = lines[..KEEP_LINES]
            .iter()
            .map(|l| (*l).to_owned())
            .collect();
        v.push(format!(
            "[… {} lines ({} bytes) elided by foldline …]",
            middle.len(),
            bytes
        ));
        v.extend(
            lines[lines.len() - KEEP_LINES..]
                .iter()
                .map(|l| (*l).to_owned()),
        );
        v.join("\n")
    } else {
        s.to_owned()
    };
    let n = text.chars().count();
    if n > MAX_CHARS {
        let head: String = text.chars().take(KEEP_CHARS).collect();
        let tail: String = text.chars().skip(n - KEEP_CHARS).collect();
        text = format!(
            "{head}\n[… {} characters elided by foldline …]\n{tail}",
            n - 2 * KEEP_CHARS
        );
    }
    text
}
