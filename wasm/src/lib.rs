//! foldline's one WebAssembly artifact.
//!
//! The same module serves two kinds of host:
//!
//! - **JavaScript** (browsers, Node, edge workers) through the wasm-bindgen
//!   exports in [`js`]: `call(entry, json)` and `version()`. Values cross as
//!   JSON text (the host's `JSON.stringify` / `JSON.parse`, outside the
//!   call), so every runtime reaches the one decoder; every answer is an
//!   envelope `{ ok }` or `{ error: { code, message, ids } }`, never a
//!   thrown trap.
//! - **wasmtime** through the raw ABI in [`abi`]: allocate, call with JSON
//!   bytes, read the result, free. The host stubs the JS imports as traps;
//!   the raw ABI never reaches them.
//!
//! ## ABI versions
//!
//! | version | added |
//! |---|---|
//! | 1.0 | `foldline_abi_major`, `foldline_abi_minor`, `foldline_alloc`, `foldline_free`, `foldline_call` with entries `plan`, `step`, `validate`, `select`, `timeline`, `trimPrompt`, `compressToolResult`, `settings` |
//! | 1.1 | JS: `callHeld`, `forget` — events and chain state held between calls (`foldline_core::held`) |
//! | 1.2 | raw ABI: `foldline_call_held`, `foldline_forget` — the same held events for the wasmtime host |
//!
//! A host checks the major version on load and refuses a module whose major
//! differs; a minor bump only adds entries.

pub mod abi;
pub mod held;
#[cfg(target_arch = "wasm32")]
pub mod js;

/// ABI major version: a host must refuse a different major.
pub const ABI_MAJOR: u32 = 1;
/// ABI minor version: additions only.
pub const ABI_MINOR: u32 = 2;

/// Version information as canonical JSON, as `version()` returns it:
/// `{"abi":{"major":..,"minor":..},"crate":"..","ruleset":".."}`.
pub fn version_info() -> String {
    format!(
        "{{\"abi\":{{\"major\":{ABI_MAJOR},\"minor\":{ABI_MINOR}}},\"crate\":\"{}\",\"ruleset\":\"{}\"}}",
        env!("CARGO_PKG_VERSION"),
        foldline_core::RULESET_VERSION
    )
}
