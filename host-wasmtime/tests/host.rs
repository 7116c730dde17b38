//! Integration tests of the wasmtime host on real SQLite files.

mod support;

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;
use support::fixtures::{budget_decl, demo_events, small_decl};

use foldline_core::declaration::{Budget, Declaration};
use foldline_wasmtime::builder::DriverBuilder;
use foldline_wasmtime::driver::{ContextOptions, Driver, Outcome};
use foldline_wasmtime::import::Incoming;
use foldline_wasmtime::journal::{Journal, SqliteJournal};
use foldline_wasmtime::model::{Extractive, OpenAiModel, OpenAiOptions, OpenAiResponsesModel};
use foldline_wasmtime::runtime::{Bound, Foldline, Limits, EMBEDDED_WASM, MEMORY_RESET_BYTES};
use foldline_wasmtime::{import, HostError};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_foldline"))
}

/// The program on the journal at `db`.
fn on_journal(db: &std::path::Path) -> Command {
    let mut c = bin();
    c.arg("--journal").arg(db);
    c
}

/// The program run by `c`, asserted to have succeeded: its output.
fn succeeded(c: &mut Command) -> std::process::Output {
    let out = c.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    out
}

/// The events of the program's default conversation in the SQLite file `db`.
fn stored_default(db: &std::path::Path) -> Vec<foldline_wasmtime::journal::StoredEvent> {
    SqliteJournal::open(db)
        .unwrap()
        .read_events("default", 0)
        .unwrap()
}

/// A driver over a SQLite file with the offline extractive summarizer.
fn sqlite_driver(db: &std::path::Path, decl: Declaration) -> Driver<SqliteJournal, Extractive> {
    Driver::new(
        Foldline::embedded().unwrap(),
        SqliteJournal::open(db).unwrap(),
        Extractive,
        decl,
    )
}

fn write_conversation(dir: &std::path::Path, turns: usize) -> std::path::PathBuf {
    let p = dir.join("conv.jsonl");
    let text: String = import::demo_conversation(turns)
        .iter()
        .map(|m| format!("{m}\n"))
        .collect();
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn import_compact_context_verify_through_the_program() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("j.db");
    let file = write_conversation(dir.path(), 300);
    let run = |args: &[&str]| {
        let out = bin().arg("--journal").arg(&db).args(args).output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, out, err) = run(&["import", file.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("imported"), "{out}");
    let (code, out, _) = run(&["verify"]);
    assert_eq!(code, Some(0));
    assert!(out.starts_with("intact: "), "{out}");
    assert!(
        !out.contains("no boundary"),
        "the default 80,000 trigger was reached: {out}"
    );
    let (code, out, _) = run(&["context", "--format", "openai"]);
    assert_eq!(code, Some(0));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(
        v["messages"][1]["content"]
            .as_str()
            .unwrap()
            .starts_with("[untrusted-history-summary]"),
        "{}",
        v["messages"][1]
    );
    // `--format` is read as the core reads a format: `ai-sdk` is `aiSdk`.
    let (_, dashed, _) = run(&["context", "--format", "ai-sdk", "--messages"]);
    let (_, camel, _) = run(&["context", "--format", "aiSdk", "--messages"]);
    let messages: serde_json::Value = serde_json::from_str(&dashed).unwrap();
    assert!(messages.as_array().is_some_and(|m| m.len() > 1) && dashed == camel);
    let (code, _, err) = run(&["context", "--format", "xml"]);
    assert!(code != Some(0) && err.contains("invalid_request"), "{err}");
    let (code, out, _) = run(&["timeline"]);
    assert_eq!(code, Some(0));
    assert!(out.contains("──── automatic compaction"), "{out}");
    let (code, out, _) = run(&["compact"]);
    assert!(
        code == Some(0) || out.contains("refused: nothing_to_fold"),
        "{out}"
    );
    let (_, out, _) = run(&["--version"]);
    assert!(
        out.contains(&format!(
            "artifact {}",
            Foldline::embedded().unwrap().sha256()
        )),
        "{out}"
    );
}

#[test]
fn a_later_run_loads_the_compiled_artifact_from_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("j.db");
    let cache = dir.path().join("cache");
    let file = write_conversation(dir.path(), 40);
    let run = |cache: &str, args: &[&str]| {
        let out = bin()
            .arg("--journal")
            .arg(&db)
            .args(["--compile-cache", cache])
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, _, err) = run("off", &["import", file.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    assert!(!cache.exists(), "`off` writes no cache");
    let (_, compiled, _) = run("off", &["context", "--format", "openai"]);
    // The cache holds one entry per artifact and engine setting; a later run
    // reads it (the entry is not written again) and answers the same.
    let at = cache.to_str().unwrap();
    let entries = || -> Vec<std::path::PathBuf> {
        let mut found = Vec::new();
        let mut dirs = vec![cache.clone()];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    dirs.push(p);
                } else if p.extension().is_none() {
                    found.push(p);
                }
            }
        }
        found
    };
    let (code, first, err) = run(at, &["context", "--format", "openai"]);
    assert_eq!((code, &first), (Some(0), &compiled), "{err}");
    let [entry] = &entries()[..] else {
        panic!("one cache entry: {:?}", entries())
    };
    let written = std::fs::read(entry).unwrap();
    let modified = std::fs::metadata(entry).unwrap().modified().unwrap();
    let (_, second, _) = run(at, &["context", "--format", "openai"]);
    assert_eq!(second, compiled);
    assert_eq!(entries(), std::slice::from_ref(entry));
    assert_eq!(
        std::fs::metadata(entry).unwrap().modified().unwrap(),
        modified
    );
    // A damaged entry is compiled again and replaced, never run.
    std::fs::write(entry, &written[..written.len() / 3]).unwrap();
    let (code, third, err) = run(at, &["context", "--format", "openai"]);
    assert_eq!((code, &third), (Some(0), &compiled), "{err}");
    assert_eq!(std::fs::read(entry).unwrap(), written);
    // A directory the cache cannot use is named, by its code.
    let (code, _, err) = run("relative/dir", &["context"]);
    assert!(
        code == Some(2) && err.contains("load_failed") && err.contains("compile cache"),
        "{err}"
    );
}

#[test]
fn bad_input_names_the_place_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("j.db");
    let cases = [
        (
            "roles.jsonl",
            "{\"role\":\"user\",\"content\":\"hi\"}\n{\"role\":\"wizard\",\"content\":\"x\"}\n",
            "line 2: unknown role \"wizard\"",
        ),
        (
            "broken.jsonl",
            "{\"role\":\"user\",\"content\":\"hi\"}\n{\"role\":\n",
            "broken JSON on line 2",
        ),
        (
            "array.json",
            "[{\"role\":\"user\",\"content\":\"a\"},{\"content\":\"b\"}]",
            "item 2: a message needs a role",
        ),
    ];
    for (name, text, expect) in cases {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        let out = bin()
            .arg("--journal")
            .arg(&db)
            .arg("import")
            .arg(&p)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(expect), "{err}");
    }
    let out = bin()
        .arg("--journal")
        .arg(&db)
        .args(["import", "/nonexistent/file.jsonl"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/file.jsonl"));
    let j = SqliteJournal::open(&db).unwrap();
    assert!(
        j.read_events("default", 0).unwrap().is_empty(),
        "nothing half-written"
    );
}

/// `foldline import -` reads the conversation from stdin, as the raw calls
/// read their requests: `cat chat.jsonl | foldline import -`.
#[test]
fn an_import_reads_stdin_given_a_dash() {
    use std::io::Write as _;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("j.db");
    let mut child = bin()
        .arg("--journal")
        .arg(&db)
        .args(["import", "--no-compact", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"{\"role\":\"user\",\"content\":\"from a pipe\"}\n{\"role\":\"assistant\",\"content\":\"read\"}\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stored = stored_default(&db);
    assert_eq!(stored.len(), 2);
    let foldline_core::event::Event::Message(first) = &stored[0].event else {
        panic!("{:?}", stored[0].event)
    };
    assert!(format!("{:?}", first.parts).contains("from a pipe"));
}

/// `foldline import --format openai-responses` reads the Responses API's
/// items (a response's output as it is: reasoning not stored), and `context
/// --format openai-responses --messages` gives them back as that API's
/// `input`; a provider-run tool's item is refused by name and nothing is
/// written.
#[test]
fn an_import_reads_openai_responses_items_and_the_context_gives_them_back() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("j.db");
    let file = dir.path().join("items.json");
    let items = serde_json::json!([
        {"role": "system", "content": "Be brief."},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather in Oslo?"}]},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": [{"type": "output_text", "text": "Checking.", "annotations": []}]},
        {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "weather", "arguments": "{\"city\":\"Oslo\"}", "status": "completed"},
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
        {"role": "assistant", "content": "Sunny."}
    ]);
    std::fs::write(&file, items.to_string()).unwrap();
    let run = |args: &[&str]| {
        let out = bin().arg("--journal").arg(&db).args(args).output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let path = file.to_str().unwrap();
    let (code, _, err) = run(&["import", "--format", "openai-responses", path]);
    assert_eq!(code, Some(0), "{err}");
    let (code, out, err) = run(&["context", "--format", "openai-responses", "--messages"]);
    assert_eq!(code, Some(0), "{err}");
    let sent: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        sent,
        serde_json::json!([
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Oslo?"},
            {"role": "assistant", "content": "Checking."},
            {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{\"city\":\"Oslo\"}"},
            {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
            {"role": "assistant", "content": "Sunny."}
        ])
    );
    std::fs::write(
        &file,
        r#"[{"role":"user","content":"more"},{"type":"web_search_call","id":"ws"}]"#,
    )
    .unwrap();
    let (code, _, err) = run(&["import", "--format", "openai-responses", path]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("item 2: \"web_search_call\" items are not imported"),
        "{err}"
    );
    assert_eq!(stored_default(&db).len(), 6, "nothing written");
}

/// A tool cycle is one unit compaction neither splits nor keeps part of:
/// an import holding one larger than a compaction can take is refused
/// whole, nothing written (before, it was written, every context left the
/// cycle out and every compaction was `nothing_to_fold`, for good).
#[test]
fn an_import_with_a_tool_cycle_no_compaction_could_take_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("j.db");
    let calls: Vec<serde_json::Value> = (0..200)
        .map(|i| serde_json::json!({"id": format!("c{i}"), "type": "function", "function": {"name": "check", "arguments": "{}"}}))
        .collect();
    let mut messages = vec![
        serde_json::json!({"role": "user", "content": "Run the checks."}),
        serde_json::json!({"role": "assistant", "content": null, "tool_calls": calls}),
    ];
    for i in 0..200 {
        messages.push(serde_json::json!({"role": "tool", "tool_call_id": format!("c{i}"), "content": format!("result {i} {}", "ok ".repeat(700))}));
    }
    messages.push(serde_json::json!({"role": "assistant", "content": "All checks ran."}));
    let file = dir.path().join("cycle.json");
    std::fs::write(&file, serde_json::Value::Array(messages).to_string()).unwrap();
    let out = on_journal(&db).arg("import").arg(&file).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("turn_too_large") && err.contains("larger than one compaction can take whole"),
        "{err}"
    );
    assert!(stored_default(&db).is_empty(), "nothing written");
}

/// `Driver::append_keyed`, as the JS driver's `append` with an idempotency
/// key: a retry writes nothing again and answers as the first time, also
/// from another driver on the same journal (the key is read back from it);
/// the key with other messages is refused, nothing written; a key of
/// another form is refused before anything is read.
#[test]
fn a_keyed_append_is_written_once() {
    let stored_of = |db: &std::path::Path, conv: &str| -> Vec<foldline_core::event::Event> {
        let j = SqliteJournal::open(db).unwrap();
        j.read_events(conv, 0)
            .unwrap()
            .into_iter()
            .map(|s| s.event)
            .collect()
    };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("j.db");
    let d = sqlite_driver(&db, small_decl());
    let hello = r#"[{"role":"user","content":"hello"},{"role":"assistant","content":"hi"}]"#;
    let first = d
        .append_keyed("c", Incoming::OpenAi, hello, Some("req-1"))
        .unwrap();
    assert_eq!((first.count, first.replayed), (2, false));
    d.append("c", r#"{"role":"user","content":"and then"}"#)
        .unwrap();
    let stored = stored_of(&db, "c").len();
    let again = d
        .append_keyed("c", Incoming::OpenAi, hello, Some("req-1"))
        .unwrap();
    assert_eq!(
        (again.seq, again.count, again.replayed),
        (first.seq, 2, true)
    );
    // Another process on the same journal: the key is read back from it.
    let other = sqlite_driver(&db, small_decl());
    let replayed = other
        .append_keyed("c", Incoming::OpenAi, hello, Some("req-1"))
        .unwrap();
    assert_eq!(replayed, again);
    let reused = other.append_keyed(
        "c",
        Incoming::OpenAi,
        r#"{"role":"user","content":"else"}"#,
        Some("req-1"),
    );
    assert_eq!(reused.unwrap_err().code(), "idempotency_key_reused");
    let bad = d.append_keyed("c", Incoming::OpenAi, hello, Some("not a key"));
    assert_eq!(bad.unwrap_err().code(), "invalid_input");
    assert_eq!(stored_of(&db, "c").len(), stored, "nothing written again");
    // The key rides in the turn ids, as the JS driver and the servers write it.
    let keyed = stored_of(&db, "c").into_iter().filter(
        |e| matches!(e, foldline_core::event::Event::Message(m) if m.turn_id.ends_with("@req-1")),
    );
    assert_eq!(keyed.count(), 2);
}

/// A key is its sender's: two members of a room whose clients pick the
/// same key each write their own message (neither answered as the other's
/// retry nor refused for it), each retry is recognized, also read back by
/// another driver; a batch whose messages name different senders (a user
/// message's `name`, an assistant's none) is recognized whole.
#[test]
fn a_key_is_its_senders() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("j.db");
    let d = sqlite_driver(&db, small_decl());
    let yes = r#"{"role":"user","content":"yes"}"#;
    let says = |d: &Driver<SqliteJournal, Extractive>, who: &str, m: &str, key: &str| {
        d.append_from("room", who, Incoming::OpenAi, m, Some(key))
            .map(|a| (a.count, a.replayed))
            .map_err(|e| e.code().to_owned())
    };
    assert_eq!(says(&d, "alice", yes, "1"), Ok((1, false)));
    assert_eq!(says(&d, "bob", yes, "1"), Ok((1, false)), "bob's own");
    assert_eq!(says(&d, "bob", yes, "1"), Ok((1, true)));
    let no = r#"{"role":"user","content":"no"}"#;
    assert_eq!(says(&d, "bob", no, "2"), Ok((1, false)));
    assert_eq!(says(&d, "alice", yes, "2"), Ok((1, false)), "not refused");
    assert_eq!(
        says(&d, "bob", yes, "2").unwrap_err(),
        "idempotency_key_reused"
    );
    let named =
        r#"[{"role":"user","name":"carol","content":"hi"},{"role":"assistant","content":"hello"}]"#;
    let first = d
        .append_keyed("room", Incoming::OpenAi, named, Some("3"))
        .unwrap();
    let other = sqlite_driver(&db, small_decl());
    for (who, m, key) in [("alice", yes, "1"), ("bob", yes, "1"), ("bob", no, "2")] {
        assert_eq!(says(&other, who, m, key), Ok((1, true)), "{who} {key}");
    }
    let again = other
        .append_keyed("room", Incoming::OpenAi, named, Some("3"))
        .unwrap();
    assert_eq!(
        (again.seq, again.count, again.replayed),
        (first.seq, 2, true)
    );
    let senders: Vec<String> = SqliteJournal::open(&db)
        .unwrap()
        .read_events("room", 0)
        .unwrap()
        .into_iter()
        .filter_map(|s| match s.event {
            foldline_core::event::Event::Message(m) => Some(m.sender),
            _ => None,
        })
        .collect();
    assert_eq!(senders, ["alice", "bob", "bob", "alice", "carol", ""]);
}

/// `Driver::append_from`, a room member's batch: the sender is written on
/// each message; while one member has written the context is as before,
/// and once a second has, each member's turn names its sender
/// (docs/formats.md); the assistant's does not.
#[test]
fn a_room_s_context_names_who_said_what() {
    let dir = tempfile::tempdir().unwrap();
    let d = sqlite_driver(&dir.path().join("j.db"), small_decl());
    let say = |who: &str, text: &str| {
        let m = serde_json::json!({"role": "user", "content": text}).to_string();
        d.append_from("room", who, Incoming::OpenAi, &m, None)
            .unwrap();
    };
    let sent = || {
        let o = ContextOptions {
            format: foldline_core::format::Format::Openai,
            ..ContextOptions::default()
        };
        d.context("room", o).unwrap().messages.unwrap().to_value()
    };
    say("alice", "I vote for Lisbon.");
    d.append("room", r#"{"role":"assistant","content":"Noted."}"#)
        .unwrap();
    assert_eq!(
        sent(),
        serde_json::json!([
            {"role": "user", "content": "I vote for Lisbon."},
            {"role": "assistant", "content": "Noted."}
        ])
    );
    // Bob's prompt, before it is appended: a new voice, so every member's
    // turn and the prompt are named; alice's own prompt names no one.
    let prompted = |who: &str| {
        let o = ContextOptions {
            format: foldline_core::format::Format::Openai,
            prompt: Some(vec![foldline_core::turn::Part::Text {
                text: "I vote for Porto.".into(),
            }]),
            prompt_sender: Some(who.into()),
            ..ContextOptions::default()
        };
        d.context("room", o).unwrap().messages.unwrap().to_value()
    };
    assert_eq!(
        prompted("bob"),
        serde_json::json!([
            {"role": "user", "content": "[alice] I vote for Lisbon."},
            {"role": "assistant", "content": "Noted."},
            {"role": "user", "content": "[bob] I vote for Porto."}
        ])
    );
    assert_eq!(prompted("alice")[2]["content"], "I vote for Porto.");
    // The driver's held view is not changed by a prompt's labels.
    assert_eq!(sent()[0]["content"], "I vote for Lisbon.");
    say("bob", "I vote for Porto.");
    assert_eq!(
        sent(),
        serde_json::json!([
            {"role": "user", "content": "[alice] I vote for Lisbon."},
            {"role": "assistant", "content": "Noted."},
            {"role": "user", "content": "[bob] I vote for Porto."}
        ])
    );
}

/// `Driver::append_as` takes a response's output as it is and the context
/// gives it back as the Responses API's input; a bad item writes nothing.
#[test]
fn a_driver_appends_openai_responses_items() {
    let dir = tempfile::tempdir().unwrap();
    let d = Driver::builder(
        Foldline::embedded().unwrap(),
        SqliteJournal::open(dir.path().join("j.db")).unwrap(),
        Extractive,
    )
    .declaration(small_decl())
    .build()
    .unwrap();
    let output = r#"[{"type":"reasoning","id":"rs","summary":[]},{"type":"custom_tool_call","call_id":"k1","name":"grep","input":"warn"}]"#;
    d.append("c", r#"{"role":"user","content":"grep the log"}"#)
        .unwrap();
    d.append_as("c", Incoming::OpenAiResponses, output).unwrap();
    d.append_as(
        "c",
        Incoming::OpenAiResponses,
        r#"{"type":"custom_tool_call_output","call_id":"k1","output":"2 lines"}"#,
    )
    .unwrap();
    let e = d
        .append_as(
            "c",
            Incoming::OpenAiResponses,
            r#"[{"type":"item_reference","id":"x"}]"#,
        )
        .unwrap_err();
    assert_eq!(e.code(), "invalid_input");
    let o = ContextOptions {
        format: foldline_core::format::Format::OpenaiResponses,
        ..ContextOptions::default()
    };
    let sent = d.context("c", o).unwrap().messages.unwrap().to_value();
    assert_eq!(
        sent,
        serde_json::json!([
            {"role": "user", "content": "grep the log"},
            {"type": "custom_tool_call", "call_id": "k1", "name": "grep", "input": "warn"},
            {"type": "custom_tool_call_output", "call_id": "k1", "output": "2 lines"}
        ])
    );
}

/// `timeline`, `context`, `verify` and `compact` are about a conversation
/// already written: a mistyped `--journal` or `--conversation` is named
/// (exit 2), never answered as an empty conversation, and no file is left
/// behind.
#[test]
fn a_missing_journal_or_conversation_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("j.db");
    let run = |args: &[&str]| {
        let out = bin().arg("--journal").arg(&db).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        (out.status.code(), err)
    };
    for command in ["timeline", "context", "verify", "compact"] {
        let (code, err) = run(&[command]);
        assert_eq!(code, Some(2), "{command}: {err}");
        assert!(
            err.contains("invalid_input: no journal at"),
            "{command}: {err}"
        );
        assert!(!db.exists(), "{command} left a journal behind");
    }
    let file = write_conversation(dir.path(), 4);
    let (code, err) = run(&["import", "--no-compact", file.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    for command in ["timeline", "context", "verify", "compact"] {
        let (code, err) = run(&["--conversation", "typo", command]);
        assert_eq!(code, Some(2), "{command}: {err}");
        assert!(err.contains("no conversation \"typo\""), "{command}: {err}");
        let (code, err) = run(&[command]);
        assert_ne!(
            code,
            Some(2),
            "{command} of the written conversation: {err}"
        );
    }
}

/// A raw event that reuses a stored turn id with other content would leave
/// the conversation unable to reconstruct for good (the journal is
/// append-only): the import is refused naming the turn, and nothing is
/// written.
#[test]
fn an_import_reusing_a_turn_id_with_other_content_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("j.db");
    let file = write_conversation(dir.path(), 4);
    let import = |p: &std::path::Path| {
        bin()
            .arg("--journal")
            .arg(&db)
            .args(["import", "--no-compact"])
            .arg(p)
            .output()
            .unwrap()
    };
    assert!(import(&file).status.success());
    let j = SqliteJournal::open(&db).unwrap();
    let stored = j.read_events("default", 0).unwrap();
    let foldline_core::event::Event::Message(first) = &stored[0].event else {
        panic!("{:?}", stored[0].event)
    };
    let mut forged = first.clone();
    forged.source_seq = 99;
    forged.content_hash = None;
    forged.parts = vec![foldline_core::turn::Part::Text {
        text: "other words".into(),
    }];
    let raw = dir.path().join("raw.jsonl");
    let line = serde_json::to_string(&foldline_core::event::Event::Message(forged)).unwrap();
    std::fs::write(&raw, format!("{line}\n")).unwrap();
    let out = import(&raw);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("conflicting_turn"), "{err}");
    assert!(err.contains(&first.turn_id), "{err}");
    assert_eq!(
        j.read_events("default", 0).unwrap().len(),
        stored.len(),
        "nothing written"
    );
    // A new turn id the file itself gives two contents: refused before the
    // first is written, also by the import that compacts as it goes.
    let mut twice = first.clone();
    twice.turn_id = "new-turn".into();
    twice.source_seq = 100;
    twice.content_hash = None;
    let mut other = twice.clone();
    other.parts = vec![foldline_core::turn::Part::Text {
        text: "said otherwise".into(),
    }];
    let lines: Vec<String> = [twice, other]
        .into_iter()
        .map(|m| serde_json::to_string(&foldline_core::event::Event::Message(m)).unwrap())
        .collect();
    std::fs::write(&raw, lines.join("\n") + "\n").unwrap();
    let out = bin()
        .arg("--journal")
        .arg(&db)
        .arg("import")
        .arg(&raw)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("conflicting_turn") && err.contains("new-turn"),
        "{err}"
    );
    assert_eq!(
        j.read_events("default", 0).unwrap().len(),
        stored.len(),
        "nothing written"
    );
}

/// `import` makes the append check every other writer makes: a message no
/// compaction could take (accepted, every context after it was refused
/// `tail_turn_too_large`, for good) and an event of another conversation
/// are refused with their codes, naming the file, and nothing of the batch
/// is written, with or without `--no-compact`.
#[test]
fn an_import_makes_the_append_check() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("j.db");
    let program = |args: &[&str], file: &std::path::Path| {
        on_journal(&db).args(args).arg(file).output().unwrap()
    };
    let file = write_conversation(dir.path(), 4);
    assert!(program(&["import"], &file).status.success());
    let j = SqliteJournal::open(&db).unwrap();
    let stored = j.read_events("default", 0).unwrap().len();
    let huge = dir.path().join("huge.json");
    let messages = serde_json::json!([
        {"role": "user", "content": "a short one first"},
        {"role": "assistant", "content": "x".repeat(400_000)},
    ]);
    std::fs::write(&huge, messages.to_string()).unwrap();
    let foreign = dir.path().join("foreign.jsonl");
    let mut other = j.read_events("default", 0).unwrap().remove(0).event;
    if let foldline_core::event::Event::Message(m) = &mut other {
        m.conversation = "another".into();
        m.turn_id = "elsewhere".into();
        m.source_seq = 50;
    }
    std::fs::write(
        &foreign,
        format!("{}\n", serde_json::to_string(&other).unwrap()),
    )
    .unwrap();
    for (file, code) in [(&huge, "turn_too_large"), (&foreign, "wrong_route")] {
        for args in [&["import"][..], &["import", "--no-compact"]] {
            let out = program(args, file);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{err}");
            assert!(
                err.contains(&format!("{code}: {}", file.display())),
                "{err}"
            );
            assert!(err.contains("nothing imported"), "{err}");
            assert_eq!(
                j.read_events("default", 0).unwrap().len(),
                stored,
                "nothing written"
            );
        }
    }
    succeeded(on_journal(&db).arg("context"));
}

/// Corrections and late deliveries (raw foldline events, which only an
/// import writes) are checked as what they make: a turn corrected past what
/// one compaction can take, a system prompt corrected past the pinned
/// turns' room (an earlier correction of it counted), a covered turn
/// corrected past the amendment's bound — each refused by its code, nothing
/// written; accepted, each left the conversation without a context, a
/// compaction or a chain that verifies, for good; so did a second frontier
/// and a turn as metadata. And an import's corrections are written before
/// anything of it is compacted, so none lands on a turn the import's own
/// compaction covered.
#[test]
fn an_import_checks_corrections_as_what_they_make() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("j.db");
    let write = |name: &str, lines: Vec<serde_json::Value>| {
        let path = dir.path().join(name);
        let text: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        std::fs::write(&path, text.join("\n")).unwrap();
        path
    };
    let message = |seq: u64, id: &str, role: &str, chars: usize| {
        serde_json::json!({"type": "message", "conversation": "default", "sourceSeq": seq,
            "turnId": id, "role": role, "parts": [{"type": "text", "text": format!("{id} {}", "y".repeat(chars))}]})
    };
    let correction = |id: &str, seq: u64, chars: usize| {
        serde_json::json!({"type": "correction", "turnId": id, "correctionSeq": seq,
            "parts": [{"type": "text", "text": "z".repeat(chars)}]})
    };
    let usable = || {
        succeeded(on_journal(&db).arg("context"));
        succeeded(on_journal(&db).arg("verify"));
    };
    let refused = |file: &std::path::Path, code: &str| {
        let before = stored_default(&db).len();
        let out = on_journal(&db).arg("import").arg(file).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.contains(&format!("{code}: {}", file.display())),
            "{err}"
        );
        assert_eq!(stored_default(&db).len(), before, "nothing written");
        usable();
    };
    // The system prompt and 60 turns of 2,000 characters: the import
    // compacts as it goes, and covers the oldest turns.
    let mut turns = vec![
        message(1, "s", "system", 30_000),
        correction("s", 1, 40_000),
    ];
    turns.extend((2..62).map(|i| {
        message(
            i,
            &format!("t{i}"),
            ["user", "assistant"][i as usize % 2],
            2_000,
        )
    }));
    // Two corrections of turns the import's compaction would cover, which
    // together pass the amendment's bound (8,000): written before anything
    // is compacted, they are the turns' content, not an amendment.
    turns.extend([correction("t30", 1, 5_000), correction("t32", 1, 5_000)]);
    succeeded(
        on_journal(&db)
            .arg("import")
            .arg(write("first.jsonl", turns)),
    );
    let verify = succeeded(on_journal(&db).arg("verify"));
    assert!(String::from_utf8_lossy(&verify.stdout).starts_with("intact: "));
    usable();
    // The prompt, corrected to 40,000, and 39,000 more would pass the
    // pinned room (78,585 characters); counted as written (30,000), they
    // would not.
    refused(
        &write("pinned.jsonl", vec![message(70, "s2", "system", 39_000)]),
        "pinned_too_large",
    );
    refused(
        &write("prompt.jsonl", vec![correction("s", 2, 80_000)]),
        "pinned_too_large",
    );
    // The newest turn corrected past what one compaction can take.
    refused(
        &write("turn.jsonl", vec![correction("t61", 1, 500_000)]),
        "turn_too_large",
    );
    // A covered turn (the boundary covers 42 to 54; the activation frontier
    // is at 41) corrected past the amendment's bound, alone and after one
    // within it.
    refused(
        &write("covered.jsonl", vec![correction("t45", 1, 60_000)]),
        "amendment_too_large",
    );
    refused(
        &write(
            "covered2.jsonl",
            vec![correction("t45", 1, 5_000), correction("t47", 1, 5_000)],
        ),
        "amendment_too_large",
    );
    // Within it: taken, and folded by the next compaction.
    succeeded(
        on_journal(&db)
            .arg("import")
            .arg(write("small.jsonl", vec![correction("t45", 1, 5_000)])),
    );
    usable();
    let context = succeeded(on_journal(&db).arg("context"));
    let context: serde_json::Value = serde_json::from_slice(&context.stdout).unwrap();
    assert!(
        context["manifest"]["amendmentHash"].is_string(),
        "t45 is covered: an amendment"
    );
    succeeded(on_journal(&db).arg("compact"));
    usable();
    // Other raw events resolve or plan would fail on for good: a second
    // frontier (`conflicting_turn`), a turn as metadata without its content.
    let frontier = stored_default(&db)
        .into_iter()
        .find(|s| matches!(s.event, foldline_core::event::Event::Frontier(_)))
        .unwrap();
    let mut frontier = serde_json::to_value(&frontier.event).unwrap();
    frontier["startSeq"] = serde_json::json!(3);
    refused(&write("frontier.jsonl", vec![frontier]), "conflicting_turn");
    // A boundary the chain holds, claimed again with other content (here
    // under another declaration's fingerprint, so on another chain slot).
    let boundary = stored_default(&db)
        .into_iter()
        .find(|s| matches!(s.event, foldline_core::event::Event::Boundary(_)))
        .unwrap();
    let mut boundary = serde_json::to_value(&boundary.event).unwrap();
    boundary["declarationFingerprint"] = serde_json::json!(format!("sha256:{}", "1".repeat(64)));
    refused(&write("boundary.jsonl", vec![boundary]), "conflicting_turn");
    let meta = serde_json::json!({"type": "turnMeta", "conversation": "default", "sourceSeq": 90,
        "turnId": "m90", "role": "user", "chars": 12, "contentHash": format!("sha256:{}", "0".repeat(64))});
    refused(&write("meta.jsonl", vec![meta]), "invalid_request");
}

/// `foldline correct TURN TEXT` edits a turn as the drivers' `correct`
/// does: the context says the new text; a correction no compaction could
/// take (from stdin) or of a turn the conversation lacks is refused by its
/// code, nothing written.
#[test]
fn the_program_corrects_a_turn() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("j.db");
    succeeded(
        on_journal(&db)
            .arg("import")
            .arg(write_conversation(dir.path(), 6)),
    );
    let turn = stored_default(&db)
        .into_iter()
        .find_map(|s| s.event.turn_id().map(str::to_owned))
        .unwrap();
    let out = succeeded(on_journal(&db).args(["correct", &turn, "the corrected words"]));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with(&format!("corrected {turn}")));
    let context = succeeded(on_journal(&db).arg("context"));
    assert!(String::from_utf8_lossy(&context.stdout).contains("the corrected words"));
    let before = stored_default(&db).len();
    let mut long = on_journal(&db)
        .args(["correct", &turn, "-"])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    long.stdin
        .take()
        .unwrap()
        .write_all("x".repeat(500_000).as_bytes())
        .unwrap();
    let out = long.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("turn_too_large"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = on_journal(&db)
        .args(["correct", "nowhere", "x"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid_input"));
    assert_eq!(stored_default(&db).len(), before, "nothing written");
    succeeded(on_journal(&db).arg("verify"));
}

/// An import larger than one call of the core's check (8 MiB of events) is
/// checked in parts, each inside a call's memory limit (a 264 MB export in
/// one call was refused `memory_limit`): a refusal in a later part names the
/// event by its index in the whole file, nothing is written, and the file
/// without it imports whole.
#[test]
fn an_import_larger_than_one_check_call_is_checked_in_parts() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("j.db");
    // 3,000 messages of ~3,100 bytes: 9.3 MB, past one call's 8 MiB.
    let mut messages: Vec<_> = (0..3_000)
        .map(|i| {
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            serde_json::json!({"role": role, "content": format!("{i} {}", "words of the trip ".repeat(170))})
        })
        .collect();
    let good = dir.path().join("good.json");
    std::fs::write(&good, serde_json::to_string(&messages).unwrap()).unwrap();
    messages.push(serde_json::json!({"role": "user", "content": "x".repeat(400_000)}));
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, serde_json::to_string(&messages).unwrap()).unwrap();
    let import = |file: &std::path::Path| {
        let out = on_journal(&db)
            .args(["import", "--no-compact"])
            .arg(file)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = import(&bad);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("turn_too_large") && err.contains("events[3000]"),
        "{err}"
    );
    assert!(
        !db.exists()
            || SqliteJournal::open(&db)
                .unwrap()
                .read_events("default", 0)
                .unwrap()
                .is_empty(),
        "nothing written"
    );
    let (code, err) = import(&good);
    assert_eq!(code, Some(0), "{err}");
    let j = SqliteJournal::open(&db).unwrap();
    assert_eq!(j.read_events("default", 0).unwrap().len(), 3_000);
}

/// A call over its memory limit says what to do: the limit to ask for, and
/// what each command takes of the conversation with its content.
#[test]
fn a_call_over_its_memory_limit_names_the_limit_to_ask_for() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("j.db");
    let file = write_conversation(dir.path(), 4);
    succeeded(on_journal(&db).args(["import", "--no-compact"]).arg(&file));
    let out = on_journal(&db)
        .args(["--memory-mib", "1", "context"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("memory_limit: the call exceeded its memory limit of 1048576 bytes"),
        "{err}"
    );
    assert!(
        err.contains("run it again with --memory-mib 2048 (now 1)")
            && err.contains("compact: those and the oldest turns one fold may take"),
        "{err}"
    );
}

/// A history no summary covers, too large for one call's memory whole (an
/// import with `--no-compact`), still gives its context: `select` is sent
/// the turns that could be in the exact tail with their content, the older
/// ones as their metadata, and answers byte for byte what the whole
/// content gives under a memory that holds it — in characters, and in
/// tokens with tool cycles, the last one open.
#[test]
fn a_history_too_large_for_a_call_still_gives_its_context() {
    let dir = tempfile::tempdir().unwrap();
    let (file, decl) = (dir.path().join("m.json"), dir.path().join("decl.json"));
    let tokens = budget_decl(Budget::default_tokens());
    std::fs::write(&decl, serde_json::to_string(&tokens).unwrap()).unwrap();
    let text = |i: usize| {
        format!(
            "message {i} {}",
            "about the plan and the budget ".repeat(30)
        )
    };
    let call = |i: usize| serde_json::json!({"id": format!("c{i}"), "type": "function", "function": {"name": "look", "arguments": "{}"}});
    for (name, declared) in [("chars", false), ("tokens", true)] {
        let messages: Vec<serde_json::Value> = (0..6_000)
            .map(|i| match (i % 4, declared) {
                (1, true) => serde_json::json!({"role": "assistant", "content": null, "tool_calls": [call(i)]}),
                (2, true) => serde_json::json!({"role": "tool", "tool_call_id": format!("c{}", i - 1), "content": text(i)}),
                (0 | 2, _) => serde_json::json!({"role": "user", "content": text(i)}),
                _ => serde_json::json!({"role": "assistant", "content": text(i)}),
            })
            .take(if declared { 5_999 } else { 6_000 })
            .collect();
        std::fs::write(&file, serde_json::Value::Array(messages).to_string()).unwrap();
        let db = dir.path().join(format!("{name}.db"));
        let program = || {
            let mut c = on_journal(&db);
            if declared {
                c.arg("--declaration").arg(&decl);
            }
            c
        };
        succeeded(program().args(["import", "--no-compact"]).arg(&file));
        // Corrected turns, old and in the tail, go whole beside their
        // corrections (the core applies them to the turn's content).
        let ids: Vec<String> = stored_default(&db)
            .into_iter()
            .filter_map(|s| s.event.turn_id().map(str::to_owned))
            .collect();
        for (at, text) in [(100, "corrected long ago"), (5_990, "corrected just now")] {
            succeeded(program().args(["correct", "--no-compact", &ids[at], text]));
        }
        let context =
            |mib: &str| succeeded(program().args(["--memory-mib", mib, "context"])).stdout;
        let whole = context("512");
        assert!(
            whole.len() > 100_000,
            "{name}: the manifest names the 6,000 turns"
        );
        let whole = String::from_utf8(whole).unwrap();
        assert!(whole.contains("corrected just now"), "{name}");
        assert_eq!(String::from_utf8(context("16")).unwrap(), whole, "{name}");
    }
}

/// A history no summary covers, too large for one call's memory whole,
/// is compacted at that memory: `step` is sent the oldest turns a fold may
/// take and the newest with their content, the others as their metadata,
/// and writes the boundaries the whole content gives under a memory that
/// holds it — for a new conversation's bounded activation (the frontier
/// near the newest turns) and for a backlog after an early frontier (the
/// oldest turns folded in steps). 20,000 messages (18 MB): at 48 MiB the
/// whole content was `memory_limit`. A timeline page of all of them is
/// drawn at 96 MiB, as the whole timeline is.
#[test]
fn a_history_too_large_for_a_call_is_compacted_at_its_memory() {
    let dir = tempfile::tempdir().unwrap();
    let messages = |n: usize| {
        let all: Vec<serde_json::Value> = (0..n)
            .map(|i| {
                let role = if i % 2 == 0 { "user" } else { "assistant" };
                serde_json::json!({"role": role, "content": format!("message {i} {}", "about the plan and the budget ".repeat(30))})
            })
            .collect();
        serde_json::Value::Array(all).to_string()
    };
    let (first, all) = (dir.path().join("first.json"), dir.path().join("all.json"));
    std::fs::write(&first, messages(10)).unwrap();
    std::fs::write(&all, messages(20_000)).unwrap();
    for (name, early) in [("activation", false), ("backlog", true)] {
        let db = dir.path().join(format!("{name}.db"));
        if early {
            // Live messages first: the conversation is activated at its start.
            succeeded(on_journal(&db).arg("import").arg(&first));
        }
        succeeded(on_journal(&db).args(["import", "--no-compact"]).arg(&all));
        let copy = dir.path().join(format!("{name}-whole.db"));
        std::fs::copy(&db, &copy).unwrap();
        let run = |db: &std::path::Path, mib: &str, args: &[&str]| {
            let out = succeeded(on_journal(db).args(["--memory-mib", mib]).args(args));
            String::from_utf8(out.stdout).unwrap()
        };
        let compacted = run(&db, "48", &["compact"]);
        assert_eq!(compacted, run(&copy, "512", &["compact"]), "{name}");
        let chain = run(&db, "48", &["verify"]);
        assert_eq!(chain, run(&copy, "512", &["verify"]), "{name}");
        let boundaries = if early {
            "intact: 4 boundaries"
        } else {
            "intact: 1 boundaries"
        };
        assert!(chain.starts_with(boundaries), "{name}: {chain}");
        assert_eq!(
            run(&db, "48", &["context"]),
            run(&copy, "512", &["context"]),
            "{name}"
        );
        // A page larger than one call's is drawn in pages too: its latest
        // 100,000 items (all of them) are the whole timeline, drawn in
        // pages of 5,000 (one call taking them was `memory_limit` at 128 MiB).
        assert_eq!(
            run(&db, "96", &["timeline", "--json", "--limit", "100000"]),
            run(&db, "96", &["timeline", "--json"]),
            "{name}"
        );
    }
}

/// `import` starts no conversation `foldline serve` could not serve (an
/// empty id, a space, a slash): refused, nothing written. A conversation
/// that exists under such an id (written before, or by another host) still
/// takes more.
#[test]
fn an_import_starts_only_conversations_the_server_serves() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("j.db");
    let file = write_conversation(dir.path(), 4);
    let import = |conv: &str| {
        let args = ["--conversation", conv, "import"];
        let out = on_journal(&db).args(args).arg(&file).output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    assert_eq!(import("trip-2026").0, Some(0));
    let j = SqliteJournal::open(&db).unwrap();
    for conv in ["", "a b", "a/b", ".."] {
        let (code, err) = import(conv);
        assert_eq!(code, Some(2), "{conv:?}: {err}");
        assert!(err.contains("a new conversation's id is 1 to 128"), "{err}");
        assert!(
            j.read_events(conv, 0).unwrap().is_empty(),
            "{conv:?}: nothing written"
        );
    }
    let route = foldline_core::turn::Route {
        conversation: "a b".into(),
        ..Default::default()
    };
    j.append(
        "a b",
        &import::parse(&std::fs::read_to_string(&file).unwrap(), &route, 0).unwrap(),
    )
    .unwrap();
    let before = j.read_events("a b", 0).unwrap().len();
    let more = write_conversation(&dir.path().join(""), 6);
    let args = ["--conversation", "a b", "import", "--no-compact"];
    succeeded(on_journal(&db).args(args).arg(&more));
    assert!(j.read_events("a b", 0).unwrap().len() > before);
}

/// An import run again writes only what the journal lacks: the same file
/// twice (a command repeated), and a file whose first part an earlier run
/// wrote (a run cut short, an export that grew). The journal then holds
/// each message once, as one whole run writes them, and the chain verifies.
#[test]
fn an_import_run_again_writes_only_what_is_new() {
    let dir = tempfile::tempdir().unwrap();
    let lines: Vec<String> = import::demo_conversation(240)
        .iter()
        .map(|m| format!("{m}\n"))
        .collect();
    let (part, whole) = (
        dir.path().join("part.jsonl"),
        dir.path().join("whole.jsonl"),
    );
    std::fs::write(&part, lines[..100].concat()).unwrap();
    std::fs::write(&whole, lines.concat()).unwrap();
    let run = |db: &std::path::Path, args: &[&str]| {
        let out = succeeded(on_journal(db).args(args));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let messages = |db: &std::path::Path| -> Vec<foldline_core::event::Event> {
        let j = SqliteJournal::open(db).unwrap();
        let events = j
            .read_events("default", 0)
            .unwrap()
            .into_iter()
            .map(|s| s.event);
        events
            .filter(|e| matches!(e, foldline_core::event::Event::Message(_)))
            .collect()
    };
    let once = dir.path().join("once.db");
    run(&once, &["import", whole.to_str().unwrap()]);
    let again = run(&once, &["import", whole.to_str().unwrap()]);
    let held = format!(
        "nothing to import: default holds the {} messages",
        lines.len()
    );
    assert!(again.starts_with(&held), "{again}");
    assert_eq!(messages(&once).len(), lines.len());

    let resumed = dir.path().join("resumed.db");
    run(&resumed, &["import", part.to_str().unwrap()]);
    let rest = run(&resumed, &["import", whole.to_str().unwrap()]);
    assert!(rest.contains("(100 before them held already"), "{rest}");
    assert_eq!(
        messages(&resumed),
        messages(&once),
        "each message once, as one run writes it"
    );
    assert!(run(&resumed, &["verify"]).starts_with("intact"));
}

/// A declaration that breaks a rule is refused when the driver is built,
/// naming the rule (not "breaks 1 rule(s)"), and two drivers in one process
/// never share a lease holder.
#[test]
fn a_bad_declaration_is_named_when_the_driver_is_built() {
    let dir = tempfile::tempdir().unwrap();
    let mut bad = small_decl();
    bad.compactor_id = bad.target_id.clone();
    let p = dir.path().join("decl.json");
    std::fs::write(&p, serde_json::to_string(&bad).unwrap()).unwrap();
    let out = bin()
        .arg("--journal")
        .arg(dir.path().join("j.db"))
        .arg("--declaration")
        .arg(&p)
        .arg("import")
        .arg(write_conversation(dir.path(), 2))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("invalid_declaration"), "{err}");
    assert!(
        err.contains("separate consumer id"),
        "the rule is named: {err}"
    );
    let j = || SqliteJournal::open(dir.path().join("j.db")).unwrap();
    let e = match Driver::checked(Foldline::embedded().unwrap(), j(), Extractive, bad) {
        Err(e) => e,
        Ok(_) => panic!("a declaration breaking a rule was accepted"),
    };
    assert_eq!(e.code(), "invalid_declaration");
    let a = Driver::checked(Foldline::embedded().unwrap(), j(), Extractive, small_decl()).unwrap();
    let b = Driver::checked(Foldline::embedded().unwrap(), j(), Extractive, small_decl()).unwrap();
    assert_ne!(a.holder(), b.holder(), "two drivers, two lease holders");
}

/// Seed 002's settings by their names, as environment variables of the
/// program: a window in tokens turns the budget into a token budget; a bad
/// value is refused naming its variable.
#[test]
fn the_seed_settings_are_environment_variables() {
    let dir = tempfile::tempdir().unwrap();
    let written = bin()
        .arg("--journal")
        .arg(dir.path().join("j.db"))
        .args(["import", "--no-compact"])
        .arg(write_conversation(dir.path(), 2))
        .output()
        .unwrap();
    assert!(written.status.success());
    let out = bin()
        .arg("--journal")
        .arg(dir.path().join("j.db"))
        .arg("context")
        .env("CHAT_CONTEXT_DEFAULT_WINDOW_TOKENS", "6000")
        .env("CHAT_CONTEXT_RESERVED_OUTPUT_TOKENS", "512")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let limit = v["manifest"]["limit"].as_u64().unwrap();
    assert_eq!(v["manifest"]["metric"], "tokens", "{v}");
    assert!(
        limit < 6000 - 512,
        "the 6,000-token window less the reserved output: {limit}"
    );
    // 4,096 with the default amendment bound: no message could be appended
    // (every one over 10 tokens refused), so the declaration is refused at
    // once, naming the window.
    let out = bin()
        .arg("--journal")
        .arg(dir.path().join("j.db"))
        .arg("context")
        .env("CHAT_CONTEXT_DEFAULT_WINDOW_TOKENS", "4096")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("invalid_declaration") && err.contains("1,024 characters"),
        "{err}"
    );
    let out = bin()
        .arg("--journal")
        .arg(dir.path().join("j.db"))
        .arg("context")
        .env("CONTEXT_COMPACTION_EAGER_RATIO", "80%")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("CONTEXT_COMPACTION_EAGER_RATIO"), "{err}");
}

/// The SQLite journal refuses edits in the database itself (triggers), not
/// only through foldline's API: an update or a delete of an event aborts,
/// and the events stay as written.
#[test]
fn the_sqlite_journal_refuses_edits_in_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("j.db");
    let j = SqliteJournal::open(&db).unwrap();
    j.append("c", &demo_events("c", 3)).unwrap();
    let before = j.read_events("c", 0).unwrap();
    let c = rusqlite::Connection::open(&db).unwrap();
    for sql in ["UPDATE events SET body = '{}'", "DELETE FROM events"] {
        let e = c.execute(sql, []).unwrap_err();
        assert!(e.to_string().contains("append-only"), "{sql}: {e}");
    }
    assert_eq!(j.read_events("c", 0).unwrap(), before);
}

#[test]
fn a_crash_between_packet_and_boundary_reuses_the_packet_and_appends_one_boundary() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("j.db");
    let file = write_conversation(dir.path(), 250);
    let out = bin()
        .arg("--journal")
        .arg(&db)
        .args(["import", "--no-compact", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
    // The process dies right after persisting the packet.
    let out = bin()
        .arg("--journal")
        .arg(&db)
        .arg("compact")
        .env("FOLDLINE_FAULT", "abort-after-packet")
        .output()
        .unwrap();
    assert!(!out.status.success(), "the fault must kill the process");
    let j = SqliteJournal::open(&db).unwrap();
    let packets = j.list_packets("default").unwrap();
    assert_eq!(packets.len(), 1);
    let boundaries = |j: &SqliteJournal| {
        j.read_events("default", 0)
            .unwrap()
            .into_iter()
            .filter(|e| matches!(e.event, foldline_core::event::Event::Boundary(_)))
            .count()
    };
    assert_eq!(boundaries(&j), 0);
    // Restart: the same packet, exactly one boundary. (The crashed holder's lease is
    // the same process id only by chance; a new process is a new holder, so wait it out.)
    let d = Driver::builder(
        Foldline::embedded().unwrap(),
        SqliteJournal::open(&db).unwrap(),
        Extractive,
    )
    .declaration(Declaration::new("assistant", "assistant-compactor"))
    .owner("owner")
    .clock(|| u64::MAX / 2) // past any lease the crashed process held
    .build()
    .unwrap();
    match d.compact_now("default", "owner", false).unwrap() {
        Outcome::Compacted(b) => assert_eq!(b.packet_id, packets[0].id),
        o => panic!("{o:?}"),
    }
    assert_eq!(j.list_packets("default").unwrap().len(), 1);
    assert_eq!(boundaries(&j), 1);
    assert!(d.resolve("default").is_ok());
}

#[test]
fn two_writers_racing_on_one_conversation_never_fork() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(dir.path().join("j.db"));
    {
        let j = SqliteJournal::open(&*db).unwrap();
        let text: String = import::demo_conversation(20)
            .iter()
            .map(|m| format!("{m}\n"))
            .collect();
        let route = foldline_core::turn::Route {
            conversation: "race".into(),
            chat: String::new(),
            sender: String::new(),
        };
        j.append("race", &import::parse(&text, &route, 0).unwrap())
            .unwrap();
    }
    // Source sequences are allocated in one global order, as a real source would.
    let next_seq = Arc::new(std::sync::atomic::AtomicU64::new(100));
    let threads: Vec<_> = (0..2)
        .map(|t| {
            let db = db.clone();
            let next_seq = next_seq.clone();
            std::thread::spawn(move || {
                let d = Driver::builder(
                    Foldline::embedded().unwrap(),
                    SqliteJournal::open(&*db).unwrap(),
                    Extractive,
                )
                .declaration(small_decl())
                .holder(&format!("writer-{t}"))
                .build()
                .unwrap();
                let route = foldline_core::turn::Route {
                    conversation: "race".into(),
                    chat: String::new(),
                    sender: String::new(),
                };
                let mut compacted = 0;
                for _round in 0..12 {
                    let text: String = import::demo_conversation(8)
                        .iter()
                        .skip(1)
                        .map(|m| format!("{m}\n"))
                        .collect();
                    let n = text.lines().count() as u64;
                    let first = next_seq.fetch_add(n, std::sync::atomic::Ordering::SeqCst);
                    let mut evs = import::parse(&text, &route, first).unwrap();
                    for e in &mut evs {
                        if let foldline_core::event::Event::Message(m) = e {
                            m.turn_id = format!("w{t}-{}", m.source_seq);
                        }
                    }
                    d.journal().append("race", &evs).unwrap();
                    match d.on_message("race") {
                        Ok(Outcome::Compacted(_)) => compacted += 1,
                        Ok(_) => {}
                        Err(HostError::Core(e)) if e.code.as_str() == "fork" => {
                            panic!("storage refused a fork: the lease failed")
                        }
                        Err(e) => panic!("{e}"),
                    }
                }
                compacted
            })
        })
        .collect();
    let total: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert!(
        total >= 2,
        "both writers compacted at least once together: {total}"
    );
    let d = Driver::new(
        Foldline::embedded().unwrap(),
        SqliteJournal::open(&*db).unwrap(),
        Extractive,
        small_decl(),
    );
    let r = d.resolve("race").expect("the chain is intact: no fork");
    assert_eq!(r.head.unwrap().length as usize, total);
}

#[test]
fn the_storage_refuses_a_second_boundary_on_one_chain_slot() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("j.db");
    let d = sqlite_driver(&db, small_decl());
    d.journal().append("c", &demo_events("c", 60)).unwrap();
    let b = match d.on_message("c").unwrap() {
        Outcome::Compacted(b) => b,
        o => panic!("{o:?}"),
    };
    let mut twin = (*b).clone();
    twin.id = "boundary:twin".into();
    let e = d
        .journal()
        .append(
            "c",
            &[foldline_core::event::Event::Boundary(Box::new(twin))],
        )
        .unwrap_err();
    assert_eq!(e.code(), "fork");
}

#[test]
fn calls_over_the_fuel_time_or_memory_bound_are_typed_errors() {
    let limits = |bound, memory_bytes| Limits {
        bound,
        memory_bytes,
    };
    let f = Foldline::from_bytes(EMBEDDED_WASM, limits(Bound::Fuel(50_000), 512 << 20)).unwrap();
    let req = br#"{"events":[]}"#;
    let big: String = format!(
        "{{\"text\":\"{}\"}}",
        "Could you please explain this? ".repeat(20_000)
    );
    let e = f.call_raw("trimPrompt", big.as_bytes()).unwrap_err();
    assert_eq!(e.code(), "fuel_exhausted", "{e}");
    // The same budget stops the same call at the same point: reproducible.
    let again = f.call_raw("trimPrompt", big.as_bytes()).unwrap_err();
    assert_eq!(again.to_string(), e.to_string());
    assert!(
        f.call_raw("timeline", req).is_ok(),
        "a failed call harms none after it"
    );

    // A time limit stops a call that runs past it: a select of 50,000 turns
    // takes about 50 ticks here, so a ticker delayed by a loaded machine
    // still stops it.
    let long = select_of_turns(50_000);
    let mut f = Foldline::from_bytes(EMBEDDED_WASM, Limits::default()).unwrap();
    f.call_raw("select", &long)
        .expect("the default limit lets it finish");
    f.set_limits(limits(Bound::Time(Duration::from_millis(1)), 512 << 20))
        .unwrap();
    let e = f.call_raw("select", &long).unwrap_err();
    assert_eq!(e.code(), "time_limit", "{e}");
    assert!(
        f.call_raw("timeline", req).is_ok(),
        "a timed-out call harms none after it"
    );
    // Switched to fuel and back on the same loaded module.
    f.set_limits(limits(Bound::Fuel(50_000), 512 << 20))
        .unwrap();
    let e = f.call_raw("select", &long).unwrap_err();
    assert_eq!(e.code(), "fuel_exhausted", "{e}");
    f.set_limits(Limits::default()).unwrap();
    f.call_raw("select", &long).expect("finishes again");

    let f = Foldline::from_bytes(EMBEDDED_WASM, limits(Bound::default(), 2 << 20)).unwrap();
    assert!(
        f.call_raw("timeline", req).is_ok(),
        "a small call fits 2 MiB"
    );
    let huge = format!("{{\"text\":\"{}\"}}", "x".repeat(8 << 20));
    let e = f.call_raw("trimPrompt", huge.as_bytes()).unwrap_err();
    assert_eq!(e.code(), "memory_limit", "{e}");
}

/// A stateless `select` request of `turns` demo turns.
fn select_of_turns(turns: usize) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "declaration": small_decl(),
        "route": {"conversation": "c", "chat": "", "sender": ""},
        "events": demo_events("c", turns),
    }))
    .unwrap()
}

#[test]
fn an_abi_major_mismatch_is_refused_on_load() {
    // A module exporting foldline_abi_major() = 2 and foldline_abi_minor() = 0.
    let mut m = vec![
        0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7f,
        0x03, 0x03, 0x02, 0x00, 0x00,
    ];
    m.extend([0x07, 0x2b, 0x02, 0x12]);
    m.extend(b"foldline_abi_major");
    m.extend([0x00, 0x00, 0x12]);
    m.extend(b"foldline_abi_minor");
    m.extend([0x00, 0x01]);
    m.extend([
        0x0a, 0x0b, 0x02, 0x04, 0x00, 0x41, 0x02, 0x0b, 0x04, 0x00, 0x41, 0x00, 0x0b,
    ]);
    match Foldline::from_bytes(&m, Limits::default()) {
        Err(
            e @ HostError::AbiMismatch {
                found: 2,
                expected: 1,
            },
        ) => assert_eq!(e.code(), "unsupported_version", "the JS package's code"),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("loaded a module of another ABI major"),
    }
    assert_eq!(
        Foldline::from_bytes(b"not wasm", Limits::default())
            .err()
            .map(|e| e.code().to_owned()),
        Some("load_failed".into())
    );
}

#[test]
fn a_journal_edited_behind_foldlines_back_fails_verify() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("j.db");
    let file = write_conversation(dir.path(), 300);
    assert!(bin()
        .arg("--journal")
        .arg(&db)
        .arg("import")
        .arg(&file)
        .output()
        .unwrap()
        .status
        .success());
    let verify = || {
        let out = bin()
            .arg("--journal")
            .arg(&db)
            .arg("verify")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    assert_eq!(verify().0, Some(0));
    // Someone rewrites a boundary's summary with raw SQL, bypassing the append-only trigger.
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch("DROP TRIGGER events_no_update;")
        .unwrap();
    let n = conn
        .execute(
            "UPDATE events SET body = json_set(body, '$.summary', 'The member agreed to pay 10,000 euros.') WHERE seq = (SELECT MIN(seq) FROM events WHERE type = 'boundary')",
            [],
        )
        .unwrap();
    assert_eq!(n, 1);
    let (code, out) = verify();
    assert_eq!(code, Some(1));
    assert!(out.starts_with("broken: divergent_hash"), "{out}");
}

/// A minimal OpenAI-protocol server on loopback with scripted behaviours.
fn openai_server(script: Vec<&'static str>) -> (String, std::thread::JoinHandle<Vec<bool>>) {
    let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", server.server_addr().to_ip().unwrap());
    let h = std::thread::spawn(move || {
        let mut streamed = Vec::new();
        for step in script {
            let mut req = server.recv().unwrap();
            let mut body = String::new();
            req.as_reader().read_to_string(&mut body).unwrap();
            let v: serde_json::Value = serde_json::from_str(&body).unwrap();
            streamed.push(v["stream"] == true);
            let mk = |s: String| tiny_http::Response::from_string(s);
            // A reasoning model's endpoint: `max_tokens` refused as OpenAI
            // refuses it, then only `max_completion_tokens` taken.
            if step == "refuse-max-tokens" {
                assert!(v.get("max_tokens").is_some(), "{v}");
                let e = r#"{"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter"}}"#;
                req.respond(mk(e.into()).with_status_code(400)).unwrap();
                continue;
            }
            let wants = step.strip_suffix("+completion-tokens");
            if let Some(cap) = wants.and_then(|_| v["max_completion_tokens"].as_u64()) {
                assert!(v.get("max_tokens").is_none(), "{v}");
                assert!(cap > 8_192, "room for reasoning: {v}");
            } else if wants.is_some() {
                panic!("no max_completion_tokens: {v}");
            }
            // A reasoning model counts its reasoning among its completion
            // tokens, far past the summary's cap.
            let usage = match wants {
                Some(_) => {
                    r#"{"prompt_tokens":9,"completion_tokens":1204,"completion_tokens_details":{"reasoning_tokens":1200}}"#
                }
                None => r#"{"prompt_tokens":9,"completion_tokens":4}"#,
            };
            match wants.unwrap_or(step) {
                "stream-ok" => {
                    let s = format!("data: {{\"model\":\"local-1\",\"choices\":[{{\"delta\":{{\"content\":\"A real summary.\"}},\"finish_reason\":\"stop\"}}]}}\n\ndata: {{\"choices\":[],\"usage\":{usage}}}\n\ndata: [DONE]\n\n");
                    req.respond(mk(s)).unwrap();
                }
                // A content filter's stop after some of the summary.
                "content-filter" => {
                    let s = "data: {\"model\":\"local-1\",\"choices\":[{\"delta\":{\"content\":\"The member agreed to\"},\"finish_reason\":\"content_filter\"}]}\n\ndata: [DONE]\n\n";
                    req.respond(mk(s.into())).unwrap();
                }
                "responses-filtered" => {
                    let done = r#"{"model":"resp-1","status":"incomplete","incomplete_details":{"reason":"content_filter"},"output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"The member agreed to","annotations":[]}]}],"usage":{"input_tokens":9,"output_tokens":4}}"#;
                    let s = format!("data: {{\"type\":\"response.output_text.delta\",\"delta\":\"The member agreed to\"}}\n\ndata: {{\"type\":\"response.incomplete\",\"response\":{done}}}\n\n");
                    req.respond(mk(s)).unwrap();
                }
                "drop-before" => req.respond(mk(String::new())).unwrap(),
                "drop-after" => req
                    .respond(mk(
                        "data: {\"choices\":[{\"delta\":{\"content\":\"Partial\"}}]}\n\n".into(),
                    ))
                    .unwrap(),
                "http-429" => req
                    .respond(mk("rate limited".into()).with_status_code(429))
                    .unwrap(),
                "http-400" => req
                    .respond(mk("content policy".into()).with_status_code(400))
                    .unwrap(),
                // The Responses API: `input`, a cap with room for reasoning, nothing stored.
                "responses-stream" | "responses-buffered" => {
                    assert!(v["input"].is_array() && v.get("messages").is_none(), "{v}");
                    assert_eq!(v["store"], false, "{v}");
                    assert!(v["max_output_tokens"].as_u64().unwrap() > 8_192, "{v}");
                    let done = r#"{"model":"resp-1","status":"completed","output":[{"type":"reasoning","summary":[]},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"A responses summary.","annotations":[]}]}],"usage":{"input_tokens":9,"output_tokens":904,"output_tokens_details":{"reasoning_tokens":900}}}"#;
                    let s = if step == "responses-stream" {
                        format!("event: response.created\ndata: {{\"type\":\"response.created\"}}\n\nevent: response.output_text.delta\ndata: {{\"type\":\"response.output_text.delta\",\"delta\":\"A responses \"}}\n\ndata: {{\"type\":\"response.output_text.delta\",\"delta\":\"summary.\"}}\n\ndata: {{\"type\":\"response.completed\",\"response\":{done}}}\n\n")
                    } else {
                        done.to_owned()
                    };
                    req.respond(mk(s)).unwrap();
                }
                "buffered" => {
                    let s = "{\"model\":\"local-1\",\"choices\":[{\"message\":{\"content\":\"Buffered summary.\"},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":3}}";
                    req.respond(mk(s.into())).unwrap();
                }
                _ => unreachable!(),
            }
        }
        streamed
    });
    (url, h)
}

fn driver_with(url: &str, db: &std::path::Path) -> Driver<SqliteJournal, OpenAiModel> {
    let model = OpenAiModel::new(OpenAiOptions::new(url, "local-1", Some("k".into())));
    let d = Driver::new(
        Foldline::embedded().unwrap(),
        SqliteJournal::open(db).unwrap(),
        model,
        small_decl(),
    );
    d.journal().append("c", &demo_events("c", 70)).unwrap();
    d
}

/// The Responses API adapter summarizes from the stream's deltas and its
/// `response.completed`, and a stream that drops before content is replayed
/// once through the buffered call.
#[test]
fn openai_responses_adapter_streams_and_replays_before_content() {
    let dir = tempfile::tempdir().unwrap();
    let (url, h) = openai_server(vec![
        "responses-stream",
        "drop-before",
        "responses-buffered",
    ]);
    let d = Driver::new(
        Foldline::embedded().unwrap(),
        SqliteJournal::open(dir.path().join("a.db")).unwrap(),
        OpenAiResponsesModel::new(OpenAiOptions::new(&url, "resp-1", Some("k".into()))),
        small_decl(),
    );
    for c in ["c", "d"] {
        d.journal().append(c, &demo_events(c, 70)).unwrap();
        match d.on_message(c).unwrap() {
            Outcome::Compacted(b) => {
                assert_eq!(b.summary, "A responses summary.");
                assert_eq!(
                    (b.run.model_id.as_str(), b.run.usage.output_tokens),
                    ("resp-1", 4)
                );
            }
            o => panic!("{c}: {o:?}"),
        }
    }
    assert_eq!(h.join().unwrap(), [true, true, false]);
}

/// A summary a provider's content filter cut short is the provider's
/// refusal, nothing settled: a chat completion that ends
/// `content_filter`, a response `incomplete` for it. Before, the part
/// before the cut settled as the whole summary, and what the frozen turns
/// said after it was lost with them.
#[test]
fn a_summary_a_content_filter_cut_short_is_refused_not_settled() {
    let dir = tempfile::tempdir().unwrap();
    let (url, h) = openai_server(vec!["content-filter", "responses-filtered"]);
    let chat = driver_with(&url, &dir.path().join("a.db"));
    let responses = Driver::new(
        Foldline::embedded().unwrap(),
        SqliteJournal::open(dir.path().join("b.db")).unwrap(),
        OpenAiResponsesModel::new(OpenAiOptions::new(&url, "resp-1", Some("k".into()))),
        small_decl(),
    );
    responses
        .journal()
        .append("c", &demo_events("c", 70))
        .unwrap();
    for outcome in [chat.on_message("c"), responses.on_message("c")] {
        match outcome.unwrap() {
            Outcome::Failed(f) => {
                assert!(f.audit_reason.contains("content_filter"), "{f:?}");
            }
            o => panic!("{o:?}"),
        }
    }
    for d in [chat.journal(), responses.journal()] {
        let stored = d.read_events("c", 0).unwrap();
        assert!(!stored
            .iter()
            .any(|s| matches!(s.event, foldline_core::event::Event::Boundary(_))));
    }
    assert_eq!(
        h.join().unwrap(),
        [true, true],
        "both streamed, neither replayed"
    );
}

/// An endpoint that refuses `max_tokens` (OpenAI's reasoning models) gets
/// the request again with `max_completion_tokens`, with room for reasoning,
/// and every later request with it; any other `400` is the model's failure.
/// The reasoning its usage counts among the completion tokens (1,200 here)
/// is not the summary's: every such summary was refused `summary_too_long`
/// against the cap of the summary alone.
#[test]
fn openai_adapter_sends_max_completion_tokens_where_max_tokens_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (url, h) = openai_server(vec![
        "refuse-max-tokens",
        "stream-ok+completion-tokens",
        "stream-ok+completion-tokens",
    ]);
    let model = OpenAiModel::new(OpenAiOptions::new(&url, "reasoning-1", Some("k".into())));
    let d = Driver::new(
        Foldline::embedded().unwrap(),
        SqliteJournal::open(dir.path().join("a.db")).unwrap(),
        model,
        small_decl(),
    );
    for c in ["c", "d"] {
        d.journal().append(c, &demo_events(c, 70)).unwrap();
        match d.on_message(c).unwrap() {
            // The summary's own tokens: its reasoning left out.
            Outcome::Compacted(b) => assert_eq!(
                (b.summary.as_str(), b.run.usage.output_tokens),
                ("A real summary.", 4)
            ),
            o => panic!("{c}: {o:?}"),
        }
    }
    assert_eq!(h.join().unwrap(), [true, true, true]);
    // A 400 for anything else is not sent again.
    let (url, h) = openai_server(vec!["http-400"]);
    let d = driver_with(&url, &dir.path().join("b.db"));
    assert!(matches!(d.on_message("c").unwrap(), Outcome::Failed(_)));
    assert_eq!(h.join().unwrap(), [true]);
}

#[test]
fn openai_adapter_streams_and_replays_only_before_content() {
    let dir = tempfile::tempdir().unwrap();
    // A clean stream settles.
    let (url, h) = openai_server(vec!["stream-ok"]);
    let d = driver_with(&url, &dir.path().join("a.db"));
    match d.on_message("c").unwrap() {
        Outcome::Compacted(b) => {
            assert_eq!(b.summary, "A real summary.");
            assert_eq!(b.run.model_id, "local-1");
            assert_eq!(b.run.usage.output_tokens, 4);
        }
        o => panic!("{o:?}"),
    }
    assert_eq!(h.join().unwrap(), [true]);
    // Dropped before content: replayed once through the buffered call.
    let (url, h) = openai_server(vec!["drop-before", "buffered"]);
    let d = driver_with(&url, &dir.path().join("b.db"));
    match d.on_message("c").unwrap() {
        Outcome::Compacted(b) => assert_eq!(b.summary, "Buffered summary."),
        o => panic!("{o:?}"),
    }
    assert_eq!(h.join().unwrap(), [true, false]);
    // Dropped after content: never replayed; a generic notice, the reason audited.
    let (url, h) = openai_server(vec!["drop-after"]);
    let d = driver_with(&url, &dir.path().join("c.db"));
    match d.on_message("c").unwrap() {
        Outcome::Failed(r) => {
            assert_eq!(r.notice, "The chat could not be compacted.");
            assert!(
                r.audit_reason.starts_with("stream_dropped"),
                "{}",
                r.audit_reason
            );
        }
        o => panic!("{o:?}"),
    }
    assert_eq!(h.join().unwrap(), [true]);
    let failed = d
        .journal()
        .read_events("c", 0)
        .unwrap()
        .into_iter()
        .filter(|e| matches!(e.event, foldline_core::event::Event::CompactionFailed(_)))
        .count();
    assert_eq!(failed, 1, "the audit record is committed");
}

#[test]
fn host_context_matches_the_native_core_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let d = Driver::new(
        Foldline::embedded().unwrap(),
        SqliteJournal::open(dir.path().join("j.db")).unwrap(),
        Extractive,
        small_decl(),
    );
    let text: String = import::demo_conversation(80)
        .iter()
        .map(|m| format!("{m}\n"))
        .collect();
    let route = foldline_core::turn::Route {
        conversation: "c".into(),
        chat: String::new(),
        sender: String::new(),
    };
    for e in import::parse(&text, &route, 0).unwrap() {
        d.journal().append("c", &[e]).unwrap();
        d.on_message("c").unwrap();
    }
    let wasm = d.context("c", ContextOptions::default()).unwrap();
    let events = stored(&d);
    let res = d.resolve("c").unwrap();
    let native = foldline_core::select(&foldline_core::SelectRequest {
        declaration: small_decl(),
        route,
        frontier: res.frontier,
        head: res.head,
        amendment: res.amendment,
        events,
        prompt: None,
        prompt_sender: None,
        format: Default::default(),
        limit: None,
        render: true,
        member: None,
        carried: None,
    })
    .unwrap();
    assert_eq!(
        foldline_core::canonical::encode(&wasm),
        foldline_core::canonical::encode(&native)
    );
}

/// Every event of conversation `c` in the driver's journal.
fn stored(d: &Driver<SqliteJournal, Extractive>) -> Vec<foldline_core::event::Event> {
    let read = d.journal().read_events("c", 0).unwrap();
    read.into_iter().map(|s| s.event).collect()
}

/// Ordinary alternating turns of `size` characters, sources `from..=to`.
fn ordinary(conv: &str, from: u64, to: u64, size: usize) -> Vec<foldline_core::event::Event> {
    use foldline_core::turn::Role;
    (from..=to)
        .map(|s| {
            let role = if s % 2 == 1 {
                Role::User
            } else {
                Role::Assistant
            };
            let text = format!("message {s} about the plan for week {} ", s % 7)
                .chars()
                .chain(std::iter::repeat('x'))
                .take(size)
                .collect();
            support::fixtures::text_message(conv, s, role, text)
        })
        .collect()
}

#[test]
fn overlapping_calls_on_one_driver_compact_one_head_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = Arc::new(Driver::new(
        Foldline::embedded().unwrap(),
        SqliteJournal::open(dir.path().join("j.db")).unwrap(),
        Extractive,
        small_decl(),
    ));
    d.journal().append("c", &ordinary("c", 1, 60, 500)).unwrap();
    let outcomes: Vec<Outcome> = (0..4)
        .map(|_| {
            let d = d.clone();
            std::thread::spawn(move || d.on_message("c").unwrap())
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|t| t.join().unwrap())
        .collect();
    let compacted = outcomes
        .iter()
        .filter(|o| matches!(o, Outcome::Compacted(_)))
        .count();
    // The first call compacts; the others are Busy or find nothing to do.
    assert_eq!(compacted, 1, "{outcomes:?}");
    let r = d.resolve("c").expect("no fork");
    assert_eq!(
        r.accepted.len(),
        r.head.map(|h| h.length).unwrap_or(0) as usize
    );
}

#[test]
fn a_bad_event_is_refused_at_append_and_nothing_is_written() {
    let j = SqliteJournal::in_memory().unwrap();
    let mut evs = ordinary("c", 1, 2, 50);
    if let foldline_core::event::Event::Message(m) = &mut evs[1] {
        m.content_hash = Some("sha256:forged".into());
    }
    let err = j.append("c", &evs).unwrap_err();
    assert_eq!(err.code(), "invalid_request");
    assert!(err.to_string().contains("events[1]"), "{err}");
    let other = ordinary("elsewhere", 1, 1, 50);
    assert_eq!(j.append("c", &other).unwrap_err().code(), "wrong_route");
    assert!(j.read_events("c", 0).unwrap().is_empty());
    // Compare-and-append: a batch planned at position 0 after the head moved is refused.
    j.append("c", &ordinary("c", 1, 1, 50)).unwrap();
    let e = j
        .append_at("c", &ordinary("c", 2, 2, 50), 0, None)
        .unwrap_err();
    assert_eq!(e.code(), "conflict");
    assert_eq!(
        j.append_at("c", &ordinary("c", 2, 2, 50), 1, None).unwrap(),
        2
    );
}

/// Seed 002's token budget with another window.
fn tokens_window(w: u64) -> Budget {
    let mut b = Budget::default_tokens();
    if let Budget::Tokens { window, .. } = &mut b {
        *window = w;
    }
    b
}

#[test]
fn every_default_compacts_a_long_conversation_through_the_driver() {
    for (name, budget, size, n) in [
        ("chars 80k/40k (seed 000)", Budget::default(), 2_000, 120u64),
        ("tokens 8192 (seed 002)", Budget::default_tokens(), 300, 120),
        ("tokens 128k", tokens_window(128_000), 4_000, 120),
    ] {
        let decl = budget_decl(budget);
        let d = Driver::new(
            Foldline::embedded().unwrap(),
            SqliteJournal::in_memory().unwrap(),
            Extractive,
            decl,
        );
        let mut compacted = 0;
        for s in 1..=n {
            d.journal().append("c", &ordinary("c", s, s, size)).unwrap();
            match d.on_message("c").unwrap() {
                Outcome::Compacted(_) => compacted += 1,
                Outcome::Refused(e) => panic!("{name}, message {s}: {e:?}"),
                Outcome::Failed(r) => panic!("{name}, message {s}: {r:?}"),
                _ => {}
            }
        }
        assert!(compacted >= 1, "{name}: compacted");
        let sel = d.context("c", ContextOptions::default()).unwrap();
        assert!(
            sel.manifest.sizes.total <= sel.manifest.limit,
            "{name}: fits"
        );
        assert_eq!(
            sel.manifest.included.last().map(String::as_str),
            Some(format!("t{n}").as_str()),
            "{name}: newest turn"
        );
        assert!(
            sel.manifest.boundary_id.is_some(),
            "{name}: a summary stands in for the prefix"
        );
    }
}

#[test]
fn a_closed_stdout_ends_the_program_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("j.db");
    let file = write_conversation(dir.path(), 60);
    let ok = bin()
        .args([
            "--journal",
            db.to_str().unwrap(),
            "import",
            file.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(ok.status.success());
    for args in [vec!["context", "--format", "openai"], vec!["timeline"]] {
        // The reader hangs up before anything is written, like `| head -0`.
        let mut child = bin()
            .args(["--journal", db.to_str().unwrap()])
            .args(&args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{args:?}: {:?} {stderr}", out.status);
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    // `--messages` prints the provider's message array alone.
    let m = bin()
        .args([
            "--journal",
            db.to_str().unwrap(),
            "context",
            "--format",
            "openai",
            "--messages",
        ])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&m.stdout).unwrap();
    assert!(v.as_array().is_some_and(|a| !a.is_empty()), "{v}");
}

#[test]
fn provider_failures_are_typed_in_the_audit_and_not_replayed() {
    let dir = tempfile::tempdir().unwrap();
    for (step, failure, file) in [
        ("http-429", "budgetStop", "r.db"),
        ("http-400", "providerRefusal", "s.db"),
    ] {
        // One request only: a typed failure is not a dropped stream to replay.
        let (url, h) = openai_server(vec![step]);
        let d = driver_with(&url, &dir.path().join(file));
        match d.on_message("c").unwrap() {
            Outcome::Failed(r) => {
                assert_eq!(r.notice, "The chat could not be compacted.");
                assert_eq!(
                    serde_json::to_value(r.failure).unwrap(),
                    serde_json::json!(failure),
                    "{}",
                    r.audit_reason
                );
            }
            o => panic!("{o:?}"),
        }
        assert_eq!(h.join().unwrap(), [true]);
    }
}

#[test]
fn the_reciprocal_declarations_are_checked_by_default() {
    let driver = |compactor: Option<Declaration>| {
        let b = Driver::builder(
            Foldline::embedded().unwrap(),
            SqliteJournal::in_memory().unwrap(),
            Extractive,
        )
        .declaration(small_decl());
        match compactor {
            Some(c) => b.compactor(c),
            None => b,
        }
        .build()
        .unwrap()
    };
    let d = driver(None);
    d.journal().append("c", &ordinary("c", 1, 3, 50)).unwrap();
    // Derived from the target: they agree.
    d.resolve("c").unwrap();
    // A compactor declaration that disagrees fails closed.
    let mut other = small_decl().reciprocal();
    other.privacy.admit_sensitive = true;
    let d = driver(Some(other));
    d.journal().append("c", &ordinary("c", 1, 3, 50)).unwrap();
    match d.resolve("c") {
        Err(HostError::Core(e)) => {
            assert_eq!(e.code.as_str(), "stale_declaration");
            assert_eq!(e.ids, vec!["privacy".to_owned()]);
        }
        o => panic!("{o:?}"),
    }
}

/// The extractive summarizer, counting its calls; with `true`, every stream
/// drops before any content (an untyped failure: a reset connection).
struct Counting(std::sync::atomic::AtomicUsize, bool);

impl foldline_wasmtime::model::Model for Counting {
    fn stream(
        &self,
        p: &foldline_core::packet::Packet,
        sink: &mut dyn FnMut(foldline_wasmtime::model::StreamChunk),
    ) -> Result<(), foldline_wasmtime::model::ModelError> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if self.1 {
            return Err(foldline_wasmtime::model::ModelError::new(
                foldline_core::stream::FailureKind::Other,
                "connection reset",
            ));
        }
        Extractive.stream(p, sink)
    }
    fn complete(
        &self,
        p: &foldline_core::packet::Packet,
    ) -> Result<foldline_wasmtime::model::ModelResult, foldline_wasmtime::model::ModelError> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Extractive.complete(p)
    }
}

#[test]
fn a_prepared_warm_candidate_is_used_when_compaction_is_due() {
    warm_candidate(false, 1);
}

/// The loop's replay rule (`stream::replay_buffered`) for warm candidates
/// too: a stream that drops before any content with an untyped failure is
/// replayed once, buffered, and the candidate is used (as in the JS driver).
#[test]
fn a_warm_candidate_whose_stream_drops_before_content_is_replayed_once() {
    warm_candidate(true, 2);
}

/// Messages of conversation `c` until a check answers `warm` (at most 200):
/// how many were appended, and the candidate's packet id.
fn until_warm<M: foldline_wasmtime::model::Model>(
    d: &Driver<SqliteJournal, M>,
) -> (u64, Option<String>) {
    for s in 1..200 {
        d.journal().append("c", &ordinary("c", s, s, 300)).unwrap();
        if let Outcome::Warm(id) = d.on_message("c").unwrap() {
            return (s, id);
        }
    }
    panic!("never warm");
}

/// A warm candidate through the driver: prepared (`summaries` model calls)
/// off the critical path and used when compaction is due.
fn warm_candidate(drop_before_content: bool, summaries: usize) {
    let decl = budget_decl(Budget::default_tokens());
    let d = Driver::new(
        Foldline::embedded().unwrap(),
        SqliteJournal::in_memory().unwrap(),
        Counting(std::sync::atomic::AtomicUsize::new(0), drop_before_content),
        decl,
    );
    let (mut s, warm_id) = until_warm(&d);
    let warm_id = warm_id.expect("the first warm message builds the candidate");
    assert!(
        d.journal().get_packet("c", &warm_id).unwrap().is_some(),
        "persisted"
    );
    // Off the critical path (a server's background task; here, in between).
    assert!(d.prepare_warm("c").unwrap());
    let calls = d.model().0.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(calls, summaries);
    let b = loop {
        s += 1;
        d.journal().append("c", &ordinary("c", s, s, 300)).unwrap();
        if let Outcome::Compacted(b) = d.on_message("c").unwrap() {
            break b;
        }
        assert!(s < 300, "never compacted");
    };
    assert_eq!(
        b.packet_id, warm_id,
        "the warm candidate became the boundary"
    );
    assert_eq!(
        d.model().0.load(std::sync::atomic::Ordering::SeqCst),
        calls,
        "no model call when due"
    );
    d.resolve("c").expect("the chain verifies");
}

/// A preparation that fails (here the provider refuses) leaves the
/// candidate unprepared and writes nothing: no audit record, as the core's
/// `prepareWarm` vectors say; the compaction due later calls the model itself.
#[test]
fn a_failed_warm_preparation_writes_nothing() {
    use foldline_core::stream::FailureKind;
    let refusing = std::sync::atomic::AtomicBool::new(true);
    let model = foldline_wasmtime::model::model_fn(move |_p| {
        if refusing.swap(false, std::sync::atomic::Ordering::SeqCst) {
            return Err(foldline_wasmtime::model::ModelError::new(
                FailureKind::ProviderRefusal,
                "no",
            ));
        }
        Ok("The member planned a trip; dates and budget were agreed.".into())
    });
    let d = Driver::new(
        Foldline::embedded().unwrap(),
        SqliteJournal::in_memory().unwrap(),
        model,
        budget_decl(Budget::default_tokens()),
    );
    until_warm(&d);
    let before = d.journal().read_events("c", 0).unwrap().len();
    assert!(!d.prepare_warm("c").unwrap(), "refused: not prepared");
    assert_eq!(d.journal().read_events("c", 0).unwrap().len(), before);
    // Still held and unprepared: prepared on the next try.
    assert!(d.prepare_warm("c").unwrap());
}

#[test]
fn an_interrupted_manual_task_ends_as_failed() {
    use foldline_core::event::{Event, TaskEvent, TaskState};
    let d = Driver::new(
        Foldline::embedded().unwrap(),
        SqliteJournal::in_memory().unwrap(),
        Extractive,
        small_decl(),
    );
    d.journal().append("c", &ordinary("c", 1, 3, 50)).unwrap();
    d.journal()
        .append(
            "c",
            &[Event::CompactionTask(TaskEvent {
                task_id: "crashed".into(),
                state: TaskState::Requested,
                actor: "owner".into(),
                head_seq: 3,
                boundary_id: None,
            })],
        )
        .unwrap();
    d.on_message("c").unwrap();
    let t = d.timeline("c").unwrap();
    let divider = t
        .items
        .iter()
        .find(|i| matches!(i, foldline_core::timeline::TimelineItem::Divider { .. }))
        .unwrap();
    assert!(matches!(
        divider,
        foldline_core::timeline::TimelineItem::Divider {
            state: foldline_core::timeline::DividerState::Failed,
            ..
        }
    ));
}

#[test]
fn the_writer_lease_fences_a_stale_holder() {
    let j = SqliteJournal::in_memory().unwrap();
    let a = j.acquire_lease("c", "a", 1_000, 100).unwrap().unwrap();
    assert_eq!(j.acquire_lease("c", "b", 1_050, 100).unwrap(), None);
    // The same live holder renews under its token.
    assert_eq!(j.acquire_lease("c", "a", 1_050, 100).unwrap(), Some(a));
    // Lapsed: a new grant gets a newer token, and the old one is refused.
    let b = j.acquire_lease("c", "b", 1_200, 100).unwrap().unwrap();
    assert!(b > a);
    let e = j
        .append_at("c", &ordinary("c", 1, 1, 50), 0, Some(a))
        .unwrap_err();
    assert_eq!(e.code(), "lease_lost");
    assert!(j.read_events("c", 0).unwrap().is_empty(), "nothing written");
    assert_eq!(
        j.append_at("c", &ordinary("c", 1, 1, 50), 0, Some(b))
            .unwrap(),
        1
    );
    // A release keeps the counter: the next grant is newer still.
    j.release_lease("c", "b").unwrap();
    let c = j.acquire_lease("c", "a", 1_250, 100).unwrap().unwrap();
    assert!(c > b);
}

/// The wall clock of the fencing tests: set by the test.
static CLOCK: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1_000_000);
fn test_clock() -> u64 {
    CLOCK.load(std::sync::atomic::Ordering::SeqCst)
}

/// The extractive summarizer, but only once `gate` opens; it says when it started.
struct Gated {
    started: std::sync::mpsc::SyncSender<()>,
    gate: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
}

impl foldline_wasmtime::model::Model for Gated {
    fn stream(
        &self,
        p: &foldline_core::packet::Packet,
        sink: &mut dyn FnMut(foldline_wasmtime::model::StreamChunk),
    ) -> Result<(), foldline_wasmtime::model::ModelError> {
        let _ = self.started.try_send(());
        let _ = self.gate.lock().unwrap().recv();
        Extractive.stream(p, sink)
    }
    fn complete(
        &self,
        p: &foldline_core::packet::Packet,
    ) -> Result<foldline_wasmtime::model::ModelResult, foldline_wasmtime::model::ModelError> {
        Extractive.complete(p)
    }
}

fn gated_driver(
    db: &std::path::Path,
    holder: &str,
    adjust: impl FnOnce(DriverBuilder<SqliteJournal, Gated>) -> DriverBuilder<SqliteJournal, Gated>,
) -> (
    Driver<SqliteJournal, Gated>,
    std::sync::mpsc::Receiver<()>,
    std::sync::mpsc::Sender<()>,
) {
    let (started_tx, started) = std::sync::mpsc::sync_channel(1);
    let (open, gate) = std::sync::mpsc::channel();
    let d = adjust(
        Driver::builder(
            Foldline::embedded().unwrap(),
            SqliteJournal::open(db).unwrap(),
            Gated {
                started: started_tx,
                gate: std::sync::Mutex::new(gate),
            },
        )
        .declaration(small_decl())
        .holder(holder)
        .clock(test_clock),
    )
    .build()
    .unwrap();
    (d, started, open)
}

/// Driver `a` of `db` (its lease `lease_ms`) compacting turns 1-60 of
/// conversation `c` on a thread, held in its model call until a message is
/// sent on the sender; the thread answers the outcome.
fn compacting_in_the_model(
    db: &std::path::Path,
    lease_ms: u64,
) -> (
    Arc<Driver<SqliteJournal, Gated>>,
    std::thread::JoinHandle<Outcome>,
    std::sync::mpsc::Sender<()>,
) {
    let (a, started, open) = gated_driver(db, "a", |b| b.lease_ms(lease_ms));
    a.journal().append("c", &ordinary("c", 1, 60, 500)).unwrap();
    let a = Arc::new(a);
    let run = {
        let a = a.clone();
        std::thread::spawn(move || a.on_message("c").unwrap())
    };
    started.recv().unwrap();
    (a, run, open)
}

#[test]
fn a_long_model_call_keeps_the_lease_and_a_stale_holder_cannot_append() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("j.db");
    // Renewal: a 300 ms lease, a model call of ~1 s in real time, the
    // clock moving with it; the other writer finds the lease still held.
    let (_a, run, open) = compacting_in_the_model(&db, 300);
    for _ in 0..10 {
        std::thread::sleep(std::time::Duration::from_millis(100));
        CLOCK.fetch_add(100, std::sync::atomic::Ordering::SeqCst);
    }
    let other = SqliteJournal::open(&db).unwrap();
    assert_eq!(
        other.acquire_lease("c", "b", test_clock(), 60_000).unwrap(),
        None,
        "renewed during the model call"
    );
    open.send(()).unwrap();
    assert!(matches!(run.join().unwrap(), Outcome::Compacted(_)));

    // Fencing: the holder's lease lapses without renewal (a long time to
    // live, so the renewal is not due yet, and the clock jumps past it);
    // another writer takes the lease; the stale holder's append is refused.
    let (a, started, open) = gated_driver(&db, "a", |b| b.lease_ms(60_000));
    a.journal()
        .append("c", &ordinary("c", 61, 120, 500))
        .unwrap();
    let a = Arc::new(a);
    let run = {
        let a = a.clone();
        std::thread::spawn(move || a.on_message("c"))
    };
    started.recv().unwrap();
    CLOCK.fetch_add(120_000, std::sync::atomic::Ordering::SeqCst);
    assert!(other
        .acquire_lease("c", "b", test_clock(), 60_000)
        .unwrap()
        .is_some());
    open.send(()).unwrap();
    let e = run.join().unwrap().unwrap_err();
    assert_eq!(e.code(), "lease_lost", "{e}");
    let boundaries = other
        .read_events("c", 0)
        .unwrap()
        .iter()
        .filter(|s| matches!(s.event, foldline_core::event::Event::Boundary(_)))
        .count();
    assert_eq!(boundaries, 1, "the stale holder wrote nothing");
}

fn wall_clock() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[test]
fn a_hanging_model_lets_the_lease_lapse_after_its_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("j.db");
    // Real time here: the lease (300 ms) is renewed only until the model's
    // deadline (400 ms); the model answers after ~1.5 s.
    let (a, started, open) = gated_driver(&db, "a", |b| {
        b.clock(wall_clock).lease_ms(300).model_timeout_ms(400)
    });
    a.journal().append("c", &ordinary("c", 1, 60, 500)).unwrap();
    let a = Arc::new(a);
    let run = {
        let a = a.clone();
        std::thread::spawn(move || a.on_message("c"))
    };
    started.recv().unwrap();
    let other = SqliteJournal::open(&db).unwrap();
    let now = wall_clock;
    let took = std::time::Instant::now();
    while other
        .acquire_lease("c", "b", now(), 60_000)
        .unwrap()
        .is_none()
    {
        assert!(
            took.elapsed() < std::time::Duration::from_secs(5),
            "the lease never lapsed"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    open.send(()).unwrap();
    assert_eq!(run.join().unwrap().unwrap_err().code(), "lease_lost");
}

#[test]
fn the_offline_summary_covers_the_whole_range_and_keeps_old_facts() {
    use foldline_core::event::Event;
    let d = Driver::new(
        Foldline::embedded().unwrap(),
        SqliteJournal::in_memory().unwrap(),
        Extractive,
        small_decl(),
    );
    // Filler turns, with three facts: one in the first turn, one near the
    // end of the first folded range, one much later.
    let filler = "we chatted about this and that for a while, nothing in particular really";
    let text = |i: u64| match i {
        1 => "My sister Zanzibar moved to Lisbon on 4471 Rua Augusta.".to_owned(),
        40 => "We decided the launch date is March 9902, final.".to_owned(),
        160 => "Remember the code word Quixote for the vault.".to_owned(),
        _ => format!("turn {i}: {filler}. {filler}. {filler}. {filler}."),
    };
    let mut summaries = Vec::new();
    for i in 1..=400u64 {
        let mut e = ordinary("c", i, i, 10);
        if let Event::Message(m) = &mut e[0] {
            m.parts = vec![foldline_core::turn::Part::Text { text: text(i) }];
        }
        d.journal().append("c", &e).unwrap();
        if let Outcome::Compacted(b) = d.on_message("c").unwrap() {
            assert!(b.summary.chars().count() <= 1_500);
            summaries.push(b.summary.clone());
        }
    }
    assert!(summaries.len() >= 4, "{}", summaries.len());
    // The first summary keeps the first turn's facts and the last ones it folded.
    assert!(
        summaries[0].contains("Zanzibar") && summaries[0].contains("4471"),
        "{}",
        summaries[0]
    );
    assert!(summaries[0].contains("9902"), "{}", summaries[0]);
    // Later summaries carry old facts forward instead of decaying them.
    let last = summaries.last().unwrap();
    for fact in ["Zanzibar", "9902", "Quixote"] {
        assert!(last.contains(fact), "{fact} lost: {last}");
    }
    // Who said it.
    assert!(
        last.lines()
            .all(|l| l.starts_with("user: ") || l.starts_with("assistant: ")),
        "{last}"
    );
}

#[test]
fn one_huge_request_does_not_keep_its_memory_and_the_next_answer_is_the_same() {
    let f = Foldline::embedded().unwrap();
    let small =
        br#"{"text":"Basically, I think that the hotel is really quite near the station."}"#;
    let before = f.call_raw("trimPrompt", small).unwrap();
    let kept = f.memory_bytes();
    assert!(kept > 0 && kept <= MEMORY_RESET_BYTES, "{kept}");
    // A 4 MB paste grows the instance's memory well past the bound…
    let huge = format!(
        "{{\"text\":\"{}\"}}",
        "Basically, I think that the hotel is really quite near the station. ".repeat(60_000)
    );
    assert!(f.call_raw("trimPrompt", huge.as_bytes()).is_ok());
    // …and that instance is not the one kept for the next call.
    assert!(f.memory_bytes() <= kept, "{} bytes kept", f.memory_bytes());
    assert_eq!(f.call_raw("trimPrompt", small).unwrap(), before);
}

#[test]
fn held_events_change_no_answer_across_compactions_and_a_replaced_instance() {
    let driver = |hold: bool| {
        Driver::builder(
            Foldline::embedded().unwrap(),
            SqliteJournal::in_memory().unwrap(),
            Extractive,
        )
        .declaration(small_decl())
        .hold_events(hold)
        .build()
        .unwrap()
    };
    let (held, plain) = (driver(true), driver(false));
    assert!(held.foldline().holds_events(), "the artifact holds events");
    let huge = format!(
        "{{\"text\":\"{}\"}}",
        "Basically, I think that the hotel is really quite near the station. ".repeat(60_000)
    );
    let mut compacted = 0;
    for s in 1..=160u64 {
        let turn = ordinary("c", s, s, 700);
        held.journal().append("c", &turn).unwrap();
        plain.journal().append("c", &turn).unwrap();
        let (a, b) = (
            held.on_message("c").unwrap(),
            plain.on_message("c").unwrap(),
        );
        assert_eq!(format!("{a:?}"), format!("{b:?}"), "message {s}");
        compacted += usize::from(matches!(a, Outcome::Compacted(_)));
        let (a, b) = (
            held.context("c", ContextOptions::default()).unwrap(),
            plain.context("c", ContextOptions::default()).unwrap(),
        );
        assert!(
            foldline_core::canonical::encode(&a) == foldline_core::canonical::encode(&b),
            "context after message {s}"
        );
        if s % 50 == 0 {
            // The instance that holds the events is replaced (a call grew
            // its memory past the bound): the next call sends them again.
            held.foldline()
                .call_raw("trimPrompt", huge.as_bytes())
                .unwrap();
        }
    }
    assert!(compacted >= 3, "{compacted} compactions");
    let journal = |d| foldline_core::canonical::encode(&stored(d));
    assert!(journal(&held) == journal(&plain), "the same journal");
}

#[test]
fn a_list_rebuilt_under_another_writers_boundary_is_held_again() {
    // One driver holds a conversation's window; another writer compacts it
    // and more turns arrive before the first reads again, so its rebuilt
    // list is longer than what it held but starts elsewhere.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.db");
    let driver = |hold: bool| {
        Driver::builder(
            Foldline::embedded().unwrap(),
            SqliteJournal::open(&path).unwrap(),
            Extractive,
        )
        .declaration(small_decl())
        .hold_events(hold)
        .build()
        .unwrap()
    };
    let (held, writer, plain) = (driver(true), driver(false), driver(false));
    let context = |d: &Driver<SqliteJournal, Extractive>| {
        foldline_core::canonical::encode(&d.context("c", ContextOptions::default()).unwrap())
    };
    writer
        .journal()
        .append("c", &ordinary("c", 1, 26, 700))
        .unwrap();
    writer.on_message("c").unwrap();
    assert!(context(&held) == context(&plain), "before the boundary");
    writer
        .journal()
        .append("c", &ordinary("c", 27, 32, 700))
        .unwrap();
    assert!(matches!(
        writer.on_message("c").unwrap(),
        Outcome::Compacted(_)
    ));
    writer
        .journal()
        .append("c", &ordinary("c", 33, 70, 700))
        .unwrap();
    assert!(context(&held) == context(&plain), "after it");
}

#[test]
fn the_demo_names_the_budgets_unit() {
    let dir = tempfile::tempdir().unwrap();
    let decl = dir.path().join("tokens.json");
    let d = budget_decl(Budget::default_tokens());
    std::fs::write(&decl, serde_json::to_string(&d).unwrap()).unwrap();
    let out = bin()
        .arg("--journal")
        .arg(dir.path().join("j.db"))
        .arg("--declaration")
        .arg(&decl)
        .arg("demo")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let line = text
        .lines()
        .find(|l| l.contains("model-bound context now"))
        .unwrap_or_default();
    assert!(line.contains(" tokens of the 3328 budget"), "{line}");
}

/// A value's canonical JSON text, to compare (and print) whole.
fn json<T: foldline_core::canonical::Encode>(v: &T) -> String {
    String::from_utf8(foldline_core::canonical::encode(v)).unwrap()
}

/// A cold driver resolves a chain longer than one resolve step (64
/// boundaries) in steps, each from the head the last one verified, so its
/// memory does not grow with the chain; the answer is the one-shot
/// resolve's, amendment of a covered turn included, and so are the context
/// and the timeline.
#[test]
fn a_long_chain_read_cold_resolves_in_steps_as_it_does_at_once() {
    use foldline_core::event::{Correction, Event};
    use foldline_core::turn::Part;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("j.db");
    let d = sqlite_driver(&db, small_decl());
    let fix = |turn: &str, seq: u64| {
        Event::Correction(Correction {
            turn_id: turn.into(),
            correction_seq: seq,
            parts: vec![Part::Text {
                text: format!("corrected ({seq}): the budget is 1,200 euros."),
            }],
            tokens: None,
        })
    };
    // Thirty more turns, then the automatic check: whether it compacted.
    let mut next = 1;
    let mut thirty_more = |d: &Driver<SqliteJournal, Extractive>| {
        d.journal()
            .append("c", &ordinary("c", next, next + 29, 500))
            .unwrap();
        next += 30;
        matches!(d.on_message("c").unwrap(), Outcome::Compacted(_))
    };
    let mut boundaries = 0;
    while boundaries < 150 {
        if thirty_more(&d) {
            boundaries += 1;
            if boundaries == 100 {
                // A correction a later boundary absorbs, of a turn the
                // first step's boundaries cover.
                d.journal().append("c", &[fix("t40", 1)]).unwrap();
            }
        }
    }
    // And one no boundary has absorbed yet: the answer's amendment.
    d.journal().append("c", &[fix("t70", 2)]).unwrap();
    // The core's one-shot resolve of everything the journal holds.
    let one_shot = |decl: &Declaration| {
        foldline_core::resolve::resolve(&foldline_core::resolve::ResolveRequest {
            declaration: decl.clone(),
            compactor: Some(decl.reciprocal()),
            route: d.route("c"),
            events: stored(&d),
            packets: d.journal().list_packets("c").unwrap(),
            trusted: Vec::new(),
            verified: None,
        })
    };
    let events = stored(&d);
    let at_once = one_shot(&small_decl()).unwrap();
    assert!(
        at_once.accepted.len() > 2 * 64,
        "{}",
        at_once.accepted.len()
    );
    assert!(
        at_once.amendment.is_some(),
        "the correction amends covered history"
    );
    let cold = sqlite_driver(&db, small_decl());
    assert_eq!(json(&cold.resolve("c").unwrap()), json(&at_once));
    let native = foldline_core::select(&foldline_core::SelectRequest {
        declaration: small_decl(),
        route: d.route("c"),
        frontier: at_once.frontier.clone(),
        head: at_once.head.clone(),
        amendment: at_once.amendment.clone(),
        events: events.clone(),
        prompt: None,
        prompt_sender: None,
        format: Default::default(),
        limit: None,
        render: true,
        member: None,
        carried: at_once.carried.clone(),
    })
    .unwrap();
    assert_eq!(
        json(&cold.context("c", ContextOptions::default()).unwrap()),
        json(&native)
    );
    assert_eq!(
        serde_json::to_value(cold.timeline("c").unwrap()).unwrap(),
        serde_json::to_value(d.timeline("c").unwrap()).unwrap()
    );
    // A chain that fails in its last step fails every time: the steps
    // before it never stand in for the whole chain.
    let last = at_once.head.unwrap().boundary_id;
    let packet = events
        .iter()
        .find_map(|e| match e {
            Event::Boundary(b) if b.id == last => Some(b.packet_id.clone()),
            _ => None,
        })
        .unwrap();
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute("DELETE FROM packets WHERE id = ?1", [&packet])
        .unwrap();
    let broken = sqlite_driver(&db, small_decl());
    let first = broken.resolve("c").unwrap_err();
    let again = broken
        .context("c", ContextOptions::default())
        .map(|s| s.manifest.boundary_id)
        .unwrap_err();
    assert_eq!(first.code(), "fabricated_run", "{first}");
    assert_eq!(again.code(), first.code(), "{again}");
    // Under another declaration the whole chain is retired (its packets are
    // never settled again: the missing one does not matter). A driver steps
    // through it, activates the new epoch and compacts in it; a cold one
    // answers as the one-shot resolve does, every retired id listed.
    let mut upgraded = small_decl();
    upgraded.summary.max_chars = Some(1_400);
    let up = sqlite_driver(&db, upgraded.clone());
    let mut compacted = 0;
    while compacted < 2 {
        compacted += usize::from(thirty_more(&up));
    }
    let at_once = one_shot(&upgraded).unwrap();
    assert!(at_once.retired_boundaries.len() > 2 * 64 && at_once.head.is_some());
    let cold = sqlite_driver(&db, upgraded);
    assert_eq!(json(&cold.resolve("c").unwrap()), json(&at_once));
    assert_eq!(json(&up.resolve("c").unwrap()), json(&at_once));
    assert_eq!(
        serde_json::to_value(cold.timeline("c").unwrap()).unwrap(),
        serde_json::to_value(up.timeline("c").unwrap()).unwrap()
    );
}

/// The timeline draws the conversation as far as its resolution read it: a
/// boundary another writer appends between the two reads waits for the next
/// timeline, rather than drawing as a boundary the chain did not accept (the
/// JS compactor's rule) — whether the drawing reads the conversation whole
/// or only what came after the text it kept from the last drawing.
#[test]
fn the_timeline_draws_as_far_as_its_resolution_read() {
    use support::meanwhile::Meanwhile;
    let text = |t: &foldline_core::timeline::Timeline| serde_json::to_value(t).unwrap();
    for kept in [0, 64 << 20] {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("j.db");
        let d = Driver::builder(
            Foldline::embedded().unwrap(),
            Meanwhile::new(SqliteJournal::open(&db).unwrap()),
            Extractive,
        )
        .declaration(small_decl())
        .timeline_text_bytes(kept)
        .build()
        .unwrap();
        d.journal().append("c", &ordinary("c", 1, 60, 500)).unwrap();
        d.on_message("c").unwrap();
        let before = d.timeline("c").unwrap();
        // A message of this writer, then another writer's landing between
        // the resolution's read and the timeline's: the whole read from 0,
        // or, with a kept text, its read after the position the resolution
        // read from (the second read from there).
        let at = d
            .journal()
            .inner
            .read_events("c", 0)
            .unwrap()
            .last()
            .unwrap()
            .seq;
        d.journal()
            .append("c", &ordinary("c", 61, 61, 500))
            .unwrap();
        match kept {
            0 => d.journal().then(ordinary("c", 62, 62, 500), 0, 0),
            _ => d.journal().then(ordinary("c", 62, 62, 500), at, 1),
        }
        let during = text(&d.timeline("c").unwrap()).to_string();
        assert!(
            during.contains("message 61 about"),
            "{kept}: its own message"
        );
        assert!(
            !during.contains("message 62 about"),
            "{kept}: not yet the other writer's"
        );
        assert!(d.journal().landed(), "{kept}: it landed");
        let after = text(&d.timeline("c").unwrap()).to_string();
        assert!(
            after.contains("message 62 about"),
            "{kept}: the next timeline draws it"
        );
        assert_ne!(text(&before).to_string(), after);
        // The same as a driver that reads the journal afresh.
        let fresh = sqlite_driver(&db, small_decl());
        assert_eq!(text(&fresh.timeline("c").unwrap()).to_string(), after);
    }
}

/// Two writers correcting one turn at once (two replicas of a server):
/// the one whose check reads the other's correction, numbered as its own,
/// numbers its own again after it instead of refusing the edit as a
/// second claim to that number (`conflicting_turn`); the context shows the
/// later edit.
#[test]
fn a_correction_racing_another_of_its_turn_is_numbered_after_it() {
    use foldline_core::event::{Correction, Event};
    use foldline_core::turn::Part;
    use support::meanwhile::Meanwhile;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("j.db");
    let d = Driver::new(
        Foldline::embedded().unwrap(),
        Meanwhile::new(SqliteJournal::open(&db).unwrap()),
        Extractive,
        small_decl(),
    );
    d.journal().append("c", &ordinary("c", 1, 12, 300)).unwrap();
    d.on_message("c").unwrap();
    let head = d
        .journal()
        .inner
        .read_events("c", 0)
        .unwrap()
        .last()
        .unwrap()
        .seq;
    let text = |t: &str| vec![Part::Text { text: t.to_owned() }];
    let theirs = Event::Correction(Correction {
        turn_id: "t11".into(),
        correction_seq: 1,
        parts: text("the other replica's words"),
        tokens: None,
    });
    // The correction's own read first, then the other writer lands before
    // the check reads again.
    d.journal().then(vec![theirs], head, 1);
    let done = d.correct("c", "t11", text("my words"), None).unwrap();
    assert!(d.journal().landed());
    assert_eq!(done.correction_seq, 2);
    let context = d.context("c", ContextOptions::default()).unwrap();
    let context = serde_json::to_string(&context).unwrap();
    assert!(context.contains("my words") && !context.contains("the other replica's words"));
    assert!(d.resolve("c").is_ok());
}

/// `--tokenizer`: the program counts each message it imports or appends
/// with one of OpenAI's tokenizers (and `--message-overhead-tokens` of
/// framing), so a token budget's context, as that tokenizer counts it,
/// stays within the budget's limit; on the estimate alone (four
/// characters a token) a chat in Chinese is sent past it.
#[test]
fn the_programs_tokenizer_keeps_the_context_in_the_window() {
    use foldline_core::event::Event;
    use foldline_wasmtime::tokenizer::Tokenizer;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("zh.jsonl");
    let sentence = "我们的计划保持预算和日期不变，下周再检查一次。";
    let text = |i: usize| format!("第{i}条：{}", sentence.repeat(1 + (i * 7) % 12));
    let lines: String = (0..400)
        .map(|i| {
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            format!(
                "{}\n",
                serde_json::json!({"role": role, "content": text(i)})
            )
        })
        .collect();
    std::fs::write(&file, lines).unwrap();
    let count = Tokenizer::O200kBase.counter();
    let sent = |db: &std::path::Path, counted: bool| {
        let program = || {
            let mut c = on_journal(db);
            c.env("CHAT_CONTEXT_DEFAULT_WINDOW_TOKENS", "8192");
            if counted {
                c.args([
                    "--tokenizer",
                    "o200k_base",
                    "--message-overhead-tokens",
                    "3",
                ]);
            }
            c
        };
        succeeded(program().arg("import").arg(&file));
        let out = succeeded(program().args(["context", "--format", "openai"]));
        let ctx: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        // As OpenAI counts a chat request: 3 tokens of framing a message, 3 to prime the reply.
        let messages = ctx["messages"].as_array().unwrap();
        let real: u64 = messages
            .iter()
            .map(|m| 3 + count(m["content"].as_str().unwrap_or_default()))
            .sum();
        (real + 3, ctx["manifest"]["limit"].as_u64().unwrap())
    };
    let counted = dir.path().join("counted.db");
    let (real, limit) = sent(&counted, true);
    let Some(Event::Message(first)) = stored_default(&counted).into_iter().map(|s| s.event).next()
    else {
        panic!("no message stored");
    };
    assert_eq!(
        first.tokens,
        Some(count(&text(0)) + 3),
        "stored with its count"
    );
    let (estimated, _) = sent(&dir.path().join("estimated.db"), false);
    println!("o200k_base: {real} tokens sent with --tokenizer, {estimated} without, limit {limit}");
    assert!(real <= limit, "{real} tokens sent, limit {limit}");
    assert!(estimated > limit, "the check is live: {estimated}");
}

/// A timeline drawn after a write reads only what was written since the
/// last drawing (the driver keeps the conversation's text between
/// drawings), through compactions, pages and a second conversation, and
/// draws what a driver reading the journal afresh draws.
#[test]
fn a_timeline_after_a_write_reads_only_what_is_new() {
    use foldline_wasmtime::driver::Page;
    use std::sync::atomic::Ordering;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("j.db");
    let d = Driver::new(
        Foldline::embedded().unwrap(),
        support::intercept::Intercept::counting(SqliteJournal::open(&db).unwrap()),
        Extractive,
        small_decl(),
    );
    let whole = || d.journal().whole_reads.load(Ordering::SeqCst);
    let page = Page {
        limit: Some(7),
        before: None,
    };
    let events = demo_events("c", 240);
    let others = demo_events("other", 240);
    let mut compacted = false;
    for (i, (e, o)) in events.iter().zip(&others).enumerate() {
        d.journal().append("c", std::slice::from_ref(e)).unwrap();
        compacted |= matches!(d.on_message("c").unwrap(), Outcome::Compacted(_));
        d.journal()
            .append("other", std::slice::from_ref(o))
            .unwrap();
        if i % 40 == 39 {
            let reads = whole();
            let (drawn, _) = d.timeline_at("c", page).unwrap();
            let (other, _) = d.timeline_at("other", Page::default()).unwrap();
            if i > 40 {
                assert_eq!(whole(), reads, "at message {i}: no whole read");
            }
            let fresh = sqlite_driver(&db, small_decl());
            assert_eq!(
                serde_json::to_value(&drawn).unwrap(),
                serde_json::to_value(fresh.timeline_at("c", page).unwrap().0).unwrap()
            );
            assert_eq!(
                serde_json::to_value(&other).unwrap(),
                serde_json::to_value(fresh.timeline("other").unwrap()).unwrap()
            );
        }
    }
    assert!(compacted, "the conversation compacted on the way");
}

/// Every event of `conversation` in `d`'s journal, in order.
fn events_of<M: foldline_wasmtime::model::Model>(
    d: &Driver<SqliteJournal, M>,
    conversation: &str,
) -> Vec<foldline_core::event::Event> {
    let events = d.journal().read_events(conversation, 0).unwrap();
    events.into_iter().map(|s| s.event).collect()
}

/// The core's timeline of every event in `all` (the page `limit` and
/// `before` ask for), under the chain `r` resolved, as JSON.
fn core_timeline(
    all: &[foldline_core::event::Event],
    r: &foldline_core::resolve::Resolution,
    limit: Option<u64>,
    before: Option<u64>,
) -> serde_json::Value {
    let request = foldline_core::timeline::TimelineRequest {
        events: all.to_vec(),
        accepted: Some(r.accepted.clone()),
        retired: r.retired_boundaries.clone(),
        limit,
        before,
    };
    serde_json::to_value(foldline_core::timeline::timeline(&request).unwrap()).unwrap()
}

/// A page is drawn from the events it can reach (driver/text.rs), not the
/// whole conversation: through compactions, a pinned system prompt, a late
/// delivery and corrections, every page (0 to 12 items, from the end and
/// from several `before`s) is the page the core draws from every event,
/// `earlier` included.
#[test]
fn a_timeline_page_drawn_from_what_it_can_reach_is_the_whole_conversations_page() {
    use foldline_core::event::Event;
    use foldline_wasmtime::driver::Page;
    let dir = tempfile::tempdir().unwrap();
    let d = sqlite_driver(&dir.path().join("j.db"), small_decl());
    let event = |v: serde_json::Value| -> Event { serde_json::from_value(v).unwrap() };
    let text = |t: &str| serde_json::json!([{"type": "text", "text": t}]);
    d.journal()
        .append(
            "c",
            &[event(
                serde_json::json!({"type": "message", "conversation": "c", "sourceSeq": 0,
                "turnId": "system", "role": "system", "parts": text("Answer in euros.")}),
            )],
        )
        .unwrap();
    let mut compacted = 0;
    for (i, e) in demo_events("c", 160).iter().enumerate() {
        d.journal().append("c", std::slice::from_ref(e)).unwrap();
        compacted += usize::from(matches!(d.on_message("c").unwrap(), Outcome::Compacted(_)));
        if i == 120 {
            // Late: it belongs at position 7, long folded, and at 117.
            for at in [7, 117] {
                d.journal()
                    .append(
                        "c",
                        &[event(serde_json::json!({"type": "lateDelivery", "conversation": "c",
                            "sourceSeq": at, "index": 9, "turnId": format!("late-{at}"), "role": "user",
                            "parts": text("delivered late")}))],
                    )
                    .unwrap();
            }
        }
    }
    let stored = events_of(&d, "c");
    let turns: Vec<&str> = stored
        .iter()
        .filter_map(|e| match e {
            Event::Message(m) if m.role != foldline_core::turn::Role::System => {
                Some(m.turn_id.as_str())
            }
            _ => None,
        })
        .collect();
    let corrected = |id: &str| {
        event(serde_json::json!({"type": "correction",
            "turnId": id, "correctionSeq": 1, "parts": text("corrected")}))
    };
    let fixes = [corrected(turns[3]), corrected(turns[turns.len() - 4])];
    d.journal().append("c", &fixes).unwrap();
    assert!(compacted >= 3, "compacted {compacted} times");
    let all = events_of(&d, "c");
    let r = d.resolve("c").unwrap();
    // And a driver whose text bound is below the conversation's: it keeps
    // its latest messages, and reads the others again when a page reaches
    // them.
    let bytes: usize = all
        .iter()
        .map(|e| serde_json::to_vec(e).unwrap().len())
        .sum();
    let small = Driver::builder(
        Foldline::embedded().unwrap(),
        SqliteJournal::open(dir.path().join("j.db")).unwrap(),
        Extractive,
    )
    .declaration(small_decl())
    .timeline_text_bytes(bytes - 1)
    .build()
    .unwrap();
    for d in [&d, &small] {
        for before in [None, Some(8), Some(60), Some(118), Some(158)] {
            for limit in 0..=12 {
                let (drawn, _) = d
                    .timeline_at(
                        "c",
                        Page {
                            limit: Some(limit),
                            before,
                        },
                    )
                    .unwrap();
                assert_eq!(
                    serde_json::to_value(&drawn).unwrap(),
                    core_timeline(&all, &r, Some(limit), before),
                    "limit {limit} before {before:?}"
                );
            }
        }
    }
}

/// A whole timeline is drawn in pages from the latest back (at most
/// `timeline_page_items` items a core call), and is the timeline the core
/// draws from every event, with and without `before`; so is a page larger
/// than one call's (`limit` over `timeline_page_items`), its `earlier`
/// included (before, one call took it whole: a page of a million items of
/// 60,000 long messages ran out of the call's memory).
#[test]
fn a_whole_timeline_is_drawn_in_pages_and_is_the_whole_timeline() {
    use foldline_wasmtime::driver::Page;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("j.db");
    let d = sqlite_driver(&db, small_decl());
    for e in &demo_events("c", 160) {
        d.journal().append("c", std::slice::from_ref(e)).unwrap();
        d.on_message("c").unwrap();
    }
    let all = events_of(&d, "c");
    let r = d.resolve("c").unwrap();
    assert!(r.accepted.len() >= 3, "compacted");
    // A text bound below the conversation's too: the messages let go are
    // read again once for a whole timeline.
    let small: usize = all
        .iter()
        .map(|e| serde_json::to_vec(e).unwrap().len())
        .sum::<usize>()
        - 1;
    for (items, bytes) in [(1, 64 << 20), (7, small), (5_000, 64 << 20), (5_000, small)] {
        let paged = Driver::builder(
            Foldline::embedded().unwrap(),
            SqliteJournal::open(&db).unwrap(),
            Extractive,
        )
        .declaration(small_decl())
        .timeline_page_items(items)
        .timeline_text_bytes(bytes)
        .build()
        .unwrap();
        for (limit, before) in [None, Some(30)]
            .into_iter()
            .flat_map(|l| [None, Some(60), Some(1)].map(|b| (l, b)))
        {
            let (drawn, _) = paged.timeline_at("c", Page { limit, before }).unwrap();
            assert!(
                before == Some(1) || drawn.items.len() >= 30,
                "{}",
                drawn.items.len()
            );
            assert_eq!(
                serde_json::to_value(&drawn).unwrap(),
                core_timeline(&all, &r, limit, before),
                "pages of {items}, {bytes} B of text, limit {limit:?} before {before:?}"
            );
        }
    }
}

/// After an upgrade, the retired chain costs a warm driver nothing per
/// compaction: its packets are read once, on the first resolve under the
/// new declaration, and never again (before, every resolve read and sent
/// them all again: a compaction cost grew with the retired chain). What the
/// driver answers is what a driver reading the journal afresh answers.
#[test]
fn after_an_upgrade_a_compaction_reads_no_retired_packet() {
    use std::sync::atomic::Ordering;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("j.db");
    let events = demo_events("c", 700);
    let (old, new) = events.split_at(400);
    let before = sqlite_driver(&db, small_decl());
    for e in old {
        before
            .journal()
            .append("c", std::slice::from_ref(e))
            .unwrap();
        before.on_message("c").unwrap();
    }
    let mut retired = before.resolve("c").unwrap().accepted;
    retired.sort(); // resolve lists retired boundaries by id
    assert!(retired.len() >= 8, "{retired:?}");
    let mut upgraded = small_decl();
    upgraded.summary.max_chars = Some(1_400);
    let journal = support::intercept::Intercept::counting(SqliteJournal::open(&db).unwrap());
    let d = Driver::new(
        Foldline::embedded().unwrap(),
        journal,
        Extractive,
        upgraded.clone(),
    );
    let reads = || d.journal().packet_reads.load(Ordering::Relaxed);
    assert_eq!(d.resolve("c").unwrap().retired_boundaries, retired);
    assert_eq!(
        reads(),
        retired.len(),
        "the first resolve settles nothing retired but reads each once"
    );
    let mut compactions = 0;
    for e in new {
        d.journal().append("c", std::slice::from_ref(e)).unwrap();
        let at = reads();
        if let Outcome::Compacted(_) = d.on_message("c").unwrap() {
            compactions += 1;
        }
        // Each new boundary's own packet, read when the boundary is read
        // back; never a retired one.
        assert!(
            reads() - at <= 1,
            "{} packets read for one message",
            reads() - at
        );
    }
    assert!(compactions >= 4, "{compactions}");
    assert_eq!(reads(), retired.len() + compactions);
    // The warm driver's answers are the cold one's.
    let cold = sqlite_driver(&db, upgraded);
    let (warm_r, cold_r) = (d.resolve("c").unwrap(), cold.resolve("c").unwrap());
    assert_eq!(warm_r.retired_boundaries, retired);
    assert_eq!(json(&warm_r), json(&cold_r));
    assert_eq!(
        serde_json::to_value(d.timeline("c").unwrap()).unwrap(),
        serde_json::to_value(cold.timeline("c").unwrap()).unwrap()
    );
    let (warm_c, cold_c) = (
        d.context("c", ContextOptions::default()).unwrap(),
        cold.context("c", ContextOptions::default()).unwrap(),
    );
    assert_eq!(json(&warm_c), json(&cold_c));
}

#[test]
fn an_upgrade_through_the_program_keeps_what_the_model_knew() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("j.db");
    let decl = |name: &str, max: u64| {
        let p = dir.path().join(name);
        std::fs::write(
            &p,
            serde_json::json!({"targetId": "assistant", "compactorId": "assistant-compactor",
                "budget": {"kind": "chars", "trigger": 20000, "retain": 8000}, "summary": {"maxChars": max}})
            .to_string(),
        )
        .unwrap();
        p
    };
    let (a, b) = (decl("a.json", 1500), decl("b.json", 1200));
    let all = import::demo_conversation(400);
    let write = |name: &str, lines: &[serde_json::Value]| {
        let p = dir.path().join(name);
        std::fs::write(
            &p,
            lines.iter().map(|m| format!("{m}\n")).collect::<String>(),
        )
        .unwrap();
        p
    };
    let (first, second) = (write("1.jsonl", &all[..300]), write("2.jsonl", &all[300..]));
    let run = |d: &std::path::Path, args: &[&str]| {
        let out = bin()
            .arg("--journal")
            .arg(&db)
            .arg("--declaration")
            .arg(d)
            .args(args)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    run(&a, &["import", first.to_str().unwrap()]);
    let ctx: serde_json::Value = serde_json::from_str(&run(&a, &["context"])).unwrap();
    let old_head = ctx["manifest"]["boundaryId"].as_str().unwrap().to_owned();
    // The declaration changes: a new epoch, which starts from what the old one knew.
    run(&b, &["import", second.to_str().unwrap()]);
    let timeline: serde_json::Value =
        serde_json::from_str(&run(&b, &["timeline", "--json"])).unwrap();
    let dividers: Vec<&serde_json::Value> = timeline["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "divider")
        .collect();
    let (retired, current): (Vec<&serde_json::Value>, Vec<&serde_json::Value>) =
        dividers.iter().partition(|d| d["retired"] == true);
    let last_retired = retired.last().expect("the retired dividers still draw");
    assert_eq!(last_retired["boundaryId"], old_head.as_str());
    let first_new = current.first().expect("the new epoch compacted");
    assert_eq!(
        first_new["fromSeq"].as_u64(),
        last_retired["throughSeq"].as_u64().map(|s| s + 1),
        "the new epoch starts right after what the carried summary covers"
    );
    let verify = run(&b, &["verify"]);
    assert!(verify.starts_with("intact: "), "{verify}");
}

/// A check below the trigger writes nothing to the journal, so it takes no
/// writer lease: it answers while another writer holds the conversation,
/// and leaves that writer's lease as it was. A check with something to
/// write (here the activation frontier) still waits for the lease.
#[test]
fn an_automatic_check_with_nothing_to_write_takes_no_lease() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("j.db");
    let d = sqlite_driver(&db, Declaration::new("assistant", "assistant-compactor"));
    let events = demo_events("c", 4);
    let other = SqliteJournal::open(&db).unwrap();
    let fence = other
        .acquire_lease("c", "other", 1_000, u64::MAX / 4)
        .unwrap();
    assert!(fence.is_some());
    // The system prompt, then the first turn a frontier activates on.
    d.journal().append("c", &events[..2]).unwrap();
    let o = d.on_message("c").unwrap();
    assert!(
        matches!(o, Outcome::Busy),
        "activating writes a frontier: it needs the lease ({o:?})"
    );
    other.release_lease("c", "other").unwrap();
    assert!(matches!(d.on_message("c").unwrap(), Outcome::Skipped(_)));
    let before = d.journal().progress("c").unwrap().unwrap().skipped_runs;
    let fence = other
        .acquire_lease("c", "other", 1_000, u64::MAX / 4)
        .unwrap();
    d.journal().append("c", &events[2..]).unwrap();
    assert!(matches!(d.on_message("c").unwrap(), Outcome::Skipped(_)));
    assert_eq!(
        d.journal().progress("c").unwrap().unwrap().skipped_runs,
        before + 1,
        "the skip is noted"
    );
    assert_eq!(
        other
            .acquire_lease("c", "other", 2_000, u64::MAX / 4)
            .unwrap(),
        fence,
        "the other writer's lease is untouched"
    );
}

#[test]
fn skipped_runs_advance_a_progress_watermark_not_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("j.db");
    let d = sqlite_driver(&db, Declaration::new("assistant", "assistant-compactor"));
    assert_eq!(d.journal().progress("c").unwrap(), None);
    let events = demo_events("c", 12);
    for (i, e) in events.iter().enumerate() {
        d.journal().append("c", std::slice::from_ref(e)).unwrap();
        assert!(matches!(d.on_message("c").unwrap(), Outcome::Skipped(_)));
        let p = d.journal().progress("c").unwrap().unwrap();
        assert_eq!(p.skipped_runs, i as u64 + 1, "one skipped run per check");
        assert!(p.last.total < p.last.trigger);
    }
    let p = d.journal().progress("c").unwrap().unwrap();
    assert_eq!(
        p.last.checked_through_seq,
        foldline_core::plan::newest_seq(&events)
    );
    // The journal holds the messages and the one activation frontier:
    // checks below the trigger do not double it.
    let stored = d.journal().read_events("c", 0).unwrap();
    assert_eq!(stored.len(), events.len() + 1);
    assert_eq!(
        stored
            .iter()
            .filter(|s| matches!(s.event, foldline_core::event::Event::Frontier(_)))
            .count(),
        1
    );
    // The program reports it.
    let out = bin()
        .arg("--journal")
        .arg(&db)
        .args(["--conversation", "c", "verify"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!(
            "compactor progress: {} skipped runs",
            events.len()
        )),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_warm_candidate_is_prepared_under_its_own_900_second_lease() {
    const T0: u64 = 1_000_000;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("j.db");
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (db2, seen2) = (db.clone(), seen.clone());
    // The model looks at the candidate's lease from another connection while
    // it is called: held by the driver until T0 + 900 s, not a moment longer.
    let model = foldline_wasmtime::model::model_fn(move |_p| {
        let j = SqliteJournal::open(&db2).unwrap();
        let refused = j
            .acquire_lease("c#warm", "other", T0 + 899_999, 1)
            .unwrap()
            .is_none();
        let lapsed = j
            .acquire_lease("c#warm", "other", T0 + 900_000, 1)
            .unwrap()
            .is_some();
        seen2.lock().unwrap().push((refused, lapsed));
        Ok("The member planned a trip; dates and budget were agreed.".into())
    });
    let d = Driver::builder(
        Foldline::embedded().unwrap(),
        SqliteJournal::open(&db).unwrap(),
        model,
    )
    .declaration(budget_decl(Budget::default_tokens()))
    .clock(|| T0)
    .build()
    .unwrap();
    assert_eq!(d.warm_candidates(), (true, 900_000), "seed 002's default");
    until_warm(&d);
    assert!(d.prepare_warm("c").unwrap());
    assert_eq!(*seen.lock().unwrap(), [(true, true)]);
}

/// OpenAI chat messages come in as the shared cases say
/// (`tests/import/openai.json`, which the JS package's converter runs too):
/// each part kind to its journal part, files, images and audio as a
/// `[file …]` placeholder, refusals kept as text, every fault refused with
/// the same words, naming the item and part.
#[test]
fn openai_messages_import_as_the_shared_cases_say() {
    shared_import_cases("openai.json", "messages", Incoming::OpenAi, 33);
}

/// Anthropic messages come in as the shared cases say
/// (`tests/import/anthropic.json`, which the JS package's converter runs
/// too): a tool's object input stored as JavaScript writes it, tool results
/// a turn before the member's text, every fault refused with the same words.
#[test]
fn anthropic_messages_import_as_the_shared_cases_say() {
    shared_import_cases("anthropic.json", "messages", Incoming::Anthropic, 32);
}

/// AI SDK model messages come in as the shared cases say
/// (`tests/import/ai-sdk.json`): every output kind with its error status,
/// approvals, a tool's object input and JSON value as JavaScript writes
/// them, every fault refused with the same words.
#[test]
fn ai_sdk_messages_import_as_the_shared_cases_say() {
    shared_import_cases("ai-sdk.json", "messages", Incoming::AiSdk, 29);
}

/// Nothing accepted may leave a conversation unable to plan, compact,
/// render, draw or verify (as `js/test/import.test.mjs` for the JS
/// driver): every accepted case of the four shared lists, mixed at random
/// with member text into long conversations (seeded), through the Rust
/// driver's compactions, then every format's context, the timeline and the
/// chain's resolution.
#[test]
fn every_accepted_shared_case_keeps_a_long_conversation_working() {
    use foldline_core::format::Format;
    let mut seed: u64 = 3;
    let mut r = move |n: usize| {
        seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
        (seed as usize) % n
    };
    let mut compacted = 0;
    for (file, field, incoming) in [
        ("openai.json", "messages", Incoming::OpenAi),
        ("openai-responses.json", "items", Incoming::OpenAiResponses),
        ("anthropic.json", "messages", Incoming::Anthropic),
        ("ai-sdk.json", "messages", Incoming::AiSdk),
    ] {
        let path = format!("{}/../tests/import/{file}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(path).unwrap();
        #[derive(serde::Deserialize)]
        struct Raw<'a> {
            #[serde(borrow)]
            cases: Vec<std::collections::BTreeMap<&'a str, &'a serde_json::value::RawValue>>,
        }
        let raw: Raw = serde_json::from_str(&text).unwrap();
        let good: Vec<&str> = raw
            .cases
            .iter()
            .filter(|c| !c.contains_key("refused"))
            .map(|c| c[field].get())
            .collect();
        for k in 0..2 {
            let d = Driver::new(
                Foldline::embedded().unwrap(),
                SqliteJournal::in_memory().unwrap(),
                Extractive,
                budget_decl(Budget::Chars {
                    trigger: 3_000,
                    retain: 1_200,
                }),
            );
            for i in 0..60 {
                d.append_as("x", incoming, good[r(good.len())])
                    .unwrap_or_else(|e| panic!("{file} #{k}: {e}"));
                let filler = format!("filler {i} ").repeat(20);
                let member = serde_json::json!({"role": "user", "content": filler});
                d.append("x", &member.to_string()).unwrap();
                match d.on_message("x").unwrap() {
                    Outcome::Compacted(_) => compacted += 1,
                    o @ (Outcome::Refused(_) | Outcome::Failed(_)) => panic!("{file} #{k}: {o:?}"),
                    _ => {}
                }
            }
            for format in [
                Format::Foldline,
                Format::Openai,
                Format::OpenaiResponses,
                Format::Anthropic,
                Format::AiSdk,
            ] {
                let options = ContextOptions {
                    format,
                    ..Default::default()
                };
                d.context("x", options)
                    .unwrap_or_else(|e| panic!("{file} #{k} as {format:?}: {e}"));
            }
            assert!(!d.timeline("x").unwrap().items.is_empty());
            assert!(
                d.resolve("x").unwrap().head.is_some(),
                "{file} #{k}: a chain"
            );
        }
    }
    assert!(compacted >= 8, "{compacted} compactions");
}

#[test]
fn openai_responses_items_import_as_the_shared_cases_say() {
    shared_import_cases(
        "openai-responses.json",
        "items",
        Incoming::OpenAiResponses,
        26,
    );
}

/// Each case of `tests/import/<file>` (at least `at_least` of them) converts
/// (through the messages route's parser) to its drafts, or is refused with
/// its exact words.
fn shared_import_cases(file: &str, field: &str, incoming: Incoming, at_least: usize) {
    let path = format!("{}/../tests/import/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(path).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    // Each case's messages as the file writes them (the object input of a
    // tool call keeps its key order and number spellings).
    #[derive(serde::Deserialize)]
    struct Raw<'a> {
        #[serde(borrow)]
        cases: Vec<std::collections::BTreeMap<&'a str, &'a serde_json::value::RawValue>>,
    }
    let raw: Raw = serde_json::from_str(&text).unwrap();
    let route = foldline_core::turn::Route {
        conversation: "c".into(),
        chat: String::new(),
        sender: String::new(),
    };
    let cases = doc["cases"].as_array().unwrap();
    assert!(cases.len() >= at_least, "{file}: {} cases", cases.len());
    for (case, written) in cases.iter().zip(&raw.cases) {
        let name = case["name"].as_str().unwrap();
        let text = written[field].get();
        match foldline_wasmtime::import::parse_messages_as(text, &route, 0, incoming) {
            Ok(events) => {
                let drafts: Vec<serde_json::Value> = events
                    .iter()
                    .map(|e| {
                        let foldline_core::event::Event::Message(m) = e else {
                            panic!("{name}: not a message")
                        };
                        let mut d = serde_json::json!({"role": m.role, "parts": m.parts});
                        if let Some(a) = &m.author_agent {
                            d["authorAgent"] = a.as_str().into();
                        }
                        if !m.sender.is_empty() {
                            d["sender"] = m.sender.as_str().into();
                        }
                        d
                    })
                    .collect();
                assert_eq!(serde_json::Value::from(drafts), case["drafts"], "{name}");
            }
            Err(e) => {
                assert_eq!(e.code(), "invalid_input", "{name}");
                let refused = case["refused"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{name}: refused: {e}"));
                assert_eq!(e.to_string(), format!("invalid_input: {refused}"), "{name}");
            }
        }
    }
}

/// The program numbers imported messages after every turn-bearing event of
/// the journal — a late delivery or a turn's metadata as well as a message
/// (as both drivers and the server do) — so an import never gives a new
/// message a source sequence already taken.
#[test]
fn an_import_numbers_after_a_late_delivery_too() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("j.db");
    let mut events = demo_events("default", 3);
    let late = events
        .iter()
        .rev()
        .find_map(|e| match e {
            foldline_core::event::Event::Message(m) => Some(m.clone()),
            _ => None,
        })
        .unwrap();
    let newest = events.iter().filter_map(|e| e.turn_seq()).max().unwrap();
    let mut late = late;
    late.source_seq = newest + 5;
    late.turn_id = "late-one".into();
    late.content_hash = None;
    events.push(foldline_core::event::Event::LateDelivery(late));
    let raw = dir.path().join("raw.jsonl");
    let text: String = events
        .iter()
        .map(|e| format!("{}\n", serde_json::to_string(e).unwrap()))
        .collect();
    std::fs::write(&raw, text).unwrap();
    let chat = dir.path().join("chat.jsonl");
    std::fs::write(
        &chat,
        "{\"role\":\"user\",\"content\":\"after the late one\"}\n",
    )
    .unwrap();
    for file in [&raw, &chat] {
        let out = bin()
            .arg("--journal")
            .arg(&db)
            .args(["import", "--no-compact"])
            .arg(file)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let stored = stored_default(&db);
    let after = stored
        .iter()
        .find_map(|s| match &s.event {
            foldline_core::event::Event::Message(m)
                if serde_json::to_string(&m.parts)
                    .unwrap()
                    .contains("after the late one") =>
            {
                Some(m.source_seq)
            }
            _ => None,
        })
        .expect("the message was imported");
    assert_eq!(after, newest + 6, "numbered after the late delivery");
}

/// `on_message_and_context` answers what `on_message` then `context`
/// answer, from the check's read of the journal: one read for a skip, and
/// the context always holds the message appended before the call, and the
/// new boundary after a compaction (what the check wrote itself).
#[test]
fn the_check_and_the_context_share_the_checks_read() {
    use std::sync::atomic::Ordering;
    let dir = tempfile::tempdir().unwrap();
    let journal = support::intercept::Intercept::counting(
        SqliteJournal::open(dir.path().join("j.db")).unwrap(),
    );
    let d = Driver::new(
        Foldline::embedded().unwrap(),
        journal,
        Extractive,
        small_decl(),
    );
    let (mut skipped, mut compacted, mut activations) = (0, 0, 0);
    for e in demo_events("c", 160) {
        let foldline_core::event::Event::Message(m) = &e else {
            panic!("the demo is messages")
        };
        let turn = m.turn_id.clone();
        d.journal().append("c", &[e]).unwrap();
        let before = d.journal().reads.load(Ordering::Relaxed);
        let (outcome, context) = d
            .on_message_and_context("c", ContextOptions::default())
            .unwrap();
        let reads = d.journal().reads.load(Ordering::Relaxed) - before;
        match &outcome {
            Outcome::Skipped(_) => {
                skipped += 1;
                // The check's own read, and no other; the conversation's
                // activation (a frontier written, then planned again from a
                // read after it) reads three times.
                match reads {
                    1 => {}
                    3 if skipped == 2 => activations += 1,
                    n => panic!("skip {skipped}: {n} reads"),
                }
            }
            Outcome::Compacted(b) => {
                compacted += 1;
                assert_eq!(
                    context.manifest.boundary_id.as_deref(),
                    Some(b.id.as_str()),
                    "the context after a compaction stands on the new boundary"
                );
            }
            other => panic!("unexpected outcome {other:?}"),
        }
        let m = &context.manifest;
        assert!(
            m.included.last() == Some(&turn) || m.pinned.contains(&turn),
            "the message appended before the call is in its context: {turn}"
        );
        let again = d.context("c", ContextOptions::default()).unwrap();
        assert_eq!(
            foldline_core::canonical::encode(&context),
            foldline_core::canonical::encode(&again),
            "as on_message then context"
        );
    }
    assert!(
        skipped > 10 && compacted > 0 && activations == 1,
        "{skipped} skips, {compacted} compactions, {activations} activations"
    );
}

/// A check that finds another run of this driver on the conversation
/// (`Busy`) read nothing in its call: its context reads, and holds the
/// message appended while the other run was waiting on its model.
#[test]
fn a_busy_check_reads_for_its_context() {
    let dir = tempfile::tempdir().unwrap();
    let (a, run, open) =
        compacting_in_the_model(&dir.path().join("j.db"), foldline_core::defaults::LEASE_MS);
    a.journal()
        .append("c", &ordinary("c", 61, 61, 500))
        .unwrap();
    let (outcome, context) = a
        .on_message_and_context("c", ContextOptions::default())
        .unwrap();
    assert!(matches!(outcome, Outcome::Busy), "{outcome:?}");
    assert_eq!(
        context.manifest.included.last().map(String::as_str),
        Some("t61"),
        "the message appended before the call is in its context"
    );
    open.send(()).unwrap();
    assert!(matches!(run.join().unwrap(), Outcome::Compacted(_)));
}

/// A driver keeps at most `conversations_kept` conversations: past it the
/// least recently used is let go and read again at its next call. Six
/// conversations written in turns through a driver that keeps two compact,
/// select and verify exactly as through a driver that keeps them all.
#[test]
fn a_driver_keeps_a_bounded_number_of_conversations_and_answers_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let (small, all) = (dir.path().join("small.db"), dir.path().join("all.db"));
    let build = |db: &std::path::Path, kept: usize| {
        Driver::builder(
            Foldline::embedded().unwrap(),
            SqliteJournal::open(db).unwrap(),
            Extractive,
        )
        .declaration(small_decl())
        .conversations_kept(kept)
        .build()
        .unwrap()
    };
    let (bounded, unbounded) = (build(&small, 2), build(&all, usize::MAX));
    let ids: Vec<String> = (0..6).map(|i| format!("c{i}")).collect();
    let events: Vec<_> = ids.iter().map(|id| demo_events(id, 90)).collect();
    let mut compactions = 0;
    for turn in 0..90 {
        for (id, es) in ids.iter().zip(&events) {
            for d in [&bounded, &unbounded] {
                d.journal()
                    .append(id, std::slice::from_ref(&es[turn]))
                    .unwrap();
            }
            let (a, b) = (
                bounded.on_message(id).unwrap(),
                unbounded.on_message(id).unwrap(),
            );
            compactions += usize::from(matches!(a, Outcome::Compacted(_)));
            assert_eq!(format!("{a}"), format!("{b}"), "{id} at turn {turn}");
            assert!(bounded.remembered() <= 2, "{} kept", bounded.remembered());
        }
    }
    assert!(
        compactions >= 6,
        "every conversation compacted: {compactions}"
    );
    for id in &ids {
        let a = bounded.context(id, Default::default()).unwrap();
        let b = unbounded.context(id, Default::default()).unwrap();
        assert_eq!(
            serde_json::to_value(a).unwrap(),
            serde_json::to_value(b).unwrap()
        );
        assert_eq!(
            serde_json::to_value(bounded.resolve(id).unwrap()).unwrap(),
            serde_json::to_value(unbounded.resolve(id).unwrap()).unwrap()
        );
    }
    assert_eq!(unbounded.remembered(), 6);
}

/// The SQLite file journal keeps a watch of its writes, by any connection
/// to the file; an in-memory one, which no other connection sees, keeps
/// none (a server then has its waiting requests read again each interval).
#[test]
fn the_sqlite_file_journal_watches_its_writes() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("j.db");
    let j = SqliteJournal::open(&db).unwrap();
    foldline_wasmtime::journal::contract::check_watch(&j, true);
    // Another connection to the file (another process, `foldline import`).
    let mut w = j.watch().unwrap().unwrap();
    let other = SqliteJournal::open(&db).unwrap();
    other
        .append("elsewhere", &demo_events("elsewhere", 1))
        .unwrap();
    assert_eq!(
        w.next(Duration::from_millis(10)).unwrap(),
        foldline_wasmtime::journal::Written::These(vec!["elsewhere".into()])
    );
    assert!(SqliteJournal::in_memory()
        .unwrap()
        .watch()
        .unwrap()
        .is_none());
}

/// What a message claims for its turn id is the JS journals' text, case for
/// case (tests/journal/turn-claims.json, which js/test/node.test.mjs runs
/// too): a database one kind of host wrote takes the other's redeliveries.
#[test]
fn turn_claims_are_the_shared_cases() {
    let doc: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/journal/turn-claims.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let cases = doc["cases"].as_array().unwrap();
    assert!(cases.len() >= 7, "{} cases", cases.len());
    for case in cases {
        let event: foldline_core::event::Event =
            serde_json::from_value(case["event"].clone()).unwrap();
        // The event is as a journal stores it: the check changes nothing.
        let checked = foldline_wasmtime::journal::check_batch("c", std::slice::from_ref(&event));
        assert_eq!(checked.unwrap(), vec![event.clone()], "{}", case["name"]);
        let claims = foldline_wasmtime::journal::turn_claims(&[event]).unwrap();
        let want = (
            case["turnId"].as_str().unwrap().to_owned(),
            case["claim"].as_str().unwrap().to_owned(),
        );
        assert_eq!(claims, vec![want], "{}", case["name"]);
    }
}

/// A SQLite journal whose turn claims are of the earlier form (a SHA-256)
/// takes redeliveries and refuses other content, once opened and when an
/// older writer keeps such a claim later (`support::claims`).
#[test]
fn a_journal_of_earlier_claims_takes_redeliveries_and_refuses_other_content() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    let db = || rusqlite::Connection::open(&path).unwrap();
    support::claims::earlier_claims_are_taken_up(support::claims::Store {
        open: &|| Box::new(SqliteJournal::open(&path).unwrap()),
        earlier: &|migrated, which| {
            let db = db();
            for (turn, claim) in which {
                db.execute(
                    "UPDATE turns SET claim = ?1 WHERE conversation = 'c' AND turn_id = ?2",
                    rusqlite::params![claim, turn],
                )
                .unwrap();
            }
            let version = if migrated { 2 } else { 1 };
            db.execute_batch(&format!("PRAGMA user_version = {version}"))
                .unwrap();
        },
        claims: &|| {
            let db = db();
            let mut st = db
                .prepare("SELECT claim FROM turns WHERE conversation = 'c' ORDER BY turn_id")
                .unwrap();
            let rows = st.query_map([], |r| r.get(0)).unwrap();
            rows.collect::<rusqlite::Result<_>>().unwrap()
        },
    });
}

/// `foldline correct` runs the driver after the correction, as `import`
/// does after its last: an edit growing a turn no summary covers (here to
/// 60,000 characters, within what one compaction takes) past the trigger is
/// folded at once. Before, the correction was only written, and every
/// context left the 15 oldest turns out, unsummarized, until the next
/// message (`--no-compact` still only writes).
#[test]
fn a_correction_past_the_trigger_is_folded_by_the_program() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.jsonl");
    let lines: String = (1..=40)
        .map(|n| {
            let role = if n % 2 == 1 { "user" } else { "assistant" };
            let text = format!("turn {n}: {}", "the plan keeps the budget. ".repeat(30));
            format!("{}\n", serde_json::json!({"role": role, "content": text}))
        })
        .collect();
    std::fs::write(&file, lines).unwrap();
    let big = "A long pasted edit. ".repeat(3000);
    let edited = |db: &std::path::Path, flags: &[&str]| {
        succeeded(on_journal(db).arg("import").arg(&file));
        let items = succeeded(on_journal(db).args(["timeline", "--json"]));
        let items: serde_json::Value = serde_json::from_slice(&items.stdout).unwrap();
        let turn = items["items"][19]["turnId"].as_str().unwrap().to_owned();
        succeeded(on_journal(db).args(["correct", &turn, &big]).args(flags));
        let out = succeeded(on_journal(db).arg("context"));
        let ctx: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let m = &ctx["manifest"];
        (
            m["uncoveredOmitted"].as_u64().unwrap_or(0),
            m["boundaryId"].is_string(),
        )
    };
    let (left_out, summarized) = edited(&dir.path().join("a.db"), &[]);
    assert_eq!(left_out, 0, "turns left out unsummarized");
    assert!(summarized, "the edit was folded into a summary");
    let (left_out, summarized) = edited(&dir.path().join("b.db"), &["--no-compact"]);
    assert!(
        left_out > 0 && !summarized,
        "only written: {left_out} left out"
    );
}

/// A conversation admitted before the members' compression surface existed
/// may leave its fragments no room: a 78,540-character system prompt and a
/// member's 1,008-character question fit seed 000's 80,000 characters,
/// but not beside plain-speak's fragment. Such a member's context goes
/// without their state, its manifest without `member`, as every context
/// went before; it failed `tail_turn_too_large` each time the member wrote.
#[test]
fn a_members_context_without_room_for_their_fragments_goes_without_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("p.db");
    let file = dir.path().join("p.jsonl");
    let lines = [
        serde_json::json!({"role": "system", "content": "Rule. ".repeat(13090)}),
        serde_json::json!({"role": "user", "content": "turn 1 ok"}),
        serde_json::json!({"role": "assistant", "content": "turn 2 ok"}),
        serde_json::json!({"role": "user", "content": "Please look at this. ".repeat(48)}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&file, text).unwrap();
    succeeded(on_journal(&db).arg("import").arg(&file));
    let context = |opt_in: &[&str]| {
        let out = succeeded(
            on_journal(&db)
                .args(["--member-compression", "true"])
                .args(["--plain-speak-compression", "true"])
                .arg("context")
                .args(opt_in),
        );
        let ctx: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        ctx["manifest"].clone()
    };
    let m = context(&["--opt-in", "plain-speak"]);
    assert!(m["member"].is_null(), "sent without the member's state");
    assert_eq!(m["pinned"].as_array().unwrap().len(), 1);
    assert_eq!(m["included"].as_array().unwrap().len(), 3, "every turn");
    // A shorter question leaves the fragment room: the member's state applies.
    let short = dir.path().join("q.jsonl");
    let q = serde_json::json!({"role": "user", "content": "and this?"});
    std::fs::write(&short, format!("{q}\n")).unwrap();
    succeeded(on_journal(&db).arg("import").arg(&short));
    let m = context(&["--opt-in", "plain-speak"]);
    assert_eq!(m["member"]["state"]["plainSpeak"]["enabled"], true);
}
