//! The parser is held to serde_json: on valid documents and on hundreds of
//! thousands of mutations of them, `foldline_json::parse` accepts exactly what
//! serde_json accepts (with duplicate keys refused, as through
//! `foldline_json::tree_from`), builds the same tree, and words and places
//! every error exactly as serde_json does.

use serde_json::Value;

/// serde_json's answer: its parser driving the duplicate-refusing tree.
fn serde_json_parse(input: &[u8]) -> Result<Value, String> {
    let mut de = serde_json::Deserializer::from_slice(input);
    let value = foldline_json::tree_from(&mut de).map_err(|e| e.to_string())?;
    de.end().map_err(|e| e.to_string())?;
    Ok(value.into_value())
}

fn check(input: &[u8]) {
    let ours = foldline_json::parse(input)
        .map(foldline_json::Tree::into_value)
        .map_err(|e| e.to_string());
    let theirs = serde_json_parse(input);
    assert!(
        ours == theirs,
        "input {:?}\n ours   {ours:?}\n theirs {theirs:?}",
        String::from_utf8_lossy(input)
    );
}

const DOCUMENTS: &[&str] = &[
    r#"{"a":1,"b":[true,false,null],"c":{"d":"e\"\\\/\b\f\n\r\t","f":-2}}"#,
    r#"  [ 0, -0, 1.5, -2.25e3, 1E+2, 3e-2, 0.1, 18446744073709551615, 18446744073709551616, -9223372036854775808, -9223372036854775809 ] "#,
    "{\"text\":\"h\u{e9}llo \u{1f600} \\u00e9\\u20ac\\ud83d\\ude00\",\n \"n\": 12\n}",
    r#"{"a":{"b":{"c":[[["deep"]]]}},"x":"y","a2":[{},[],"",0]}"#,
    r#"{"role":"user","content":"hi","seq":7,"turn":{"id":"t1","n":1}}"#,
    r#"{"dup":1,"dup":2}"#,
    "\"just a string\"",
    "123",
    "[1e400, 1e-400, 0e99999999999, 1e99999999999]",
    // Past the size where the parser keeps a set of an object's keys.
    r#"{"m0":0,"m1":1,"m2":2,"m3":3,"m4":4,"m5":5,"m6":6,"m7":7,"m8":8,"m9":9,"m10":10,"m11":11,"m12":12,"m13":13,"m14":14,"m15":15,"m16":16,"m17":17,"m18":{"x":"\u00e9\n"},"m19":[1,"two"]}"#,
];

const ALPHABET: &[u8] = b"{}[]\",:\\u0123456789eE.-+ntrufalsx \n\t\rdD\x01\x1f\xc3\xa9\xff\xe2\x82";

fn mutate(rng: &mut fastrand::Rng, doc: &mut Vec<u8>) {
    for _ in 0..1 + rng.usize(..3) {
        let at = rng.usize(..doc.len() + 1);
        match rng.usize(..5) {
            0 => doc.insert(at, ALPHABET[rng.usize(..ALPHABET.len())]),
            1 if at < doc.len() => {
                doc.remove(at);
            }
            2 if at < doc.len() => doc[at] = ALPHABET[rng.usize(..ALPHABET.len())],
            3 => doc.truncate(at),
            _ => {
                let end = (at + rng.usize(..8)).min(doc.len());
                let piece = doc[at..end].to_vec();
                doc.splice(at..at, piece);
            }
        }
    }
}

#[test]
fn documents_parse_as_serde_json_parses_them() {
    for doc in DOCUMENTS {
        check(doc.as_bytes());
    }
    check(b"");
    check(b"   ");
    check(b"\xef\xbb\xbf{}");
    check("[".repeat(127).as_bytes());
    check(format!("{}{}", "[".repeat(127), "]".repeat(127)).as_bytes());
    check("[".repeat(200).as_bytes());
    check(format!("{}1{}", "{\"a\":".repeat(130), "}".repeat(130)).as_bytes());
    check(br#""\ud800""#);
    check(br#""\ud800\u0041""#);
    check(br#""\udc00""#);
    check(br#""\ud800x""#);
    check(br#""\ud800\x""#);
    check(b"\"\\u12\"");
    check(b"\"a\xffb\"");
    check(b"\"\xe2\x82\"");
    check(b"{\"a\":1,\n\"b\":2,\n\"a\":3\n}");
}

#[test]
fn mutated_documents_parse_and_fail_as_serde_json_does() {
    let cases: usize = std::env::var("FOLDLINE_PARSE_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(200_000);
    // Seeded: the same 200,000 documents on every run.
    let mut rng = fastrand::Rng::with_seed(0x5eed);
    for i in 0..cases {
        let mut doc = DOCUMENTS[i % DOCUMENTS.len()].as_bytes().to_vec();
        mutate(&mut rng, &mut doc);
        check(&doc);
    }
}

/// Objects past the size where the parser keeps a set of their keys: a key
/// repeated anywhere (also spelled with an escape) is refused with
/// serde_json's words and place, and a large object without one parses to
/// the same tree.
#[test]
fn large_objects_refuse_a_repeated_key_as_serde_json_does() {
    for n in [15, 16, 17, 40, 300] {
        let members: Vec<String> = (0..n).map(|i| format!("\"k{i}\":{i}")).collect();
        check(format!("{{{}}}", members.join(",")).as_bytes());
        for dup in [0, n / 2, n - 1] {
            let mut with = members.clone();
            with.push(format!("\"k{dup}\":true"));
            check(format!("{{{}}}", with.join(",")).as_bytes());
            with.pop();
            with.insert(n / 3, format!("\"k{dup}\":null"));
            check(format!("{{\n{}\n}}", with.join(",\n")).as_bytes());
        }
        let mut escaped = members.clone();
        escaped.push("\"\\u006b0\":1".to_string());
        check(format!("{{{}}}", escaped.join(",")).as_bytes());
    }
}
