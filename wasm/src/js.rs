//! wasm-bindgen exports for JavaScript hosts.
//!
//! Values cross as JSON: the request object is serialized with the host's own
//! `JSON.stringify`, parsed by the core in one pass, and the canonical answer
//! comes back through `JSON.parse`. One deserializer for every runtime keeps
//! the artifact small and the answers byte-identical.

use foldline_core::api;
use js_sys::JSON;
use wasm_bindgen::prelude::*;

fn run(entry: &str, request: &JsValue) -> JsValue {
    let out = match JSON::stringify(request).ok().and_then(|s| s.as_string()) {
        Some(s) => api::call_str(entry, &s),
        None => api::call_str(entry, "not JSON"),
    };
    JSON::parse(&out).unwrap_or(JsValue::NULL)
}

/// `plan`: when to compact and what to freeze. Answers `{ ok }` or `{ error }`.
#[wasm_bindgen]
pub fn plan(request: &JsValue) -> JsValue {
    run("plan", request)
}

/// `validate`: settle, resolve, declarations, stream, failure.
#[wasm_bindgen]
pub fn validate(request: &JsValue) -> JsValue {
    run("validate", request)
}

/// `select`: the model-bound context.
#[wasm_bindgen]
pub fn select(request: &JsValue) -> JsValue {
    run("select", request)
}

/// `timeline`: messages and dividers.
#[wasm_bindgen]
pub fn timeline(request: &JsValue) -> JsValue {
    run("timeline", request)
}

/// Prompt trim of a member's message.
#[wasm_bindgen(js_name = trimPrompt)]
pub fn trim_prompt(request: &JsValue) -> JsValue {
    run("trimPrompt", request)
}

/// Tool-result compression of the model-bound copy.
#[wasm_bindgen(js_name = compressToolResult)]
pub fn compress_tool_result(request: &JsValue) -> JsValue {
    run("compressToolResult", request)
}

/// Settings projection, plain-speak fragment and self-inspection answer.
#[wasm_bindgen(js_name = settingsProjection)]
pub fn settings_projection(request: &JsValue) -> JsValue {
    run("settings", request)
}

/// Any entry point with a JSON string; answers the canonical JSON string,
/// byte-identical to every other runtime.
#[wasm_bindgen]
pub fn call(entry: &str, request: &str) -> String {
    api::call_str(entry, request)
}

/// Crate, ruleset and ABI versions as a JSON string.
#[wasm_bindgen]
pub fn version() -> String {
    crate::version_info()
}
