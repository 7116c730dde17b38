//! The JSON primitives on every hot path of foldline, in a crate of their own
//! so the size-optimized WebAssembly artifact can compile them for speed
//! (`profile.release.package.foldline-json.opt-level=3` in scripts/build-wasm) while the
//! policy code around them stays small.
//!
//! Everything here is non-generic on purpose: generic code is compiled in
//! the crate that instantiates it, at that crate's optimization level.

#![forbid(unsafe_code)]

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use sha2::{Digest, Sha256};

mod outline;
mod parse;
mod tree;

pub use outline::{outline, Member};
pub use parse::{parse, ParseError};
pub use tree::{Object, Tree};

/// Prefix of every hash string.
pub const HASH_PREFIX: &str = "sha256:";

/// Parse a tree from any serde deserializer (duplicate keys refused).
///
/// # Errors
/// The deserializer's error.
pub fn tree_from<'de, D: Deserializer<'de>>(d: D) -> Result<Tree<'static>, D::Error> {
    Owned::deserialize(d).map(|t| t.0)
}

struct Owned(Tree<'static>);

impl<'de> Deserialize<'de> for Owned {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(TreeVisitor).map(Owned)
    }
}

struct TreeVisitor;

impl<'de> Visitor<'de> for TreeVisitor {
    type Value = Tree<'static>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Tree::Null)
    }

    fn visit_bool<E>(self, b: bool) -> Result<Self::Value, E> {
        Ok(Tree::Bool(b))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Self::Value, E> {
        Ok(Tree::Number(n.into()))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Self::Value, E> {
        Ok(Tree::Number(n.into()))
    }

    fn visit_f64<E>(self, n: f64) -> Result<Self::Value, E> {
        // As serde_json's tree holds it: a float that is not finite is null.
        Ok(match serde_json::Number::from_f64(n) {
            Some(n) => Tree::Number(n),
            None => Tree::Null,
        })
    }

    fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
        Ok(Tree::String(Cow::Owned(s.to_owned())))
    }

    fn visit_string<E>(self, s: String) -> Result<Self::Value, E> {
        Ok(Tree::String(Cow::Owned(s)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(Owned(v)) = seq.next_element()? {
            items.push(v);
        }
        Ok(Tree::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
        let mut members = Vec::new();
        let mut object = tree::Building::on(&members);
        while let Some(key) = access.next_key::<String>()? {
            let Owned(v) = access.next_value()?;
            if let Err(key) = object.push(&mut members, Cow::Owned(key), v) {
                return Err(de::Error::custom(format_args!("duplicate field `{key}`")));
            }
        }
        Ok(Tree::Object(object.finish(&mut members)))
    }
}

/// Characters (Unicode scalar values) in `s`: its bytes less its UTF-8
/// continuation bytes (`10xxxxxx`), eight bytes at a time. The standard
/// library's `chars().count()`, built for size in the artifact
/// (`optimize_for_size`), goes byte by byte: 7 % of a per-message call.
pub fn char_count(s: &str) -> usize {
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let bytes = s.as_bytes();
    let mut chunks = bytes.chunks_exact(8);
    let mut continuation = 0;
    for chunk in &mut chunks {
        let w = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
        // Bit 7 set and bit 6 (shifted into bit 7's place) clear, per byte.
        continuation += (w & !(w << 1) & HIGH).count_ones() as usize;
    }
    continuation += chunks
        .remainder()
        .iter()
        .filter(|&&b| (b as i8) < -0x40)
        .count();
    bytes.len() - continuation
}

/// Write a JSON string: serde_json's escaping (`"`, `\`, control characters;
/// everything else verbatim as UTF-8).
pub fn write_str(s: &str, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.reserve(s.len() + 2);
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        // Eight bytes at a time while none needs escaping (most text): a
        // byte below 0x20, a quote or a backslash shows in the word's bits,
        // the first of them at the mask's lowest bit.
        if let Some(chunk) = bytes.get(i..i + 8) {
            let mask = escape_mask(u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8])));
            if mask == 0 {
                i += 8;
                continue;
            }
            i += (mask.trailing_zeros() / 8) as usize;
        }
        let b = bytes[i];
        i += 1;
        let esc: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0x00..=0x1f => b"",
            _ => continue,
        };
        out.extend_from_slice(&bytes[start..i - 1]);
        if esc.is_empty() {
            out.extend_from_slice(b"\\u00");
            out.push(HEX[(b >> 4) as usize]);
            out.push(HEX[(b & 15) as usize]);
        } else {
            out.extend_from_slice(esc);
        }
        start = i;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// The high bit of each of the eight bytes of `w` (little-endian) that is
/// below 0x20, `"` or `\\` (the bit tricks of "Bit Twiddling Hacks":
/// `haszero` and `hasless`). A borrow may also mark a byte above a marked
/// one, never one below: the lowest marked byte is the first such byte.
pub(crate) fn escape_mask(w: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
    let below_space = w.wrapping_sub(ONES * 0x20) & !w & HIGH;
    below_space | zero(w ^ (ONES * b'"' as u64)) | zero(w ^ (ONES * b'\\' as u64))
}

/// Write a non-negative integer.
pub fn write_u64(n: u64, out: &mut Vec<u8>) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut n = n;
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

/// Write a tree canonically: object keys sorted by their UTF-8 bytes, no
/// insignificant whitespace, integers as digits; any other number as
/// serde_json writes it.
pub fn write_value(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            // serde_json's map is a BTreeMap, its keys already in byte order
            // (`str`'s order), unless some crate in the build turns on
            // serde_json's "preserve_order": then a sorted copy is written.
            if !map.keys().zip(map.keys().skip(1)).all(|(a, b)| a < b) {
                let mut sorted = map.clone();
                sorted.sort_keys();
                return write_value(&Value::Object(sorted), out);
            }
            out.push(b'{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_str(k, out);
                out.push(b':');
                write_value(v, out);
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
        Value::String(s) => write_str(s, out),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Null => out.extend_from_slice(b"null"),
        Value::Number(n) => match n.as_u64() {
            Some(u) => write_u64(u, out),
            // Negative and fractional numbers occur only inside opaque values
            // (tool results); serde_json writes them.
            None => {
                let _ = serde_json::to_writer(&mut *out, n);
            }
        },
    }
}

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

/// `sha256:<hex>` of the bytes of `parts`, one after the other.
pub fn sha256_parts(parts: &[&[u8]]) -> String {
    let mut d = Sha256::new();
    for p in parts {
        d.update(p);
    }
    format_digest(&d.finalize())
}

/// Fold a sequence of hashes into one (a Merkle-style chain): each step
/// hashes the previous accumulator and the next hash string. The empty fold
/// is the hash of no bytes.
///
/// The last fold's steps are remembered (up to [`FOLD_MEMO`] of them), and a
/// fold that starts the same way resumes after their common prefix: the
/// context of one conversation, selected on every message, grows at its end,
/// so each new message costs one step instead of one per message in the
/// context. The answer is the same either way (tested).
pub fn fold_hashes(hashes: &[&str]) -> String {
    type Step = (String, [u8; 32]);
    thread_local! {
        static LAST: std::cell::RefCell<Vec<Step>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        let same = last
            .iter()
            .zip(hashes)
            .take_while(|((a, _), b)| a == *b)
            .count();
        last.truncate(same);
        let mut acc: [u8; 32] = match last.last() {
            Some((_, acc)) => *acc,
            None => Sha256::digest(b"").into(),
        };
        for h in &hashes[same..] {
            let mut d = Sha256::new();
            d.update(acc);
            d.update(h.as_bytes());
            acc = d.finalize().into();
            if last.len() < FOLD_MEMO {
                last.push(((*h).to_owned(), acc));
            }
        }
        format_digest(&acc)
    })
}

/// Steps of the last [`fold_hashes`] remembered.
pub const FOLD_MEMO: usize = 4096;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_escape_mask_marks_the_first_byte_to_escape() {
        let escaped = |b: u8| b < 0x20 || b == b'"' || b == b'\\';
        // Every byte value at every place, below it plain text, above it
        // bytes of every kind (a borrow may mark those, never a byte below).
        let above = [b'a', 0x00, 0x1f, 0x20, b'"', b'\\', 0x7f, 0x80, 0xff];
        for at in 0..8 {
            for b in 0..=255u8 {
                for &up in &above {
                    let mut word = [b'x'; 8];
                    word[at] = b;
                    word[at + 1..].fill(up);
                    let mask = escape_mask(u64::from_le_bytes(word));
                    let first = word.iter().position(|&c| escaped(c));
                    assert_eq!(
                        (mask != 0).then(|| mask.trailing_zeros() as usize / 8),
                        first,
                        "{word:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn strings_are_written_as_serde_json_writes_them() {
        let mut text = String::new();
        for c in (0u32..0x80).chain([0xe9, 0x2028, 0x1f600]) {
            text.push(char::from_u32(c).unwrap_or('?'));
        }
        // Each cut: the escapes at every place in and out of a word.
        for from in 0..16 {
            let s = &text[from..];
            let mut out = Vec::new();
            write_str(s, &mut out);
            assert_eq!(out, serde_json::to_vec(s).unwrap(), "{s:?}");
        }
    }

    /// The fold without its memo.
    fn fold_plain(hashes: &[&str]) -> String {
        let mut acc = Sha256::digest(b"");
        for h in hashes {
            let mut d = Sha256::new();
            d.update(acc);
            d.update(h.as_bytes());
            acc = d.finalize();
        }
        format_digest(&acc)
    }

    #[test]
    fn a_remembered_fold_answers_as_a_fresh_one() {
        let names: Vec<String> = (0..40).map(|i| format!("turn:user:{i}")).collect();
        let all: Vec<&str> = names.iter().map(String::as_str).collect();
        // Growing, shrinking, diverging in the middle, empty, repeated.
        let mut cases: Vec<Vec<&str>> = (0..=all.len()).map(|n| all[..n].to_vec()).collect();
        cases.push(all[..10].to_vec());
        cases.push([&all[..5], &["other"], &all[6..20]].concat());
        cases.push(vec![]);
        cases.push(all.clone());
        cases.push(all.clone());
        cases.push(all[1..].to_vec());
        for c in &cases {
            assert_eq!(fold_hashes(c), fold_plain(c), "{} steps", c.len());
        }
        let long: Vec<String> = (0..FOLD_MEMO + 10).map(|i| i.to_string()).collect();
        let long: Vec<&str> = long.iter().map(String::as_str).collect();
        assert_eq!(fold_hashes(&long), fold_plain(&long));
        assert_eq!(fold_hashes(&long), fold_plain(&long), "past the memo");
    }

    #[test]
    fn strings_escape_exactly_as_serde_json_does() {
        let all: String = (0u32..0x80)
            .filter_map(char::from_u32)
            .chain("é€😀\u{2028}\u{7f}".chars())
            .collect();
        for s in [all.as_str(), "", "plain", "a\"b\\c\nd"] {
            let mut ours = Vec::new();
            write_str(s, &mut ours);
            assert_eq!(ours, serde_json::to_vec(s).unwrap(), "{s:?}");
        }
    }

    #[test]
    fn every_byte_needing_escape_is_found_at_every_offset() {
        // The eight-bytes-at-a-time scan: each escaped character, at each
        // offset in and around a word, among plain ASCII and multi-byte text.
        let pads = ["", "a", "héllo wo", "0123456789abcdef", "€€€", "😀 x"];
        for c in (0u32..0x20)
            .chain([0x22, 0x5c, 0x7f, 0xe9, 0x2028])
            .filter_map(char::from_u32)
        {
            for pre in pads {
                for post in pads {
                    for n in 0..10 {
                        let s = format!("{pre}{}{c}{post}", "x".repeat(n));
                        let mut ours = Vec::new();
                        write_str(&s, &mut ours);
                        assert_eq!(ours, serde_json::to_vec(&s).unwrap(), "{s:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn char_count_counts_what_chars_counts() {
        let long = "ab€😀ç".repeat(37);
        for text in [
            "",
            "a",
            "héllo wörld",
            "😀 ok",
            "日本語のテキスト、長めの文です。",
            &long,
        ] {
            for cut in 0..text.len() {
                if let Some(part) = text.get(cut..) {
                    assert_eq!(char_count(part), part.chars().count(), "{part:?}");
                }
            }
        }
    }

    #[test]
    fn integers_and_trees_are_canonical() {
        for n in [0, 7, 10, 99, 1234567890, u64::MAX] {
            let mut ours = Vec::new();
            write_u64(n, &mut ours);
            assert_eq!(ours, n.to_string().into_bytes());
        }
        let v = parse(br#"{"b":1,"a":[true,null,"x",-2,1.5],"c":{"z":0,"y":-2}}"#)
            .unwrap()
            .into_value();
        let mut out = Vec::new();
        write_value(&v, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"a":[true,null,"x",-2,1.5],"b":1,"c":{"y":-2,"z":0}}"#
        );
    }

    #[test]
    fn duplicate_keys_are_refused() {
        let e = parse(br#"{"a":1,"a":2}"#).unwrap_err();
        assert!(e.to_string().contains("duplicate field `a`"), "{e}");
    }
}
