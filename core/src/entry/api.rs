//! The JSON contract between runtimes.
//!
//! Every entry point exists in three forms (as in `cedar-policy`): typed
//! (`plan`, `validate`, ...), JSON value, and JSON string / bytes. The string
//! form answers `{"ok": <response>}` or `{"error": {"code", "message", "ids"}}`,
//! always in the canonical encoding (sorted keys, no whitespace), so every
//! runtime returns byte-identical output for the same input.

use crate::canonical::Encode;
use crate::decode::{self, Decode};
use crate::error::{Code, Error, Result};

/// Entry points reachable through [`call`].
pub const ENTRY_POINTS: [&str; 8] = [
    "plan",
    "step",
    "validate",
    "select",
    "timeline",
    "trimPrompt",
    "compressToolResult",
    "settings",
];

/// Parse a request from JSON bytes.
///
/// # Errors
/// `invalid_request` naming the line and column of a syntax error, or the
/// path (`events[3].role`) of a value that does not fit.
pub fn parse<T: Decode>(input: &[u8]) -> Result<T> {
    decode::from_slice(input).map_err(invalid)
}

/// A request's refusal, with a hint for its usual cause. Apart from
/// [`parse`] so its one copy serves every request type (the artifact
/// carried one per type).
#[inline(never)]
fn invalid(e: Error) -> Error {
    // serde_json refuses a lone UTF-16 surrogate (`\ud83d` without its
    // pair) as a bad hex escape; say what a JS client did to cause it.
    let hint = if e.message.contains("hex escape") || e.message.contains("surrogate") {
        " (a string holds a lone UTF-16 surrogate: text cut inside a character, e.g. half an emoji; send well-formed Unicode)"
    } else {
        ""
    };
    Error::new(
        Code::InvalidRequest,
        format!("request is not valid: {}{hint}", e.message),
    )
}

/// A result in the `{ok}` / `{error}` envelope, canonically encoded.
pub fn envelope<T: Encode>(r: Result<T>) -> Vec<u8> {
    let mut out = Vec::with_capacity(1024);
    match r {
        Ok(v) => {
            out.extend_from_slice(b"{\"ok\":");
            v.encode(&mut out);
        }
        Err(e) => {
            out.extend_from_slice(b"{\"error\":");
            e.encode(&mut out);
        }
    }
    out.push(b'}');
    out
}

pub(crate) fn run_bytes(entry: &str, input: &[u8]) -> Vec<u8> {
    match entry {
        "plan" => envelope(parse(input).map(|r| crate::ops::plan::plan(&r))),
        "step" => envelope(parse(input).and_then(crate::ops::run::step)),
        "validate" => settle_as_written(input).unwrap_or_else(|| {
            envelope(parse(input).and_then(|r| crate::ops::validate::validate(&r)))
        }),
        "select" => envelope(parse(input).and_then(|r| crate::ops::select::select(&r))),
        "timeline" => envelope(parse(input).and_then(|r| crate::ops::timeline::timeline(&r))),
        "trimPrompt" => envelope(parse(input).map(|r| crate::ops::member::trim::trim(&r))),
        "compressToolResult" => {
            envelope(parse(input).map(|r| crate::ops::member::tool_result::compress(&r)))
        }
        "settings" => envelope(parse(input).map(|r| crate::ops::member::settings::settings(&r))),
        other => envelope::<()>(Err(unknown(other))),
    }
}

fn unknown(entry: &str) -> Error {
    Error::new(
        Code::InvalidRequest,
        format!(
            "unknown entry point `{entry}`; expected one of {}",
            ENTRY_POINTS.join(", ")
        ),
    )
}

/// Call an entry point with JSON bytes; answers the canonical bytes of the
/// envelope. Never panics on any input. Requests are decoded by
/// [`crate::decode`] and answers written by [`crate::canonical::Encode`]: one
/// path for every runtime, and a small artifact.
pub fn call(entry: &str, input: &[u8]) -> Vec<u8> {
    run_bytes(entry, input)
}

/// The `validate` answer [`call`] gives a settle request whose packet comes
/// as the core wrote it, computed on the request's bytes (the packet's id
/// checked over them, its rendered messages and frozen turns never decoded);
/// `None` for any other request, which `call` decodes, and always `None` in
/// the WebAssembly artifact. For tests: `call` answers the same either way.
#[doc(hidden)]
pub fn settle_as_written(input: &[u8]) -> Option<Vec<u8>> {
    #[cfg(not(target_arch = "wasm32"))]
    {
        super::settle_bytes::settle(input)
    }
    // Not in the artifact (its size budget): `call` decodes every request.
    #[cfg(target_arch = "wasm32")]
    {
        let _ = input;
        None
    }
}

/// [`call`] for string input and output.
pub fn call_str(entry: &str, input: &str) -> String {
    // The canonical encoding is UTF-8 JSON produced by serde_json.
    String::from_utf8(call(entry, input.as_bytes())).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_json_is_a_typed_error_with_its_place() {
        let out = call_str("plan", "{\"declaration\": ");
        assert!(
            out.starts_with("{\"error\":{\"code\":\"invalid_request\""),
            "{out}"
        );
        assert!(out.contains("line 1"), "{out}");
    }

    #[test]
    fn unknown_fields_are_denied() {
        let out = call_str("timeline", r#"{"events": [], "extra": 1}"#);
        assert!(out.contains("unknown field"), "{out}");
        // With several, the least key is named, whatever their order.
        for request in [
            r#"{"zeta": 1, "events": [], "alpha": 2}"#,
            r#"{"alpha": 2, "events": [], "zeta": 1}"#,
        ] {
            let out = call_str("timeline", request);
            assert!(out.contains("unknown field `alpha`"), "{out}");
        }
    }

    #[test]
    fn unknown_entry_point_is_named() {
        assert!(call_str("nope", "{}").contains("unknown entry point"));
    }

    #[test]
    fn deep_nesting_does_not_overflow_the_stack() {
        let deep = "[".repeat(100_000);
        assert!(call_str("plan", &deep).contains("invalid_request"));
    }
}
