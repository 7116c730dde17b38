//! The one canonical encoding behind every hash and every answer.
//!
//! JSON with object keys sorted by their UTF-8 bytes, no insignificant
//! whitespace, serde_json's string escaping, integers as digits (the core has
//! no floats; numbers inside opaque values are written as serde_json writes
//! them). Its SHA-256 is written `sha256:` + lowercase hex.
//!
//! Contract types implement [`Encode`] through `#[derive(Encode)]`
//! (`foldline-derive`), which writes these bytes directly: the key order is
//! fixed when the macro runs, an internally tagged enum's tag is merged into
//! its place, and no intermediate JSON value is built. The primitives (string
//! escaping, integers, JSON trees) live in `foldline-json`. The key order is
//! enforced here, not left to serde_json's map type, so a feature such as
//! `preserve_order` elsewhere in a build cannot change a hash.

use serde_json::Value;

pub use foldline_json::{format_digest, sha256, write_str, HASH_PREFIX};

/// The canonical bytes of a JSON value.
pub fn encode_value(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    foldline_json::write_value(value, &mut out);
    out
}

/// The canonical bytes of a value.
pub fn encode<T: Encode + ?Sized>(value: &T) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    value.encode(&mut out);
    out
}

/// `sha256:<hex>` of the canonical encoding of a value.
pub fn hash<T: Encode + ?Sized>(value: &T) -> String {
    sha256(&encode(value))
}

/// Hash of an object's canonical encoding with one member left out (the
/// field that will hold the hash itself, such as `id` or `hash`).
pub fn hash_without<T: EncodeMembers + ?Sized>(value: &T, field: &str) -> String {
    let mut out = Vec::with_capacity(256);
    Members::write(&mut out, None, Some(field), value);
    sha256(&out)
}

/// What [`remembered`] keeps of one computation: its last input and answer.
pub(crate) type Memo<T, R> = std::cell::RefCell<Option<(T, R)>>;

/// `f(key)`, or the answer of the last call with an equal key: a value every
/// call repeats (the declaration, the activation frontier) costs a
/// comparison instead of an encoding and a hash. The answer is `f`'s either
/// way.
pub(crate) fn remembered<T: PartialEq + Clone, R: Clone>(
    memo: &'static std::thread::LocalKey<Memo<T, R>>,
    key: &T,
    f: impl FnOnce(&T) -> R,
) -> R {
    let known = memo.with(|m| match &*m.borrow() {
        Some((k, r)) if k == key => Some(r.clone()),
        _ => None,
    });
    known.unwrap_or_else(|| {
        let r = f(key);
        memo.with(|m| *m.borrow_mut() = Some((key.clone(), r.clone())));
        r
    })
}

/// Fold a sequence of hashes into one (a Merkle-style chain): each step hashes
/// the previous accumulator and the next hash string. The empty fold is the
/// hash of no bytes. Hashes are combined, content is never re-hashed.
pub fn fold_hashes<'a, I: IntoIterator<Item = &'a str>>(hashes: I) -> String {
    foldline_json::fold_hashes(&hashes.into_iter().collect::<Vec<_>>())
}

/// A value with a canonical encoding, written straight to bytes
/// (`#[derive(Encode)]` from `foldline-derive` for the contract types).
pub trait Encode {
    /// Append the canonical encoding of `self` to `out`.
    fn encode(&self, out: &mut Vec<u8>);
}

/// A JSON object's members, written in canonical order by [`Members`]
/// (derived for structs; a tagged enum merges its tag into them).
pub trait EncodeMembers {
    /// Write every member, in ascending key order.
    fn members(&self, w: &mut Members<'_>);
}

/// Writes one JSON object whose members arrive in ascending key order; an
/// extra member (an enum's tag) is merged into its place, and one member can
/// be left out (the field that will hold a hash of the rest).
pub struct Members<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
    extra: Option<(&'static str, &'static str)>,
    skip: Option<&'a str>,
}

impl<'a> Members<'a> {
    /// Open an object.
    pub fn open(
        out: &'a mut Vec<u8>,
        extra: Option<(&'static str, &'static str)>,
        skip: Option<&'a str>,
    ) -> Self {
        out.push(b'{');
        Members {
            out,
            first: true,
            extra,
            skip,
        }
    }

    /// Write `m`'s members as one object.
    pub fn write<M: EncodeMembers + ?Sized>(
        out: &'a mut Vec<u8>,
        extra: Option<(&'static str, &'static str)>,
        skip: Option<&'a str>,
        m: &M,
    ) {
        let mut w = Members::open(out, extra, skip);
        m.members(&mut w);
        w.close();
    }

    fn key(&mut self, name: &str) {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        write_str(name, self.out);
        self.out.push(b':');
    }

    fn flush_extra_before(&mut self, name: Option<&str>) {
        if let Some((k, v)) = self.extra {
            if name.is_none_or(|n| k.as_bytes() < n.as_bytes()) {
                self.extra = None;
                self.key(k);
                write_str(v, self.out);
            }
        }
    }

    /// Write one member (keys must come in ascending order).
    pub fn field<T: Encode + ?Sized>(&mut self, name: &str, value: &T) {
        if self.begin(name) {
            value.encode(self.out);
        }
    }

    /// Write the key of member `name` (and the extra member before it, if it
    /// sorts first), unless it is the member left out. Out of line: one copy
    /// for the members of every type, not one per field type.
    #[inline(never)]
    fn begin(&mut self, name: &str) -> bool {
        if self.skip == Some(name) {
            return false;
        }
        self.flush_extra_before(Some(name));
        self.key(name);
        true
    }

    /// Close the object.
    pub fn close(mut self) {
        self.flush_extra_before(None);
        self.out.push(b'}');
    }
}

impl Encode for () {
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"null");
    }
}

impl EncodeMembers for () {
    fn members(&self, _: &mut Members<'_>) {}
}

impl<T: EncodeMembers + ?Sized> EncodeMembers for Box<T> {
    fn members(&self, w: &mut Members<'_>) {
        (**self).members(w)
    }
}

impl Encode for str {
    fn encode(&self, out: &mut Vec<u8>) {
        write_str(self, out)
    }
}

impl Encode for String {
    fn encode(&self, out: &mut Vec<u8>) {
        write_str(self, out)
    }
}

impl Encode for bool {
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(if *self { b"true" } else { b"false" });
    }
}

impl Encode for u64 {
    fn encode(&self, out: &mut Vec<u8>) {
        foldline_json::write_u64(*self, out)
    }
}

impl Encode for u32 {
    fn encode(&self, out: &mut Vec<u8>) {
        u64::from(*self).encode(out)
    }
}

impl Encode for usize {
    fn encode(&self, out: &mut Vec<u8>) {
        (*self as u64).encode(out)
    }
}

impl Encode for Value {
    fn encode(&self, out: &mut Vec<u8>) {
        foldline_json::write_value(self, out)
    }
}

impl<T: Encode + ?Sized> Encode for &T {
    fn encode(&self, out: &mut Vec<u8>) {
        (**self).encode(out)
    }
}

impl<T: Encode + ?Sized> Encode for Box<T> {
    fn encode(&self, out: &mut Vec<u8>) {
        (**self).encode(out)
    }
}

impl<T: Encode> Encode for Option<T> {
    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Some(v) => v.encode(out),
            None => out.extend_from_slice(b"null"),
        }
    }
}

impl<T: Encode> Encode for [T] {
    fn encode(&self, out: &mut Vec<u8>) {
        out.push(b'[');
        for (i, item) in self.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            item.encode(out);
        }
        out.push(b']');
    }
}

impl<T: Encode> Encode for Vec<T> {
    fn encode(&self, out: &mut Vec<u8>) {
        self.as_slice().encode(out)
    }
}

impl<T: Encode> Encode for std::collections::BTreeMap<String, T> {
    fn encode(&self, out: &mut Vec<u8>) {
        // A BTreeMap<String, _> iterates in byte order of its keys.
        let mut w = Members::open(out, None, None);
        for (k, v) in self {
            w.field(k, v);
        }
        w.close();
    }
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
        #[derive(foldline_derive::Encode)]
        struct Doc {
            id: String,
            k: u64,
        }
        let a = Doc {
            id: "x".into(),
            k: 1,
        };
        let b = Doc {
            id: "y".into(),
            k: 1,
        };
        assert_eq!(hash_without(&a, "id"), hash_without(&b, "id"));
        assert_eq!(hash_without(&a, "id"), hash(&json!({"k": 1})));
        assert_ne!(hash(&a), hash(&b));
        assert_eq!(encode(&a), br#"{"id":"x","k":1}"#);
    }

    #[test]
    fn fold_depends_on_order() {
        assert_ne!(fold_hashes(["a", "b"]), fold_hashes(["b", "a"]));
    }
}
