//! derive(Decode): requests are parsed by small generated functions that
//! read the same serde attributes as serialization. These tests hold the two
//! directions to each other and pin the decoder's rules and error paths.

use std::fmt::Debug;

use foldline_core::api::{self, call_str};
use foldline_core::canonical::{self, Encode};
use foldline_core::decode::Decode;
use foldline_core::event::Event;
use foldline_core::member::settings::{SettingsRequest, SettingsResponse};
use foldline_core::member::tool_result::{ToolResultRequest, ToolResultResponse};
use foldline_core::member::trim::{TrimRequest, TrimResult};
use foldline_core::{
    PlanOutcome, PlanRequest, SelectRequest, Selection, Timeline, TimelineRequest, ValidateRequest,
    ValidateResponse,
};
use serde::Serialize;
use serde_json::Value;

/// Decode `bytes`, encode the result canonically, decode that again: the two
/// values are equal and the second encoding equals the first. Any field name,
/// default or tag on which Decode and Serialize disagree breaks this.
fn fixed_point<T: Decode + Encode + Serialize + PartialEq + Debug>(
    name: &str,
    bytes: &[u8],
) -> Vec<u8> {
    let first: T = api::parse(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
    let encoded = canonical::encode(&first);
    let second: T = api::parse(&encoded).unwrap_or_else(|e| panic!("{name} (re-encoded): {e}"));
    assert_eq!(first, second, "{name}");
    assert_eq!(canonical::encode(&second), encoded, "{name}");
    // derive(Encode) writes exactly serde's encoding with keys sorted, so a
    // Rust host serializing with serde sends what every runtime hashes.
    let via_serde = canonical::encode_value(&serde_json::to_value(&first).unwrap());
    assert_eq!(via_serde, encoded, "{name}: Encode and Serialize disagree");
    encoded
}

fn check<Req, Resp>(name: &str, request: &Value, ok: Option<&Value>)
where
    Req: Decode + Encode + Serialize + PartialEq + Debug,
    Resp: Decode + Encode + Serialize + PartialEq + Debug,
{
    fixed_point::<Req>(name, request.to_string().as_bytes());
    if let Some(ok) = ok {
        // A response decodes back (Rust hosts read responses through serde,
        // whose impl the derive routes through the same function) and
        // re-encodes to the very bytes every runtime answered.
        let again = fixed_point::<Resp>(name, ok.to_string().as_bytes());
        assert_eq!(again, canonical::encode(ok), "{name}");
    }
}

#[test]
fn every_vector_request_and_response_is_a_fixed_point_of_decode_and_encode() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/vectors");
    let mut seen = 0;
    for file in ["plan", "validate", "select", "timeline", "member"] {
        let text = std::fs::read_to_string(dir.join(format!("{file}.json"))).unwrap();
        let vectors: Vec<Value> = serde_json::from_str(&text).unwrap();
        for v in &vectors {
            let name = v["name"].as_str().unwrap();
            let request = &v["request"];
            let ok = v["expected"].get("ok");
            if request.is_string()
                || (ok.is_none() && v["expected"]["error"]["code"] == "invalid_request")
            {
                continue; // raw or deliberately malformed input
            }
            match v["entry"].as_str().unwrap() {
                "plan" => check::<PlanRequest, PlanOutcome>(name, request, ok),
                "validate" => check::<ValidateRequest, ValidateResponse>(name, request, ok),
                "select" => check::<SelectRequest, Selection>(name, request, ok),
                "timeline" => check::<TimelineRequest, Timeline>(name, request, ok),
                "trimPrompt" => check::<TrimRequest, TrimResult>(name, request, ok),
                "compressToolResult" => {
                    check::<ToolResultRequest, ToolResultResponse>(name, request, ok)
                }
                "settings" => check::<SettingsRequest, SettingsResponse>(name, request, ok),
                other => panic!("{name}: unknown entry {other}"),
            }
            seen += 1;
        }
    }
    assert!(seen > 140, "only {seen} vectors checked");
}

fn error_of(entry: &str, input: &str) -> String {
    let out: Value = serde_json::from_str(&call_str(entry, input)).unwrap();
    assert_eq!(out["error"]["code"], "invalid_request", "{out}");
    out["error"]["message"].as_str().unwrap().to_string()
}

const MESSAGE: &str = r#""type":"message","conversation":"c","sourceSeq":1,"turnId":"t1","parts":[{"type":"text","text":"hi"}]"#;

#[test]
fn a_valid_event_decodes() {
    let out = call_str(
        "timeline",
        &format!(r#"{{"events":[{{{MESSAGE},"role":"user"}}]}}"#),
    );
    assert!(out.starts_with(r#"{"ok":"#), "{out}");
}

#[test]
fn errors_name_the_path_of_the_value() {
    let m = error_of(
        "timeline",
        &format!(r#"{{"events":[{{{MESSAGE},"role":"bot"}}]}}"#),
    );
    assert!(
        m.contains("events[0].role: unknown variant `bot`, expected one of `system`"),
        "{m}"
    );
    let m = error_of("trimPrompt", r#"{"text": 5}"#);
    assert!(m.contains("text: expected a string, found a number"), "{m}");
}

#[test]
fn unknown_fields_are_refused_with_the_known_ones() {
    let m = error_of("timeline", r#"{"events": [], "extra": 1}"#);
    assert!(
        m.contains("unknown field `extra`, expected one of `events`, `accepted`"),
        "{m}"
    );
    let m = error_of(
        "timeline",
        &format!(r#"{{"events":[{{{MESSAGE},"role":"user","colour":1}}]}}"#),
    );
    assert!(m.contains("events[0]: unknown field `colour`"), "{m}");
}

#[test]
fn duplicate_keys_are_refused_not_last_wins() {
    let m = error_of("trimPrompt", r#"{"text": "a", "text": "b"}"#);
    assert!(m.contains("duplicate field `text`"), "{m}");
}

#[test]
fn missing_required_fields_are_named_and_options_may_be_absent_or_null() {
    let m = error_of(
        "timeline",
        r#"{"events":[{"type":"message","conversation":"c"}]}"#,
    );
    assert!(m.contains("events[0]: missing field `sourceSeq`"), "{m}");
    let with_null = format!(r#"{{"events":[{{{MESSAGE},"role":"user","tokens":null}}]}}"#);
    assert!(call_str("timeline", &with_null).starts_with(r#"{"ok":"#));
    let m = error_of("trimPrompt", r#"{"text": null}"#);
    assert!(m.contains("text: expected a string, found null"), "{m}");
}

#[test]
fn integers_are_non_negative_whole_and_in_range() {
    for (seq, why) in [
        ("-1", "found -1"),
        ("1.5", "found a fraction"),
        ("1e30", "found a fraction"),
    ] {
        let m = error_of(
            "timeline",
            &format!(r#"{{"events":[{{"type":"message","conversation":"c","sourceSeq":{seq}}}]}}"#),
        );
        assert!(
            m.contains(&format!(
                "events[0].sourceSeq: expected a non-negative integer, {why}"
            )),
            "{m}"
        );
    }
    let big = format!(r#"{{"events":[{{{MESSAGE},"role":"user","index":4294967296}}]}}"#);
    let m = error_of("timeline", &big);
    assert!(
        m.contains("events[0].index: 4294967296 is over 4294967295"),
        "{m}"
    );
}

#[test]
fn tagged_enums_need_a_known_string_tag() {
    let m = error_of("timeline", r#"{"events":[{"conversation":"c"}]}"#);
    assert!(m.contains("events[0]: missing field `type`"), "{m}");
    let m = error_of("timeline", r#"{"events":[{"type":"nope"}]}"#);
    assert!(
        m.contains("events[0].type: unknown variant `nope`, expected one of `message`"),
        "{m}"
    );
    let m = error_of("timeline", r#"{"events":[{"type":7}]}"#);
    assert!(
        m.contains("events[0].type: expected a string, found a number"),
        "{m}"
    );
}

#[test]
fn syntax_errors_keep_line_and_column() {
    let m = error_of("plan", "{\"declaration\": ");
    assert!(m.contains("line 1 column"), "{m}");
}

#[test]
fn serde_deserialize_goes_through_the_same_decoder() {
    let ok: Event = serde_json::from_str(&format!("{{{MESSAGE},\"role\":\"user\"}}")).unwrap();
    assert!(matches!(ok, Event::Message(_)));
    let err =
        serde_json::from_str::<Event>(&format!("{{{MESSAGE},\"role\":\"bot\"}}")).unwrap_err();
    assert!(
        err.to_string().contains("role: unknown variant `bot`"),
        "{err}"
    );
}
