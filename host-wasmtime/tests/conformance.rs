//! The conformance vectors under wasmtime: the same responses, byte for byte.
use foldline_wasmtime::runtime::Foldline;
use serde_json::Value;
use sha2::{Digest, Sha256};

#[test]
fn wasmtime_conformance() {
    let f = Foldline::embedded().unwrap();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/vectors");
    let (mut passed, mut failed) = (0, Vec::new());
    let mut digest = Sha256::new();
    for area in [
        "plan", "validate", "select", "timeline", "member", "contract", "step",
    ] {
        let vs: Vec<Value> = serde_json::from_str(
            &std::fs::read_to_string(dir.join(format!("{area}.json"))).unwrap(),
        )
        .unwrap();
        for v in vs {
            let input = match v.get("raw") {
                Some(Value::String(s)) => s.clone().into_bytes(),
                _ => v["request"].to_string().into_bytes(),
            };
            let out = f.call_raw(v["entry"].as_str().unwrap(), &input).unwrap();
            if out == foldline_core::canonical::encode_value(&v["expected"]) {
                passed += 1;
            } else {
                failed.push(v["name"].as_str().unwrap().to_owned());
            }
            digest.update(&out);
            digest.update(b"\n");
        }
    }
    println!(
        "conformance wasmtime: {passed} passed, {} failed, digest sha256:{:x}",
        failed.len(),
        digest.finalize()
    );
    assert!(failed.is_empty(), "{failed:?}");
}
