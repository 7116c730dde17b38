//! The one canonical encoding behind every hash.
//!
//! A value is serialized to JSON with object keys sorted by their UTF-8 bytes,
//! no insignificant whitespace, and serde_json's string escaping; integers only
//! (the core has no floats). Its SHA-256 is written `sha256:` + lowercase hex.
//! The key order is enforced here, not left to serde_json's map type, so a
//! feature such as `preserve_order` elsewhere in a build cannot change a hash.

use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::error::{Code, Error, Result};

/// Prefix of every hash string.
pub const HASH_PREFIX: &str = "sha256:";

/// Format a raw digest as `sha256:<hex>`.
pub fn format_digest(digest: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(HASH_PREFIX.len() + digest.len() * 2);
    s.push_str(HASH_PREFIX);
    for b in digest {
        s.push(HEX[(b >> 4) as usize] as char);
        s.push(HEX[(b & 15) as usize] as char);
    }
    s
}

/// `sha256:<hex>` of raw bytes.
pub fn sha256(bytes: &[u8]) -> String {
    format_digest(&Sha256::digest(bytes))
}

/// Serialize any value to a JSON [`Value`], as a typed error on failure.
pub fn to_value<T: Serialize>(value: &T) -> Result<Value> {
    serde_json::to_value(value)
        .map_err(|e| Error::new(Code::InvalidRequest, format!("cannot encode value: {e}")))
}

/// The canonical bytes of a JSON value.
pub fn encode_value(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    write_value(value, &mut out);
    out
}

/// The canonical bytes of any serializable value.
///
/// # Errors
/// `invalid_request` if the value cannot be represented as JSON.
pub fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>> {
    Ok(encode_value(&to_value(value)?))
}

/// `sha256:<hex>` of the canonical encoding of a value.
///
/// # Errors
/// `invalid_request` if the value cannot be represented as JSON.
pub fn hash<T: Serialize>(value: &T) -> Result<String> {
    Ok(sha256(&encode(value)?))
}

/// Hash of a value's canonical encoding with one top-level field left out
/// (the field that will hold the hash itself, such as `id` or `hash`).
///
/// # Errors
/// `invalid_request` if the value cannot be represented as JSON.
pub fn hash_without<T: Serialize>(value: &T, field: &str) -> Result<String> {
    let mut v = to_value(value)?;
    if let Value::Object(map) = &mut v {
        map.remove(field);
    }
    Ok(sha256(&encode_value(&v)))
}

/// Fold a sequence of hashes into one (a Merkle-style chain): each step hashes
/// the previous accumulator and the next hash string. The empty fold is the
/// hash of no bytes. Hashes are combined, content is never re-hashed.
pub fn fold_hashes<'a, I: IntoIterator<Item = &'a str>>(hashes: I) -> String {
    let mut acc = Sha256::digest(b"").to_vec();
    for h in hashes {
        let mut d = Sha256::new();
        d.update(&acc);
        d.update(h.as_bytes());
        acc = d.finalize().to_vec();
    }
    format_digest(&acc)
}

fn write_value(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
            out.push(b'{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_string(k, out);
                out.push(b':');
                write_value(&map[k], out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(item, out);
            }
            out.push(b']');
        }
        Value::String(s) => write_string(s, out),
        other => {
            let _ = serde_json::to_writer(&mut *out, other);
        }
    }
}

fn write_string(s: &str, out: &mut Vec<u8>) {
    // serde_json's escaping of a string is fixed and documented; reuse it,
    // writing straight into the buffer (writing to a Vec cannot fail).
    let _ = serde_json::to_writer(&mut *out, s);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_are_sorted_and_whitespace_free() {
        let v = json!({"b": 1, "a": [true, null, "x"], "c": {"z": 0, "y": -2}});
        assert_eq!(
            String::from_utf8(encode_value(&v)).unwrap(),
            r#"{"a":[true,null,"x"],"b":1,"c":{"y":-2,"z":0}}"#
        );
    }

    #[test]
    fn hash_format_is_prefixed_lowercase_hex() {
        assert_eq!(
            sha256(b"abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn hash_without_ignores_the_named_field() {
        let a = json!({"id": "x", "k": 1});
        let b = json!({"id": "y", "k": 1});
        assert_eq!(
            hash_without(&a, "id").unwrap(),
            hash_without(&b, "id").unwrap()
        );
        assert_ne!(hash(&a).unwrap(), hash(&b).unwrap());
    }

    #[test]
    fn fold_depends_on_order() {
        assert_ne!(fold_hashes(["a", "b"]), fold_hashes(["b", "a"]));
    }
}
