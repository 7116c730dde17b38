//! `validate` of a settle request on its bytes (the packet's id checked over
//! the bytes as received) answers exactly as decoding the request does, and
//! only answers for a packet sent as the core wrote it.
mod common;

use common::*;
use foldline_core::api;
use foldline_core::canonical;
use foldline_core::packet::Packet;
use foldline_core::validate::{validate, ValidateRequest};
use serde_json::{json, Value};

/// What `validate` answers after decoding the whole request.
fn plain(input: &[u8]) -> Vec<u8> {
    api::envelope(api::parse(input).and_then(|r: ValidateRequest| validate(&r)))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A settle request with the packet as the core wrote it.
fn request(packet: &[u8], output: &Value) -> Vec<u8> {
    format!(
        r#"{{"kind":"settle","packet":{},"output":{output},"expectedRunId":"run-x"}}"#,
        text(packet)
    )
    .into_bytes()
}

fn output(p: &Packet, summary: &str) -> Value {
    serde_json::to_value(output_for(p, "run-x", summary)).unwrap()
}

/// Packets of a first link, of later links, and one with an amendment.
fn packets() -> Vec<Packet> {
    let mut s = three_links();
    let first = s.boundaries()[0].input.turns[2].turn_id.clone();
    s.events.push(correction(&first, 1, "CORRECTED FACT"));
    s.say(12, 1_000);
    s.step();
    let amended = s.packets.last().unwrap();
    assert!(
        amended.amendment.is_some(),
        "the last packet carries an amendment"
    );
    assert!(s.packets[1].previous.is_some());
    s.packets
}

#[test]
fn a_packet_as_written_settles_on_its_bytes_as_decoding_it_does() {
    for p in packets() {
        let bytes = canonical::encode(&p);
        let req = request(&bytes, &output(&p, "A summary of the frozen turns."));
        let fast = api::settle_as_written(&req).expect("settled on the bytes");
        assert_eq!(text(&fast), text(&plain(&req)));
        assert!(
            text(&fast).starts_with(r#"{"ok":{"boundary":"#),
            "{}",
            text(&fast)
        );
        assert_eq!(api::call("validate", &req), fast);
        // Any order of the request's own members, whitespace between them.
        let out = output(&p, "A summary of the frozen turns.");
        let reordered = format!(
            "{{ \"output\" : {out} ,\n\"packet\":{},\"kind\":\"settle\" }}",
            text(&bytes)
        );
        assert_eq!(
            api::settle_as_written(reordered.as_bytes()).map(|b| text(&b)),
            Some(text(&plain(reordered.as_bytes())))
        );
    }
}

#[test]
fn any_other_request_is_decoded_and_answers_the_same() {
    let p = packets().remove(1);
    let bytes = canonical::encode(&p);
    let ok = output(&p, "A summary.");
    let value = serde_json::to_value(&p).unwrap();
    let s = text(&bytes);
    let mut tampered = value.clone();
    tampered["messages"][1]["content"] = json!("something else");
    let mut other_id = value.clone();
    other_id["id"] = json!(format!("sha256:{}", "0".repeat(64)));
    let cases: Vec<(&str, Vec<u8>)> = vec![
        // The packet intact but not as the core wrote it.
        (
            "pretty packet",
            request(
                serde_json::to_string_pretty(&value).unwrap().as_bytes(),
                &ok,
            ),
        ),
        (
            "declaration order",
            request(serde_json::to_string(&p).unwrap().as_bytes(), &ok),
        ),
        (
            "escaped key",
            format!(r#"{{"kind":"settle","pack\u0065t":{s},"output":{ok}}}"#).into_bytes(),
        ),
        // The packet changed, or its id.
        ("tampered", request(tampered.to_string().as_bytes(), &ok)),
        ("other id", request(other_id.to_string().as_bytes(), &ok)),
        // The request is not a good settle request.
        (
            "repeated kind",
            format!(r#"{{"kind":"settle","kind":"settle","packet":{s},"output":{ok}}}"#)
                .into_bytes(),
        ),
        (
            "extra member",
            format!(r#"{{"kind":"settle","packet":{s},"output":{ok},"x":1}}"#).into_bytes(),
        ),
        (
            "other kind",
            format!(r#"{{"kind":"resolve","packet":{s},"output":{ok}}}"#).into_bytes(),
        ),
        (
            "no output",
            format!(r#"{{"kind":"settle","packet":{s}}}"#).into_bytes(),
        ),
        (
            "output with an unknown field",
            format!(r#"{{"kind":"settle","packet":{s},"output":{{"x":1}}}}"#).into_bytes(),
        ),
        (
            "output not JSON",
            format!(r#"{{"kind":"settle","packet":{s},"output":{{"runId":}}}}"#).into_bytes(),
        ),
        // Settling fails: the plain path words the error.
        ("empty summary", request(&bytes, &output(&p, "  "))),
        ("another run", {
            let mut o = ok.clone();
            o["runId"] = json!("run-y");
            request(&bytes, &o)
        }),
        ("cut off", {
            let mut o = ok.clone();
            o["finishReason"] = json!("length");
            request(&bytes, &o)
        }),
    ];
    for (name, req) in cases {
        assert_eq!(api::settle_as_written(&req), None, "{name}");
        assert_eq!(
            text(&api::call("validate", &req)),
            text(&plain(&req)),
            "{name}"
        );
    }
}

#[test]
fn every_single_byte_mutation_answers_as_decoding_does() {
    let mut s = Sim::new(chars_decl(4_000, 1_100));
    s.say(24, 180);
    let o = s.step();
    let p = s.packets.last().unwrap_or_else(|| panic!("{o:?}")).clone();
    let packet = canonical::encode(&p);
    let req = request(&packet, &output(&p, "Short."));
    assert!(api::settle_as_written(&req).is_some());
    // Where the packet's bytes lie in the request (`request` writes it
    // after `{"kind":"settle","packet":`).
    let at = r#"{"kind":"settle","packet":"#.len();
    assert_eq!(&req[at..at + packet.len()], &packet[..]);
    let mut engaged = 0;
    for i in 0..req.len() {
        for b in [
            None,
            Some(b'"'),
            Some(b'\\'),
            Some(b'}'),
            Some(b' '),
            Some(b'1'),
        ] {
            let mut m = req.clone();
            match b {
                None => {
                    m.remove(i);
                }
                Some(b) => m[i] = b,
            }
            let fast = api::settle_as_written(&m).is_some();
            assert!(
                !(fast && m != req && (at..at + packet.len()).contains(&i)),
                "byte {i} -> {b:?}: a changed packet settled on its bytes"
            );
            engaged += usize::from(fast);
            assert_eq!(
                text(&api::call("validate", &m)),
                text(&plain(&m)),
                "byte {i} -> {b:?}"
            );
        }
    }
    // Changes outside the packet (the model's summary) still engage it;
    // no change inside the packet does (asserted above).
    assert!(engaged > 0);
}
