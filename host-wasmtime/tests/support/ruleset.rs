//! A second artifact, the same code under the next ruleset version — what a
//! release that bumps `RULESET_VERSION` ships — for the journey's upgrade.

use std::path::PathBuf;
use std::process::Command;

/// The ruleset version of the upgraded artifact.
pub const NEXT_RULESET: &str = "foldline-ruleset/next";

/// Build (once; cargo reuses it afterwards) the wasm artifact with
/// `FOLDLINE_RULESET_VERSION` set to [`NEXT_RULESET`], in its own target
/// directory, and answer its path.
pub fn next_ruleset_wasm() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let target = root.join("target").join("ruleset-next");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(&root)
        .args([
            "build",
            "--quiet",
            "--release",
            "--target",
            "wasm32-unknown-unknown",
            "-p",
            "foldline-wasm",
            "--target-dir",
        ])
        .arg(&target)
        .env("FOLDLINE_RULESET_VERSION", NEXT_RULESET)
        .env_remove("RUSTFLAGS")
        .status()
        .expect("cargo runs");
    assert!(
        status.success(),
        "building the next-ruleset artifact failed"
    );
    target.join("wasm32-unknown-unknown/release/foldline_wasm.wasm")
}
