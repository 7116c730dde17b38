//! JSON text written again as JavaScript writes it: what
//! `JSON.stringify(JSON.parse(text))` gives, so a tool call's object input
//! (an Anthropic `tool_use`, an AI SDK `tool-call`) or an AI SDK result's
//! JSON value is stored with the same bytes by this host and by the JS
//! package (`inputText` in js/src/convert.ts).
//!
//! What differs from serde_json's `Value` (whose keys this workspace keeps
//! sorted) is JavaScript's object order: integer-like keys (`"0"`,
//! `"17"`, below 2³² − 1) first in ascending order, then the other keys in
//! the order they were first written, a repeated key taking its last value
//! in its first place. Numbers are read exactly (`str::parse`) and written
//! by ECMAScript's Number::toString (`ryu-js`); strings escape `"`, `\` and
//! the control characters as `JSON.stringify` does, and nothing else.

use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use crate::error::{HostError, Result};

/// An object's members in the order they were written.
struct Members<'a>(Vec<(String, &'a RawValue)>);

impl<'de: 'a, 'a> serde::Deserialize<'de> for Members<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct Each<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for Each<'a> {
            type Value = Members<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<M: MapAccess<'de>>(
                self,
                mut m: M,
            ) -> std::result::Result<Members<'a>, M::Error> {
                let mut out = Vec::new();
                while let Some(entry) = m.next_entry::<String, &'a RawValue>()? {
                    out.push(entry);
                }
                Ok(Members(out))
            }
        }
        d.deserialize_map(Each(std::marker::PhantomData))
    }
}

fn broken(e: serde_json::Error) -> HostError {
    HostError::Input(format!("broken JSON: {e}"))
}

/// The members of the object `raw`, as JavaScript orders an object's
/// properties: integer-like keys ascending, then the rest as first written,
/// each repeated key once with its last value.
fn members(raw: &RawValue) -> Result<Vec<(String, &RawValue)>> {
    let Members(written) = serde_json::from_str(raw.get()).map_err(broken)?;
    let mut out: Vec<(String, &RawValue)> = Vec::with_capacity(written.len());
    // Where each key first stood (a map, so an object of many keys costs
    // n log n, not n²).
    let mut first: std::collections::BTreeMap<String, usize> = Default::default();
    for (key, value) in written {
        match first.get(&key) {
            Some(&at) => out[at].1 = value,
            None => {
                first.insert(key.clone(), out.len());
                out.push((key, value));
            }
        }
    }
    // A stable sort keeps the other keys in their written order.
    out.sort_by_key(|(k, _)| index(k).map_or((1, 0), |i| (0, i)));
    Ok(out)
}

/// The array index a key names, as JavaScript reads one: a canonical
/// decimal below 2³² − 1.
fn index(key: &str) -> Option<u32> {
    let canonical =
        key == "0" || (!key.starts_with('0') && key.bytes().all(|b| b.is_ascii_digit()));
    key.parse::<u32>()
        .ok()
        .filter(|i| canonical && *i < u32::MAX)
}

/// The member `key` of the object `raw` (its last value, as JavaScript
/// reads a repeated key); `None` when `raw` is not an object or lacks it.
pub(super) fn member<'a>(raw: &'a RawValue, key: &str) -> Option<&'a RawValue> {
    if !raw.get().starts_with('{') {
        return None;
    }
    let Members(written) = serde_json::from_str(raw.get()).ok()?;
    written
        .into_iter()
        .rev()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v)
}

/// The elements of the array `raw` (none when it is not an array).
pub(super) fn elements(raw: &RawValue) -> Vec<&RawValue> {
    if !raw.get().starts_with('[') {
        return Vec::new();
    }
    serde_json::from_str(raw.get()).unwrap_or_default()
}

/// A value as text, as js/src/convert.ts takes a tool's input or output:
/// a string as it is, absent or `null` as `otherwise`, anything else
/// [`stringify`]d.
///
/// # Errors
/// As [`stringify`].
pub(super) fn text_or(raw: Option<&RawValue>, otherwise: &str) -> Result<String> {
    match raw {
        None => Ok(otherwise.to_owned()),
        Some(r) if r.get() == "null" => Ok(otherwise.to_owned()),
        Some(r) if r.get().starts_with('"') => serde_json::from_str(r.get()).map_err(broken),
        Some(r) => stringify(r),
    }
}

/// `JSON.stringify(JSON.parse(raw))`.
///
/// # Errors
/// `invalid_input` if `raw` is not JSON (it always is when it came from
/// a parsed document).
pub(super) fn stringify(raw: &RawValue) -> Result<String> {
    let mut out = String::with_capacity(raw.get().len());
    write(raw, &mut out)?;
    Ok(out)
}

fn write(raw: &RawValue, out: &mut String) -> Result<()> {
    let text = raw.get();
    match text.as_bytes().first() {
        Some(b'{') => {
            out.push('{');
            for (i, (key, value)) in members(raw)?.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                string(&key, out);
                out.push(':');
                write(value, out)?;
            }
            out.push('}');
        }
        Some(b'[') => {
            let items: Vec<&RawValue> = serde_json::from_str(text).map_err(broken)?;
            out.push('[');
            for (i, item) in items.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(item, out)?;
            }
            out.push(']');
        }
        Some(b'"') => string(&serde_json::from_str::<String>(text).map_err(broken)?, out),
        Some(b't' | b'f' | b'n') => out.push_str(text),
        _ => {
            let n: f64 = text
                .parse()
                .map_err(|_| HostError::Input(format!("broken JSON: not a number: {text}")))?;
            // Past the largest double JavaScript reads Infinity, which
            // `JSON.stringify` writes as null.
            if n.is_finite() {
                out.push_str(ryu_js::Buffer::new().format(n));
            } else {
                out.push_str("null");
            }
        }
    }
    Ok(())
}

/// A string as `JSON.stringify` quotes it: `"` and `\` escaped, the
/// control characters as `\b \t \n \f \r` or `\u00xx`, nothing else.
fn string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            c if c < ' ' => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn again(text: &str) -> String {
        let raw: &RawValue = serde_json::from_str(text).unwrap();
        stringify(raw).unwrap()
    }

    /// Each expectation is what Node's `JSON.stringify(JSON.parse(text))`
    /// prints.
    #[test]
    fn writes_as_javascript_does() {
        assert_eq!(
            again(r#" { "b" : 1 , "a" : [ 2 , { } ] } "#),
            r#"{"b":1,"a":[2,{}]}"#
        );
        assert_eq!(
            again(r#"{"b":1,"10":0,"2":0,"a":2,"b":3,"01":4,"4294967295":5}"#),
            r#"{"2":0,"10":0,"b":3,"a":2,"01":4,"4294967295":5}"#
        );
        assert_eq!(
            again("[1.0,-0,1e21,1E20,0.1e-6,12345678901234567890,2.50,1e400]"),
            "[1,0,1e+21,100000000000000000000,1e-7,12345678901234567000,2.5,null]"
        );
        assert_eq!(
            again(r#""\u0041\/\u00e9\u2028\u0001\u001f\u007f\b\f""#),
            "\"A/é\u{2028}\\u0001\\u001f\u{7f}\\b\\f\""
        );
        assert_eq!(again("[true,false,null]"), "[true,false,null]");
    }

    #[test]
    fn reads_a_member_and_an_element_as_javascript_does() {
        let raw: &RawValue = serde_json::from_str(r#"{"a":1,"x":[3,{"k":"v"}],"a":2}"#).unwrap();
        assert_eq!(member(raw, "a").unwrap().get(), "2");
        let x = member(raw, "x").unwrap();
        assert_eq!(stringify(elements(x)[1]).unwrap(), r#"{"k":"v"}"#);
        assert!(elements(raw).is_empty() && member(x, "a").is_none());
    }
}
