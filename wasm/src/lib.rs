//! foldline's WebAssembly artifact. The wasm-bindgen exports and the raw ABI
//! arrive with the wasm issue; until then this crate only re-exports the core
//! so the workspace builds for `wasm32-unknown-unknown`.
#![forbid(unsafe_code)]

pub use foldline_core as core;
