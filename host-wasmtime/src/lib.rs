//! # foldline-wasmtime
//!
//! The server host of foldline. It runs the very `.wasm` the npm package
//! ships (embedded in this crate, or loaded from a file) under wasmtime, with
//! every call bounded by fuel and a memory limit, and offers the same driver
//! as the JS package over a [`Journal`](journal::Journal) and a
//! [`Model`](model::Model):
//!
//! - [`runtime`]: load, check the ABI version, report the SHA-256, call;
//! - [`journal`]: the journal trait, its contract suite, the SQLite journal
//!   (one file) and the PostgreSQL journal (any number of replicas);
//! - [`model`]: the model trait, the offline extractive summarizer and the
//!   OpenAI-compatible adapter;
//! - [`driver`]: carries out the effects the core's `step` answers (read,
//!   store the packet, call the model, append) under a writer lease, and
//!   renders the context and the timeline;
//! - [`builder`]: a driver configured in one expression, on the token
//!   defaults, its declaration checked when built;
//! - `serve` (feature `serve`): `foldline serve`, the owner-scoped HTTP API
//!   over the driver, as a router an axum app can mount.
//!
//! Features: `sqlite` (the SQLite journal), `postgres` (the PostgreSQL
//! journal), `openai` (the OpenAI-compatible model), `serve` (the server;
//! needs `sqlite`) and `cli` (the `foldline` program; all of them, the
//! default). With `default-features = false` the crate is the driver, the
//! runtime, the offline models and the journal trait with its contract suite.
//!
//! ```no_run
//! use foldline_wasmtime::{runtime::Foldline, journal::SqliteJournal, model::Extractive, driver::Driver};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let foldline = Foldline::embedded()?;
//! let journal = SqliteJournal::open("foldline.db")?;
//! // The seed's token defaults; the declaration is checked here.
//! let driver = Driver::builder(foldline, journal, Extractive).owner("alice").build()?;
//! driver.append("conversation-1", r#"{"role":"user","content":"Hello"}"#)?;
//! let outcome = driver.on_message("conversation-1")?;
//! let context = driver.context("conversation-1", Default::default())?;
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod bound;
pub mod builder;
pub mod driver;
pub mod error;
pub mod ids;
pub mod import;
pub mod journal;
mod kept;
pub mod keys;
pub mod model;
pub mod runtime;
#[cfg(feature = "serve")]
pub mod serve;
pub mod settings;
pub mod summarizer;
mod sync;
#[cfg(feature = "tiktoken")]
pub mod tokenizer;

pub use error::{HostError, Result};
