//! The wasmtime host for foldline. Loading the `.wasm` under wasmtime, the
//! driver and the SQLite journal arrive with the host issue; this crate is a
//! placeholder so the workspace layout of DESIGN.md builds today.
#![forbid(unsafe_code)]
