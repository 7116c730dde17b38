//! Differential fuzzing: the same random requests through the native core and
//! through the `.wasm` under wasmtime give byte-identical answers; arbitrary
//! bytes and arbitrary JSON never trap, panic or hang either runtime.
//!
//! `PROPTEST_CASES=N` runs longer (CI uses the defaults below).
use std::sync::OnceLock;

use foldline_wasmtime::runtime::Foldline;
use proptest::prelude::*;
use serde_json::{json, Value};

/// Cases per property: the default, or `PROPTEST_CASES` for a longer run.
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn wasm() -> &'static Foldline {
    static F: OnceLock<Foldline> = OnceLock::new();
    F.get_or_init(|| Foldline::embedded().unwrap())
}

fn same(entry: &str, input: &[u8]) -> Result<(), TestCaseError> {
    let native = foldline_core::api::call(entry, input);
    let under_wasmtime = wasm()
        .call_raw(entry, input)
        .map_err(|e| TestCaseError::fail(format!("wasm failed: {e}")))?;
    prop_assert_eq!(
        String::from_utf8_lossy(&native),
        String::from_utf8_lossy(&under_wasmtime)
    );
    Ok(())
}

/// A random conversation as journal events: users, assistants, tool pairs,
/// pinned turns, corrections, late deliveries.
fn events() -> impl Strategy<Value = Vec<Value>> {
    prop::collection::vec((0u8..6, 1usize..4_000, 0u64..3), 1..50).prop_map(|shape| {
        let mut out = Vec::new();
        let mut seq = 1u64;
        let msg = |seq: u64, id: String, role: &str, parts: Value| {
            json!({"type": "message", "conversation": "c", "sourceSeq": seq, "turnId": id, "role": role, "parts": parts})
        };
        for (i, (kind, size, extra)) in shape.into_iter().enumerate() {
            let text = "é".repeat(size % 7) + &"x".repeat(size);
            match kind {
                0 => out.push(msg(seq, format!("u{i}"), "user", json!([{"type": "text", "text": text}]))),
                1 => out.push(msg(seq, format!("a{i}"), "assistant", json!([{"type": "text", "text": text}]))),
                2 => {
                    out.push(msg(seq, format!("c{i}"), "assistant", json!([{"type": "toolCall", "callId": format!("k{i}"), "name": "run_code", "arguments": "{}"}])));
                    seq += 1;
                    out.push(msg(seq, format!("r{i}"), "tool", json!([{"type": "toolResult", "callId": format!("k{i}"), "content": text}])));
                }
                3 => out.push(msg(0, format!("s{i}"), "system", json!([{"type": "text", "text": "be brief"}]))),
                4 if i > 0 => out.push(json!({"type": "correction", "turnId": format!("u{}", i - 1), "correctionSeq": extra, "parts": [{"type": "text", "text": text}]})),
                _ => out.push(json!({"type": "lateDelivery", "conversation": "c", "sourceSeq": seq / 2, "index": 3, "turnId": format!("l{i}"), "role": "user", "parts": [{"type": "text", "text": "late"}]})),
            }
            seq += 1;
        }
        out
    })
}

fn declaration() -> impl Strategy<Value = Value> {
    prop_oneof![
        (1_000u64..30_000, 1u64..3).prop_map(|(retain, k)| json!({"targetId": "a", "compactorId": "b", "budget": {"kind": "chars", "trigger": retain * (k + 1), "retain": retain}, "summary": {"maxChars": 400}})),
        (4_000u64..20_000, prop_oneof![Just("eager"), Just("lazy")]).prop_map(|(window, mode)| json!({"targetId": "a", "compactorId": "b", "budget": {"kind": "tokens", "window": window, "mode": mode}, "summary": {"maxTokens": 200, "maxChars": 800}})),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(48), ..ProptestConfig::default() })]

    #[test]
    fn plan_and_select_agree_natively_and_under_wasmtime(ev in events(), decl in declaration(), manual in any::<bool>(), limit in 500u64..50_000) {
        let route = json!({"conversation": "c"});
        // Activation, then a plan with the frontier, as a driver would do.
        let activate = json!({"declaration": decl, "route": route, "events": ev, "owner": "m"});
        same("plan", activate.to_string().as_bytes())?;
        let answer: Value = serde_json::from_slice(&foldline_core::api::call("plan", activate.to_string().as_bytes())).unwrap();
        let mut req = activate.clone();
        if let Some(f) = answer.pointer("/ok/frontier") {
            req["frontier"] = f.clone();
        }
        if manual {
            req["trigger"] = json!({"kind": "manual", "actor": "m"});
        }
        same("plan", req.to_string().as_bytes())?;
        let sel = json!({"declaration": decl, "route": route, "events": ev, "limit": limit, "format": "anthropic"});
        same("select", sel.to_string().as_bytes())?;
        same("timeline", json!({"events": ev}).to_string().as_bytes())?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(256), ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_trap(bytes in prop::collection::vec(any::<u8>(), 0..600), entry in 0usize..8) {
        let name = ["plan", "validate", "select", "timeline", "trimPrompt", "compressToolResult", "settings", "nope"][entry];
        same(name, &bytes)?;
    }

    #[test]
    fn arbitrary_text_through_member_compression(text in "\\PC{0,400}", tool in prop_oneof![Just("run_code"), Just("search")]) {
        same("trimPrompt", json!({"text": text}).to_string().as_bytes())?;
        same("compressToolResult", json!({"tool": tool, "result": {"stdout": text, "stderr": text}}).to_string().as_bytes())?;
    }
}
