//! Held events are a cache, never a rule: every `step` and `select` vector,
//! with the first part of its events held and the rest sent, answers the same
//! bytes as the plain call.

use foldline_core::{api, held};
use serde_json::Value;

fn vectors(area: &str) -> Vec<Value> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("../tests/vectors/{area}.json"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The request with its events split at `k`: the held update and the rest.
fn split(request: &Value, pointer: &str, k: usize) -> (Value, Value) {
    let mut rest = request.clone();
    let events = rest.pointer_mut(pointer).unwrap().as_array_mut().unwrap();
    let front: Vec<Value> = events.drain(..k).collect();
    (serde_json::json!({ "events": front }), rest)
}

fn each_split(area: &str, pointer: &str) -> usize {
    let mut checked = 0;
    for v in vectors(area) {
        let request = &v["request"];
        let Some(events) = request.pointer(pointer).and_then(Value::as_array) else {
            continue;
        };
        let entry = v["entry"].as_str().unwrap();
        let plain = api::call(entry, request.to_string().as_bytes());
        for k in [0, events.len() / 2, events.len()] {
            let (update, rest) = split(request, pointer, k);
            let mut h = held::Held::default();
            let answer = held::hold(&mut h, update.to_string().as_bytes());
            assert_eq!(
                String::from_utf8(answer).unwrap(),
                format!("{{\"ok\":{k}}}")
            );
            let through = held::call(&mut h, entry, rest.to_string().as_bytes());
            // Lent, not lost: the same events are held after the call.
            assert_eq!(h.events.len(), k);
            let again = held::call(&mut h, entry, rest.to_string().as_bytes());
            assert_eq!(again, through, "a second call answers the same");
            assert_eq!(
                String::from_utf8_lossy(&through),
                String::from_utf8_lossy(&plain),
                "{} with {k} of {} events held",
                v["name"],
                events.len()
            );
            checked += 1;
        }
    }
    checked
}

#[test]
fn held_select_answers_as_the_plain_call() {
    assert!(each_split("select", "/events") >= 30);
}

#[test]
fn held_step_answers_as_the_plain_call() {
    assert!(each_split("step", "/view/events") >= 60);
}

#[test]
fn a_held_warm_candidate_is_offered_as_view_warm() {
    let mut checked = 0;
    for v in vectors("step") {
        let request = &v["request"];
        let Some(warm) = request.pointer("/view/warm").filter(|w| !w.is_null()) else {
            continue;
        };
        let mut rest = request.clone();
        rest["view"]["warm"] = Value::Null;
        let mut h = held::Held::default();
        held::hold(
            &mut h,
            serde_json::json!({ "warm": warm }).to_string().as_bytes(),
        );
        let plain = api::call("step", request.to_string().as_bytes());
        assert_eq!(
            held::call(&mut h, "step", rest.to_string().as_bytes()),
            plain,
            "{}",
            v["name"]
        );
        // Cleared, the candidate is no longer offered.
        held::hold(&mut h, br#"{"clearWarm": true}"#);
        assert_eq!(h.warm, None);
        checked += 1;
    }
    assert!(checked >= 1, "no step vector offers a warm candidate");
}

#[test]
fn reset_drops_what_was_held_and_a_bad_update_changes_nothing() {
    let mut h = held::Held::default();
    let e = r#"{"type":"message","conversation":"c","sourceSeq":1,"turnId":"t1","role":"user","parts":[{"type":"text","text":"hi"}]}"#;
    held::hold(&mut h, format!(r#"{{"events":[{e},{e}]}}"#).as_bytes());
    assert_eq!(h.events.len(), 2);
    let bad = String::from_utf8(held::hold(&mut h, br#"{"events":[{"type":"nope"}]}"#)).unwrap();
    assert!(
        bad.starts_with(r#"{"error":{"code":"invalid_request""#),
        "{bad}"
    );
    assert_eq!(h.events.len(), 2);
    assert_eq!(
        String::from_utf8(held::hold(&mut h, br#"{"reset":true}"#)).unwrap(),
        r#"{"ok":0}"#
    );
    assert!(h.events.is_empty());
}

/// The request's view (or its select fields) held, and the call made without it.
#[test]
fn a_held_view_answers_as_the_plain_call() {
    let mut steps = 0;
    let mut with_state = 0;
    for v in vectors("step") {
        let request = &v["request"];
        let Some(view) = request.get("view").filter(|w| !w.is_null()) else {
            continue;
        };
        // A starting step: no state, or the state a `read` came with (a
        // run folding a backlog carries its folds through it).
        let starting = request["state"].is_null() || request["state"]["stage"] == "start";
        if !starting || !view["warm"].is_null() {
            continue;
        }
        with_state += usize::from(!request["state"].is_null());
        let mut rest = request.clone();
        rest.as_object_mut().unwrap().remove("view");
        let mut h = held::Held::default();
        let update = serde_json::json!({ "events": view["events"], "view": view });
        held::hold(&mut h, update.to_string().as_bytes());
        let plain = api::call("step", request.to_string().as_bytes());
        assert_eq!(
            String::from_utf8_lossy(&held::call(&mut h, "step", rest.to_string().as_bytes())),
            String::from_utf8_lossy(&plain),
            "{}",
            v["name"]
        );
        steps += 1;
    }
    assert!(steps >= 20, "{steps} step vectors");
    assert!(
        with_state >= 4,
        "{with_state} step vectors go on after a read"
    );
    let mut selects = 0;
    for v in vectors("select") {
        let r = &v["request"];
        let view = serde_json::json!({
            "declaration": r["declaration"], "route": r["route"], "frontier": r.get("frontier"),
            "head": r.get("head"), "amendment": r.get("amendment"), "events": [],
            "carried": r.get("carried"),
        });
        let mut options = serde_json::Map::new();
        for k in [
            "prompt",
            "promptSender",
            "format",
            "limit",
            "render",
            "member",
        ] {
            if let Some(x) = r.get(k) {
                options.insert(k.into(), x.clone());
            }
        }
        let mut h = held::Held::default();
        let update = serde_json::json!({ "events": r["events"], "view": view });
        assert!(
            String::from_utf8(held::hold(&mut h, update.to_string().as_bytes()))
                .unwrap()
                .starts_with("{\"ok\"")
        );
        let plain = api::call("select", r.to_string().as_bytes());
        let context = held::call(
            &mut h,
            "context",
            Value::Object(options).to_string().as_bytes(),
        );
        assert_eq!(
            String::from_utf8_lossy(&context),
            String::from_utf8_lossy(&plain),
            "{}",
            v["name"]
        );
        selects += 1;
    }
    assert!(selects >= 10, "{selects} select vectors");
}

#[test]
fn context_without_a_held_view_is_refused() {
    let mut h = held::Held::default();
    let out = String::from_utf8(held::call(&mut h, "context", b"{}")).unwrap();
    assert!(
        out.starts_with(r#"{"error":{"code":"invalid_request""#),
        "{out}"
    );
}
