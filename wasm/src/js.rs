//! wasm-bindgen exports for JavaScript hosts.
//!
//! Values cross as JSON text: the host's `JSON.stringify` makes the request,
//! the core parses it in one pass, and the canonical answer comes back as a
//! string for the host's `JSON.parse`. One deserializer for every runtime
//! keeps the artifact small and the answers byte-identical.
//!
//! A call never reaches back into JavaScript while it runs (no imported
//! `JSON.parse` or object building inside the call): Node 20's V8 aborts
//! when optimized code that inlined a call into WebAssembly is deoptimized
//! by objects created during that call.

use foldline_core::api;
use wasm_bindgen::prelude::*;

/// Any entry point (`plan`, `validate`, `select`, `timeline`, `trimPrompt`,
/// `compressToolResult`, `settings`) with a JSON string; answers the
/// canonical JSON envelope `{ ok }` or `{ error }`, byte-identical to every
/// other runtime.
#[wasm_bindgen]
pub fn call(entry: &str, request: &str) -> String {
    api::call_str(entry, request)
}

/// Crate, ruleset and ABI versions as a JSON string.
#[wasm_bindgen]
pub fn version() -> String {
    crate::version_info()
}

/// `call` with what is held under `id` (`update`, a hold request
/// `{reset?, events?, warm?, clearWarm?, view?}` applied first; `""` for
/// none) in front of the request's own (`step`'s view, `select`, `context`):
/// the same answer as the plain call with it written out. `count`: the events
/// held before the update; another number is `invalid_request`.
#[wasm_bindgen(js_name = callHeld)]
pub fn call_held(id: u32, count: u32, entry: &str, request: &str, update: &str) -> String {
    String::from_utf8(crate::held::call(
        id,
        count,
        entry,
        request.as_bytes(),
        update.as_bytes(),
    ))
    .unwrap_or_default()
}

/// Drop what is held under `id`.
#[wasm_bindgen]
pub fn forget(id: u32) {
    crate::held::forget(id)
}
