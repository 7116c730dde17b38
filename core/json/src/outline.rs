//! The outline of a JSON text: where each object member lies, down to a
//! depth, found in one pass without building any value.
//!
//! Strings are skipped, not decoded or checked, and scalars are taken as
//! whatever runs up to the next delimiter: the outline only says where
//! things are. It is for bytes that are checked another way — a hash over
//! them, or a real [`crate::parse`] of a member's value — so a text that is
//! not JSON either has no outline or fails that check.

use std::ops::Range;

/// Containers nested deeper than this have no outline (the parser's limit).
const MAX_NESTING: usize = 128;

/// One object member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// The member whose value holds this member's object; `None` for the
    /// top-level object.
    pub parent: Option<usize>,
    /// The key's bytes between its quotes (escapes not decoded).
    pub key: Range<usize>,
    /// The value's bytes.
    pub value: Range<usize>,
}

/// The members of the top-level object and of the objects that are member
/// values down to `depth` levels (1: the top level only), in text order;
/// objects inside arrays are not outlined. `accept(level, key)` is asked
/// about each key before its value is scanned (level 0 is the top level);
/// `false` ends the scan with `None`, so a text that is not the one wanted
/// costs no more than its first unwanted key.
///
/// `None` when the text is not one object, its structure is broken, or it
/// nests deeper than 128 containers.
pub fn outline(
    text: &[u8],
    depth: usize,
    accept: &mut dyn FnMut(usize, &[u8]) -> bool,
) -> Option<Vec<Member>> {
    let mut scan = Scan {
        s: text,
        i: 0,
        depth,
        nesting: 0,
        members: Vec::new(),
        accept,
    };
    scan.whitespace();
    if scan.s.get(scan.i) != Some(&b'{') {
        return None;
    }
    scan.object(0, None)?;
    scan.whitespace();
    (scan.i == text.len()).then_some(scan.members)
}

struct Scan<'a, 'f> {
    s: &'a [u8],
    i: usize,
    depth: usize,
    nesting: usize,
    members: Vec<Member>,
    accept: &'f mut dyn FnMut(usize, &[u8]) -> bool,
}

impl Scan<'_, '_> {
    fn whitespace(&mut self) {
        while let Some(b' ' | b'\n' | b'\t' | b'\r') = self.s.get(self.i) {
            self.i += 1;
        }
    }

    /// Read `b`, after any whitespace.
    fn expect(&mut self, b: u8) -> Option<()> {
        self.whitespace();
        (self.s.get(self.i) == Some(&b)).then(|| self.i += 1)
    }

    /// A value at `level`, the member `parent` holding it.
    fn value(&mut self, level: usize, parent: Option<usize>) -> Option<()> {
        self.whitespace();
        match *self.s.get(self.i)? {
            b'"' => self.string(),
            b'{' => self.object(level, parent),
            b'[' => self.array(),
            _ => {
                let rest = &self.s[self.i..];
                let n = rest
                    .iter()
                    .position(|b| matches!(b, b',' | b'}' | b']' | b' ' | b'\n' | b'\t' | b'\r'))
                    .unwrap_or(rest.len());
                self.i += n;
                (n > 0).then_some(())
            }
        }
    }

    /// At the opening quote: past the closing one.
    fn string(&mut self) -> Option<()> {
        self.i += 1;
        loop {
            self.i += memchr::memchr2(b'"', b'\\', self.s.get(self.i..)?)?;
            match *self.s.get(self.i)? {
                b'"' => {
                    self.i += 1;
                    return Some(());
                }
                b'\\' => self.i += 2,
                _ => self.i += 1,
            }
        }
    }

    /// At `{` or `[`: past the matching `close`, each item (a member, an
    /// element) read by `item`.
    fn container(
        &mut self,
        close: u8,
        item: &mut dyn FnMut(&mut Self) -> Option<()>,
    ) -> Option<()> {
        self.nesting += 1;
        self.i += 1;
        if self.nesting > MAX_NESTING {
            return None;
        }
        self.whitespace();
        if self.s.get(self.i) != Some(&close) {
            loop {
                item(self)?;
                self.whitespace();
                match *self.s.get(self.i)? {
                    b',' => self.i += 1,
                    b if b == close => break,
                    _ => return None,
                }
            }
        }
        self.i += 1;
        self.nesting -= 1;
        Some(())
    }

    /// At `{`: past the matching `}`, its members outlined when `level` is
    /// above the depth.
    fn object(&mut self, level: usize, parent: Option<usize>) -> Option<()> {
        self.container(b'}', &mut |scan| scan.member(level, parent))
    }

    /// At `[`: past the matching `]` (nothing inside is outlined).
    fn array(&mut self) -> Option<()> {
        let below = self.depth;
        self.container(b']', &mut |scan| scan.value(below, None))
    }

    /// One member of an object at `level`.
    fn member(&mut self, level: usize, parent: Option<usize>) -> Option<()> {
        self.whitespace();
        if self.s.get(self.i) != Some(&b'"') {
            return None;
        }
        let key_start = self.i + 1;
        self.string()?;
        let key = key_start..self.i - 1;
        self.expect(b':')?;
        self.whitespace();
        if level >= self.depth {
            return self.value(level + 1, None);
        }
        if !(self.accept)(level, &self.s[key.clone()]) {
            return None;
        }
        let at = self.members.len();
        let start = self.i;
        self.members.push(Member {
            parent,
            key,
            value: start..start,
        });
        self.value(level + 1, Some(at))?;
        self.members[at].value.end = self.i;
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(text: &str, depth: usize) -> Option<Vec<(Option<usize>, String, String)>> {
        let members = outline(text.as_bytes(), depth, &mut |_, _| true)?;
        Some(
            members
                .into_iter()
                .map(|m| (m.parent, text[m.key].to_owned(), text[m.value].to_owned()))
                .collect(),
        )
    }

    #[test]
    fn members_with_their_values_down_to_the_depth() {
        let text = r#" { "a" : [1, {"x": 2}] , "b":{"c":{"d":"}\"]"},"e":true} } "#;
        let got = keys(text, 2).unwrap();
        let want = [
            (None, "a", r#"[1, {"x": 2}]"#),
            (None, "b", r#"{"c":{"d":"}\"]"},"e":true}"#),
            (Some(1), "c", r#"{"d":"}\"]"}"#),
            (Some(1), "e", "true"),
        ];
        assert_eq!(got.len(), want.len(), "{got:?}");
        for (g, w) in got.iter().zip(want) {
            assert_eq!((g.0, g.1.as_str(), g.2.as_str()), w);
        }
        // Depth 1: the top level only.
        assert_eq!(keys(text, 1).unwrap().len(), 2);
    }

    #[test]
    fn broken_structure_has_no_outline() {
        for text in [
            "",
            "[]",
            "{",
            r#"{"a":1"#,
            r#"{"a" 1}"#,
            r#"{"a":}"#,
            r#"{"a":1,}x"#,
            r#"{"a":1} x"#,
            r#"{"a":[1,2}"#,
            r#"{"a":"unterminated}"#,
            r#"{1:2}"#,
        ] {
            assert_eq!(keys(text, 3), None, "{text}");
        }
        let deep = format!("{{\"a\":{}{}}}", "[".repeat(200), "]".repeat(200));
        assert_eq!(keys(&deep, 1), None);
    }

    #[test]
    fn an_unwanted_key_ends_the_scan() {
        let mut seen = Vec::new();
        let got = outline(br#"{"kind":"x","events":[1,2,3],"z":1}"#, 1, &mut |_, k| {
            seen.push(k.to_vec());
            k != b"events"
        });
        assert_eq!(got, None);
        assert_eq!(seen, [b"kind".to_vec(), b"events".to_vec()]);
    }
}
