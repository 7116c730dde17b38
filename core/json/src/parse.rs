//! The request parser: JSON text (RFC 8259) into the decoder's [`Tree`], in
//! one pass over the bytes.
//!
//! It accepts exactly what `serde_json::from_slice` accepts and reports each
//! syntax error with serde_json's message, line and column (a differential
//! test holds it to serde_json on mutated documents), with one difference:
//! a key repeated in one object is an error (`duplicate field`), not
//! last-wins. Floats are read by serde_json's own number parser, so every
//! number is the value serde_json gives it.
//!
//! Why not serde_json's own parser: it is instantiated through serde's
//! visitor machinery for each use, and the artifact's size budget is spent
//! better on policy; this one is a small non-generic function set.

use std::borrow::Cow;
use std::fmt;

use serde_json::Number;

use crate::tree::{Building, Members, Tree};

/// Containers nested deeper than this are refused (serde_json's limit).
const MAX_DEPTH: u8 = 128;

/// A syntax error: serde_json's message, with the line and column (of
/// bytes, 1-based line, 0-based column before the first byte of a line) where the
/// parser stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    message: String,
    line: usize,
    column: usize,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at line {} column {}",
            self.message, self.line, self.column
        )
    }
}

impl std::error::Error for ParseError {}

const EOF_LIST: &str = "EOF while parsing a list";
const EOF_OBJECT: &str = "EOF while parsing an object";
const EOF_STRING: &str = "EOF while parsing a string";
const EOF_VALUE: &str = "EOF while parsing a value";
const EXPECTED_COLON: &str = "expected `:`";
const EXPECTED_LIST_END: &str = "expected `,` or `]`";
const EXPECTED_OBJECT_END: &str = "expected `,` or `}`";
const EXPECTED_IDENT: &str = "expected ident";
const EXPECTED_VALUE: &str = "expected value";
const INVALID_ESCAPE: &str = "invalid escape";
const INVALID_NUMBER: &str = "invalid number";
const OUT_OF_RANGE: &str = "number out of range";
const INVALID_CODE_POINT: &str = "invalid unicode code point";
const CONTROL: &str = "control character (\\u0000-\\u001F) found while parsing a string";
const KEY_NOT_STRING: &str = "key must be a string";
const LONE_SURROGATE: &str = "lone leading surrogate in hex escape";
const TRAILING_COMMA: &str = "trailing comma";
const TRAILING_CHARACTERS: &str = "trailing characters";
const HEX_ESCAPE_END: &str = "unexpected end of hex escape";
const DEPTH: &str = "recursion limit exceeded";

type Result<T> = std::result::Result<T, ParseError>;

/// Parse JSON bytes into a tree (duplicate keys refused).
///
/// # Errors
/// The first syntax error, as serde_json words and places it.
pub fn parse(input: &[u8]) -> Result<Tree<'_>> {
    let mut p = Parser {
        s: input,
        text: std::str::from_utf8(input).ok(),
        i: 0,
        depth: MAX_DEPTH,
        items: Vec::new(),
        members: Vec::new(),
    };
    let value = p.value()?;
    match p.whitespace() {
        Some(_) => Err(p.peek_error(TRAILING_CHARACTERS)),
        None => Ok(value),
    }
}

struct Parser<'a> {
    s: &'a [u8],
    /// The input as text when all of it is UTF-8 (checked once, in one
    /// pass): a string is then a slice of it, not checked again. Otherwise
    /// each string is checked as it is read, so the error is the first one
    /// a reader from the start meets, as serde_json reports it.
    text: Option<&'a str>,
    /// The next byte to read.
    i: usize,
    /// Containers that may still open.
    depth: u8,
    /// The elements of the arrays being parsed, innermost last: each array
    /// takes its own off when it ends, into a vector allocated once at its
    /// size (not grown element by element).
    items: Vec<Tree<'a>>,
    /// The members of the objects being parsed, likewise.
    members: Members<'a>,
}

impl<'a> Parser<'a> {
    /// An error placed at byte `i`.
    #[cold]
    fn at(&self, i: usize, message: impl Into<String>) -> ParseError {
        let before = &self.s[..i];
        let line_start = before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |n| n + 1);
        ParseError {
            message: message.into(),
            line: 1 + before[..line_start].iter().filter(|&&b| b == b'\n').count(),
            column: i - line_start,
        }
    }

    /// An error after the byte just read.
    fn error(&self, message: &str) -> ParseError {
        self.at(self.i, message)
    }

    /// An error at the byte just looked at (not read).
    fn peek_error(&self, message: &str) -> ParseError {
        self.at(self.s.len().min(self.i + 1), message)
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let b = self.peek()?;
        self.i += 1;
        Some(b)
    }

    /// Skip whitespace; the next byte, not read.
    fn whitespace(&mut self) -> Option<u8> {
        while let Some(b' ' | b'\n' | b'\t' | b'\r') = self.peek() {
            self.i += 1;
        }
        self.peek()
    }

    fn value(&mut self) -> Result<Tree<'a>> {
        let Some(b) = self.whitespace() else {
            return Err(self.peek_error(EOF_VALUE));
        };
        match b {
            b'n' => self.ident(b"null").map(|()| Tree::Null),
            b't' => self.ident(b"true").map(|()| Tree::Bool(true)),
            b'f' => self.ident(b"false").map(|()| Tree::Bool(false)),
            b'-' | b'0'..=b'9' => self.number().map(Tree::Number),
            b'"' => {
                self.i += 1;
                self.string().map(Tree::String)
            }
            b'[' | b'{' => {
                if self.depth == 1 {
                    return Err(self.peek_error(DEPTH));
                }
                self.depth -= 1;
                self.i += 1;
                let container = if b == b'[' {
                    self.array()
                } else {
                    self.object()
                };
                self.depth += 1;
                container
            }
            _ => Err(self.peek_error(EXPECTED_VALUE)),
        }
    }

    fn ident(&mut self, word: &[u8]) -> Result<()> {
        self.i += 1;
        for &expected in &word[1..] {
            match self.next() {
                None => return Err(self.error(EOF_VALUE)),
                Some(b) if b != expected => return Err(self.error(EXPECTED_IDENT)),
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// After `[`: the elements and the closing `]`.
    fn array(&mut self) -> Result<Tree<'a>> {
        let base = self.items.len();
        loop {
            let Some(b) = self.whitespace() else {
                return Err(self.peek_error(EOF_LIST));
            };
            if b == b']' {
                self.i += 1;
                return Ok(Tree::Array(self.items.drain(base..).collect()));
            }
            if self.items.len() > base {
                if b != b',' {
                    return Err(self.peek_error(EXPECTED_LIST_END));
                }
                self.i += 1;
                match self.whitespace() {
                    Some(b']') => return Err(self.peek_error(TRAILING_COMMA)),
                    Some(_) => {}
                    None => return Err(self.peek_error(EOF_VALUE)),
                }
            }
            let item = self.value()?;
            self.items.push(item);
        }
    }

    /// After `{`: the members and the closing `}`.
    fn object(&mut self) -> Result<Tree<'a>> {
        let mut map = Building::on(&self.members);
        loop {
            let Some(b) = self.whitespace() else {
                return Err(self.peek_error(EOF_OBJECT));
            };
            if b == b'}' {
                self.i += 1;
                return Ok(Tree::Object(map.finish(&mut self.members)));
            }
            if !map.is_empty(&self.members) {
                if b != b',' {
                    return Err(self.peek_error(EXPECTED_OBJECT_END));
                }
                self.i += 1;
                match self.whitespace() {
                    Some(b'"') => {}
                    Some(b'}') => return Err(self.peek_error(TRAILING_COMMA)),
                    Some(_) => return Err(self.peek_error(KEY_NOT_STRING)),
                    None => return Err(self.peek_error(EOF_VALUE)),
                }
            } else if b != b'"' {
                return Err(self.peek_error(KEY_NOT_STRING));
            }
            self.i += 1;
            let key = self.string()?;
            match self.whitespace() {
                Some(b':') => self.i += 1,
                Some(_) => return Err(self.peek_error(EXPECTED_COLON)),
                None => return Err(self.peek_error(EOF_OBJECT)),
            }
            let value = self.value()?;
            if let Err(key) = map.push(&mut self.members, key, value) {
                // serde_json places an error raised after a member at
                // the end of its object (the closing brace read, if it
                // is next).
                if self.whitespace() == Some(b'}') {
                    self.i += 1;
                }
                return Err(self.error(&format!("duplicate field `{key}`")));
            }
        }
    }

    /// Skip to the next quote, backslash or control character: eight bytes
    /// at a time (the first such byte in a word found from its mask), then
    /// byte by byte in the input's last seven bytes.
    fn plain_run(&mut self) {
        while let Some(chunk) = self.s.get(self.i..self.i + 8) {
            let mask = crate::escape_mask(u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8])));
            if mask != 0 {
                self.i += (mask.trailing_zeros() / 8) as usize;
                return;
            }
            self.i += 8;
        }
        self.i += self.s[self.i..]
            .iter()
            .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
            .unwrap_or(self.s.len() - self.i);
    }

    /// Text that is not UTF-8, `bad` bytes before the end of the string just read.
    #[cold]
    fn not_utf8(&self, bad: usize) -> ParseError {
        let mut error = self.error(INVALID_CODE_POINT);
        error.column = error.column.saturating_sub(bad);
        error
    }

    /// After the opening quote: the string's text and the closing quote;
    /// borrowed from the input when it has no escape (most keys and text).
    fn string(&mut self) -> Result<Cow<'a, str>> {
        let start = self.i;
        self.plain_run();
        if self.peek() == Some(b'"') {
            self.i += 1;
            // Quotes are ASCII: both ends are character boundaries.
            if let Some(text) = self.text.and_then(|t| t.get(start..self.i - 1)) {
                return Ok(Cow::Borrowed(text));
            }
            let s: &'a [u8] = self.s;
            let bytes = &s[start..self.i - 1];
            return std::str::from_utf8(bytes)
                .map(Cow::Borrowed)
                .map_err(|e| self.not_utf8(bytes.len() - e.valid_up_to()));
        }
        self.escaped_string(start).map(Cow::Owned)
    }

    /// [`Parser::string`] of a string with an escape (or an error), from
    /// its first byte at `start`, the plain run before it already skipped.
    fn escaped_string(&mut self, mut start: usize) -> Result<String> {
        let mut text = Vec::new();
        loop {
            self.plain_run();
            let Some(b) = self.next() else {
                return Err(self.error(EOF_STRING));
            };
            text.extend_from_slice(&self.s[start..self.i - 1]);
            match b {
                b'"' => break,
                b'\\' => self.escape(&mut text)?,
                _ => return Err(self.error(CONTROL)),
            }
            start = self.i;
        }
        String::from_utf8(text)
            .map_err(|e| self.not_utf8(e.as_bytes().len() - e.utf8_error().valid_up_to()))
    }

    /// After a backslash: one escape, its text appended.
    fn escape(&mut self, text: &mut Vec<u8>) -> Result<()> {
        let unescaped = match self.next() {
            None => return Err(self.error(EOF_STRING)),
            Some(b'"') => b'"',
            Some(b'\\') => b'\\',
            Some(b'/') => b'/',
            Some(b'b') => 0x08,
            Some(b'f') => 0x0c,
            Some(b'n') => b'\n',
            Some(b'r') => b'\r',
            Some(b't') => b'\t',
            Some(b'u') => return self.unicode_escape(text),
            Some(_) => return Err(self.error(INVALID_ESCAPE)),
        };
        text.push(unescaped);
        Ok(())
    }

    /// After `\u`: a character, or a surrogate pair as two escapes.
    fn unicode_escape(&mut self, text: &mut Vec<u8>) -> Result<()> {
        let high = self.hex4()?;
        let code = match high {
            0xDC00..=0xDFFF => return Err(self.error(LONE_SURROGATE)),
            0xD800..=0xDBFF => {
                for expected in [b'\\', b'u'] {
                    match self.next() {
                        None => return Err(self.error(EOF_STRING)),
                        Some(b) if b != expected => return Err(self.error(HEX_ESCAPE_END)),
                        Some(_) => {}
                    }
                }
                let low = self.hex4()?;
                if !(0xDC00..=0xDFFF).contains(&low) {
                    return Err(self.error(LONE_SURROGATE));
                }
                0x1_0000 + ((u32::from(high) - 0xD800) << 10 | (u32::from(low) - 0xDC00))
            }
            _ => u32::from(high),
        };
        let c = char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER);
        text.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
        Ok(())
    }

    fn hex4(&mut self) -> Result<u16> {
        let Some(digits) = self.s.get(self.i..self.i + 4) else {
            self.i = self.s.len();
            return Err(self.error(EOF_STRING));
        };
        self.i += 4;
        let mut n = 0u16;
        for &d in digits {
            let v = match d {
                b'0'..=b'9' => d - b'0',
                b'a'..=b'f' => d - b'a' + 10,
                b'A'..=b'F' => d - b'A' + 10,
                _ => return Err(self.error(INVALID_ESCAPE)),
            };
            n = n << 4 | u16::from(v);
        }
        Ok(n)
    }

    /// A number: an integer that fits (`u64`, or `i64` when negative) stays
    /// one; any other is an `f64`; beyond `f64`'s range is an error.
    fn number(&mut self) -> Result<Number> {
        let start = self.i;
        let negative = self.peek() == Some(b'-');
        if negative {
            self.i += 1;
        }
        let mut integer: Option<u64> = Some(0);
        let mut zero = true;
        match self.next() {
            None => return Err(self.error(EOF_VALUE)),
            Some(b'0') => {
                if let Some(b'0'..=b'9') = self.peek() {
                    return Err(self.peek_error(INVALID_NUMBER));
                }
            }
            Some(d @ b'1'..=b'9') => {
                zero = false;
                integer = Some(u64::from(d - b'0'));
                while let Some(d @ b'0'..=b'9') = self.peek() {
                    self.i += 1;
                    integer = integer
                        .and_then(|n| n.checked_mul(10))
                        .and_then(|n| n.checked_add(u64::from(d - b'0')));
                }
            }
            Some(_) => return Err(self.error(INVALID_NUMBER)),
        }
        let mut float = false;
        if self.peek() == Some(b'.') {
            float = true;
            self.i += 1;
            let digits = self.i;
            while let Some(d @ b'0'..=b'9') = self.peek() {
                zero &= d == b'0';
                self.i += 1;
            }
            if self.i == digits {
                let message = if self.peek().is_some() {
                    INVALID_NUMBER
                } else {
                    EOF_VALUE
                };
                return Err(self.peek_error(message));
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            float = true;
            self.i += 1;
            let positive = match self.peek() {
                Some(b'-') => {
                    self.i += 1;
                    false
                }
                Some(b'+') => {
                    self.i += 1;
                    true
                }
                _ => true,
            };
            match self.next() {
                None => return Err(self.error(EOF_VALUE)),
                Some(b'0'..=b'9') => {}
                Some(_) => return Err(self.error(INVALID_NUMBER)),
            }
            let mut exponent = i32::from(self.s[self.i - 1] - b'0');
            while let Some(d @ b'0'..=b'9') = self.peek() {
                self.i += 1;
                let d = i32::from(d - b'0');
                if exponent >= i32::MAX / 10 && (exponent > i32::MAX / 10 || d > i32::MAX % 10) {
                    // An exponent past i32: out of range, or zero (the
                    // lexeme below parses to a signed zero).
                    if positive && !zero {
                        return Err(self.error(OUT_OF_RANGE));
                    }
                    while let Some(b'0'..=b'9') = self.peek() {
                        self.i += 1;
                    }
                    break;
                }
                exponent = exponent * 10 + d;
            }
        }
        match (float, integer) {
            (false, Some(n)) if !negative => return Ok(Number::from(n)),
            (false, Some(n)) if n != 0 && n <= 1 << 63 => {
                return Ok(Number::from((n as i64).wrapping_neg()));
            }
            _ => {}
        }
        // A fraction, an exponent or an integer beyond 64 bits: serde_json's
        // own number parser reads the lexeme checked above, so a float is
        // the value serde_json has always given it.
        let text = std::str::from_utf8(&self.s[start..self.i]).unwrap_or("");
        text.parse::<Number>()
            .ok()
            .ok_or_else(|| self.error(OUT_OF_RANGE))
    }
}
