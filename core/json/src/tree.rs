//! The decoder's tree: what a request is parsed into before its types take
//! their fields out.
//!
//! Not serde_json's `Value`, whose objects are B-trees of owned keys: a
//! request of 2,000 messages made ~20,000 of them, each a node allocated,
//! every key copied, and every field taken out of one by a B-tree removal
//! (half the time of a large stateless `select`). Here an object is its
//! members in document order, in one vector, and a key or string without
//! escapes is borrowed from the request's bytes. Values the core keeps
//! opaque become serde_json's `Value` when a type takes them
//! ([`Tree::into_value`]).

use std::borrow::Cow;

use serde_json::{Map, Number, Value};

/// A parsed JSON value, borrowing unescaped text from the input.
#[derive(Debug, Clone, PartialEq)]
pub enum Tree<'a> {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number, as serde_json reads it.
    Number(Number),
    /// A string.
    String(Cow<'a, str>),
    /// An array.
    Array(Vec<Tree<'a>>),
    /// An object (no key twice).
    Object(Object<'a>),
}

/// An object's members in document order, each key once; taken out one by
/// one by name.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Object<'a>(Vec<(Cow<'a, str>, Tree<'a>)>);

/// Members past which an object checks for a repeated key in a sorted set
/// rather than by looking through the members (so a hostile object of many
/// members costs `n log n`, not `n²`).
const SCAN: usize = 16;

/// An object being parsed: its members so far lie on the parser's stack of
/// members from `base` on (a nested object's above them, taken off when it
/// ends, so each object's vector is allocated once, at its size), with the
/// set of its keys once it has more than [`SCAN`] (a map of serde_json's,
/// whose code the artifact has already, its values unused).
pub(crate) struct Building {
    base: usize,
    keys: Option<Map<String, Value>>,
}

/// Whether two keys are the same: their lengths, then their bytes compared
/// in place (keys are short; most pairs differ in length or first byte, and
/// a call to `memcmp` for each costs more than the comparison).
fn same_key(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).all(|(x, y)| x == y)
}

/// The parser's stack of members of the objects being parsed.
pub(crate) type Members<'a> = Vec<(Cow<'a, str>, Tree<'a>)>;

impl Building {
    /// An object whose members will lie on `stack` above what it holds now.
    pub(crate) fn on(stack: &Members<'_>) -> Building {
        Building {
            base: stack.len(),
            keys: None,
        }
    }

    /// Whether no member was added yet.
    pub(crate) fn is_empty(&self, stack: &Members<'_>) -> bool {
        stack.len() == self.base
    }

    /// Add a member; the key back when the object already has it.
    pub(crate) fn push<'a>(
        &mut self,
        stack: &mut Members<'a>,
        key: Cow<'a, str>,
        value: Tree<'a>,
    ) -> Result<(), Cow<'a, str>> {
        let repeated = match &mut self.keys {
            Some(keys) => keys.insert(key.to_string(), Value::Null).is_some(),
            None => stack[self.base..].iter().any(|(k, _)| same_key(k, &key)),
        };
        if repeated {
            return Err(key);
        }
        stack.push((key, value));
        if self.keys.is_none() && stack.len() - self.base > SCAN {
            let mut keys = Map::new();
            for (k, _) in &stack[self.base..] {
                keys.insert(k.to_string(), Value::Null);
            }
            self.keys = Some(keys);
        }
        Ok(())
    }

    /// The finished object, its members taken off the stack.
    pub(crate) fn finish<'a>(self, stack: &mut Members<'a>) -> Object<'a> {
        Object(stack.drain(self.base..).collect())
    }
}

impl<'a> Object<'a> {
    /// Take the member `key` out, if present.
    pub fn take(&mut self, key: &str) -> Option<Tree<'a>> {
        let i = self.0.iter().position(|(k, _)| same_key(k, key))?;
        Some(self.0.swap_remove(i).1)
    }

    /// The least key (by its UTF-8 bytes) of the members not taken yet: the
    /// one a refusal of unknown fields names, as it named the first key of
    /// a sorted map.
    pub fn first_key(&self) -> Option<&str> {
        self.0.iter().map(|(k, _)| k.as_ref()).min()
    }

    /// The members not taken yet (in document order while none was taken).
    pub fn into_members(self) -> impl Iterator<Item = (Cow<'a, str>, Tree<'a>)> {
        self.0.into_iter()
    }
}

impl Tree<'_> {
    /// The same value as serde_json's tree (what the core keeps of an
    /// opaque value).
    pub fn into_value(self) -> Value {
        match self {
            Tree::Null => Value::Null,
            Tree::Bool(b) => Value::Bool(b),
            Tree::Number(n) => Value::Number(n),
            Tree::String(s) => Value::String(s.into_owned()),
            Tree::Array(items) => Value::Array(items.into_iter().map(Tree::into_value).collect()),
            Tree::Object(members) => {
                // Inserted one by one: the map's own insert, not a second
                // (sorting, bulk-building) path in the artifact.
                let mut map = Map::new();
                for (k, v) in members.0 {
                    map.insert(k.into_owned(), v.into_value());
                }
                Value::Object(map)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_key_is_found_in_small_and_large_objects() {
        for n in [3, SCAN, SCAN + 1, 200] {
            // Below an outer object's members, as the parser stacks them.
            let mut stack = vec![(Cow::Borrowed("k0"), Tree::Null)];
            let mut o = Building::on(&stack);
            for i in 0..n {
                o.push(&mut stack, Cow::Owned(format!("k{i}")), Tree::Null)
                    .unwrap();
            }
            assert_eq!(
                o.push(&mut stack, Cow::Borrowed("k0"), Tree::Null),
                Err(Cow::Borrowed("k0"))
            );
            assert_eq!(
                o.push(&mut stack, Cow::Owned(format!("k{}", n - 1)), Tree::Null)
                    .map_err(|k| k.into_owned()),
                Err(format!("k{}", n - 1))
            );
            assert!(o.push(&mut stack, Cow::Borrowed("new"), Tree::Null).is_ok());
            assert_eq!(o.finish(&mut stack).into_members().count(), n + 1);
            // The outer object's key is not the inner one's.
            let mut inner = Building::on(&stack);
            assert!(inner
                .push(&mut stack, Cow::Borrowed("k0"), Tree::Null)
                .is_ok());
        }
    }

    #[test]
    fn members_come_out_by_name_and_the_least_key_is_named() {
        let mut stack = Vec::new();
        let mut o = Building::on(&stack);
        for k in ["zeta", "alpha", "mid"] {
            o.push(&mut stack, Cow::Borrowed(k), Tree::Bool(true))
                .unwrap();
        }
        let mut o = o.finish(&mut stack);
        assert!(stack.is_empty(), "the members taken off the stack");
        assert_eq!(o.first_key(), Some("alpha"));
        assert_eq!(o.take("alpha"), Some(Tree::Bool(true)));
        assert_eq!(o.take("alpha"), None);
        assert_eq!(o.first_key(), Some("mid"));
    }
}
