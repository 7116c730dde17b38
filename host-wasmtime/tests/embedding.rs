//! Embedding the Rust host in a service: runs that are safe against a
//! panicking model, drivers that exclude each other, a model from a
//! function, and a driver that forgets idle conversations.

mod support;

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use foldline_core::event::Event;
use foldline_core::packet::Packet;
use foldline_wasmtime::driver::{ContextOptions, Driver, Outcome};
use foldline_wasmtime::import::Incoming;
use foldline_wasmtime::journal::{Journal, SqliteJournal};
use foldline_wasmtime::model::{model_fn, ModelError};
use foldline_wasmtime::runtime::Foldline;
use support::fixtures::{demo_events, small_decl};

/// A journal with a conversation past the trigger, and a second handle to it.
fn journal(dir: &std::path::Path) -> SqliteJournal {
    let j = SqliteJournal::open(dir.join("j.db")).unwrap();
    j.append("c", &demo_events("c", 300)).unwrap();
    j
}

/// A driver with the offline summarizer on the journal `j.db` in `dir`.
fn extractive(
    dir: &std::path::Path,
) -> Driver<SqliteJournal, foldline_wasmtime::model::Extractive> {
    let journal = SqliteJournal::open(dir.join("j.db")).unwrap();
    Driver::checked(
        Foldline::embedded().unwrap(),
        journal,
        foldline_wasmtime::model::Extractive,
        small_decl(),
    )
    .unwrap()
}

/// The turn ids of conversation `c`, in journal order.
fn turn_ids<M: foldline_wasmtime::model::Model>(d: &Driver<SqliteJournal, M>) -> Vec<String> {
    let events = d.journal().read_events("c", 0).unwrap();
    events
        .into_iter()
        .filter_map(|s| s.event.turn_id().map(str::to_owned))
        .collect()
}

fn panicking(_: &Packet) -> Result<String, ModelError> {
    panic!("the model panicked")
}

/// A model that panics: the panic reaches the caller at once (not after
/// the lease's 120 s, as when the renewal thread outlived it), the lease is
/// given back on unwind, and another driver compacts right after.
#[test]
fn a_panicking_model_returns_at_once_and_leaves_no_lease() {
    let dir = tempfile::tempdir().unwrap();
    let d = Driver::checked(
        Foldline::embedded().unwrap(),
        journal(dir.path()),
        model_fn(panicking),
        small_decl(),
    )
    .unwrap();
    let started = Instant::now();
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| d.on_message("c")));
    assert!(caught.is_err(), "the panic reaches the caller");
    // A bound far under the lease's time to live (120 s), not a timing.
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    let other = Driver::checked(
        Foldline::embedded().unwrap(),
        SqliteJournal::open(dir.path().join("j.db")).unwrap(),
        model_fn(|p: &Packet| Ok(format!("A summary of {} turns.", p.input.turn_count))),
        small_decl(),
    )
    .unwrap();
    match other.on_message("c").unwrap() {
        Outcome::Compacted(b) => assert!(b.summary.contains("turns")),
        o => panic!("the lease was left held: {o:?}"),
    }
}

/// Two drivers in one process: while one is inside its model call, the
/// other answers `Busy` (they never share a lease holder).
#[test]
fn two_drivers_in_one_process_exclude_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let inside = Arc::new(Barrier::new(2));
    let release = Arc::new(Barrier::new(2));
    let (i, r) = (inside.clone(), release.clone());
    let a = Driver::checked(
        Foldline::embedded().unwrap(),
        journal(dir.path()),
        model_fn(move |_: &Packet| {
            i.wait();
            r.wait();
            Ok("The member planned a trip.".to_owned())
        }),
        small_decl(),
    )
    .unwrap();
    let b = Driver::checked(
        Foldline::embedded().unwrap(),
        SqliteJournal::open(dir.path().join("j.db")).unwrap(),
        model_fn(|_: &Packet| Ok("Another summary.".to_owned())),
        small_decl(),
    )
    .unwrap();
    std::thread::scope(|s| {
        let first = s.spawn(|| a.on_message("c").unwrap());
        inside.wait();
        assert!(matches!(b.on_message("c").unwrap(), Outcome::Busy));
        release.wait();
        assert!(matches!(first.join().unwrap(), Outcome::Compacted(_)));
    });
}

/// `forget` drops a conversation's state: over 10,000 conversations a
/// driver that forgets each after use keeps none of them, and a forgotten
/// conversation reads the journal again with the same answer.
#[test]
fn a_driver_forgets_idle_conversations() {
    let dir = tempfile::tempdir().unwrap();
    let j = SqliteJournal::open(dir.path().join("j.db")).unwrap();
    let d = Driver::checked(
        Foldline::embedded().unwrap(),
        j,
        foldline_wasmtime::model::Extractive,
        small_decl(),
    )
    .unwrap();
    for n in 0..10_000 {
        let id = format!("c{n}");
        d.journal().append(&id, &demo_events(&id, 2)).unwrap();
        d.on_message(&id).unwrap();
        d.forget(&id).unwrap();
        assert_eq!(d.remembered(), 0);
    }
    let before = d.timeline("c7").unwrap();
    d.forget("c7").unwrap();
    assert_eq!(d.timeline("c7").unwrap(), before);
}

/// `Driver::append` takes OpenAI-style messages and numbers them after the
/// conversation's last turn — also after turns another writer appended — and
/// refuses bad input by its code with nothing written.
#[test]
fn the_driver_appends_openai_messages_numbered_after_the_last_turn() {
    let dir = tempfile::tempdir().unwrap();
    let d = Driver::checked(
        Foldline::embedded().unwrap(),
        SqliteJournal::open(dir.path().join("j.db")).unwrap(),
        foldline_wasmtime::model::Extractive,
        small_decl(),
    )
    .unwrap();
    let seq = d
        .append(
            "c",
            r#"[{"role":"system","content":"Be brief."},{"role":"user","content":"Hello"}]"#,
        )
        .unwrap();
    assert_eq!(seq, 2);
    // Another writer (a second handle on the same file) appends meanwhile.
    let other = SqliteJournal::open(dir.path().join("j.db")).unwrap();
    let mut more = demo_events("c", 3);
    for (e, n) in more.iter_mut().zip(100..) {
        if let Event::Message(m) = e {
            m.source_seq = n;
            m.turn_id = format!("other-{n}");
        }
    }
    other.append("c", &more).unwrap();
    let seq = d
        .append(
            "c",
            r#"{"role":"assistant","content":"Hi.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"clock","arguments":"{}"}}]}"#,
        )
        .unwrap();
    assert_eq!(seq, 2 + more.len() as u64 + 1);
    let last = d.journal().read_events("c", seq - 1).unwrap().remove(0);
    let Event::Message(m) = last.event else {
        panic!("a message")
    };
    let highest = 100 + more.len() as u64 - 1;
    assert_eq!(
        m.source_seq,
        highest + 1,
        "numbered after the other writer's turns"
    );
    assert_eq!(m.role, foldline_core::turn::Role::Assistant);
    for (bad, code) in [
        ("[]", "invalid_input"),
        ("not json", "invalid_input"),
        (r#"{"type":"message"}"#, "invalid_input"),
        (r#"{"role":"wizard","content":"x"}"#, "invalid_input"),
    ] {
        assert_eq!(d.append("c", bad).unwrap_err().code(), code, "{bad}");
    }
    let huge = format!(
        r#"{{"role":"user","content":"{}"}}"#,
        "word ".repeat(200_000)
    );
    assert_eq!(d.append("c", &huge).unwrap_err().code(), "turn_too_large");
    assert_eq!(
        d.journal().read_events("c", 0).unwrap().len() as u64,
        seq,
        "nothing written"
    );
    assert!(matches!(
        d.on_message("c").unwrap(),
        Outcome::Skipped(_) | Outcome::Compacted(_)
    ));
}

/// Pinned turns are never folded: `Driver::append` refuses the system or
/// developer message that would leave the conversation's pinned turns —
/// those another writer appended included — no context room
/// (`pinned_too_large`, nothing written), and the conversation goes on.
#[test]
fn the_driver_refuses_pinned_turns_past_the_context_room() {
    let dir = tempfile::tempdir().unwrap();
    let driver = || extractive(dir.path());
    let (d, other) = (driver(), driver());
    let bound = foldline_core::budget::admissible_pinned(&small_decl()) as usize;
    let says = |role: &str, size: usize| {
        serde_json::json!({"role": role, "content": "p".repeat(size)}).to_string()
    };
    d.append("c", &says("system", bound - 100)).unwrap();
    d.context("c", ContextOptions::default())
        .expect("a context");
    // The other writer's developer message leaves 10 characters of room.
    other.append("c", &says("developer", 90)).unwrap();
    let before = d.journal().read_events("c", 0).unwrap().len();
    assert_eq!(
        d.append("c", &says("developer", 11)).unwrap_err().code(),
        "pinned_too_large"
    );
    assert_eq!(
        d.journal().read_events("c", 0).unwrap().len(),
        before,
        "nothing written"
    );
    d.append("c", &says("developer", 10)).unwrap();
    for _ in 0..40 {
        d.append("c", &says("user", 400)).unwrap();
        assert!(!matches!(
            d.on_message("c").unwrap(),
            Outcome::Refused(_) | Outcome::Failed(_)
        ));
        d.context("c", ContextOptions::default())
            .expect("a context");
    }
}

/// A prompt posted with each turn (a batch that opens with a system or
/// developer message the conversation holds already) is written once, as
/// the JS compactor's `append` and both servers write it; a retry under its
/// key is recognized either way.
#[test]
fn the_driver_writes_a_prompt_posted_with_each_turn_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = extractive(dir.path());
    let batch = |head: &str, text: &str| {
        serde_json::json!([{"role": head, "content": "Answer in kroner."}, {"role": "user", "content": text}]).to_string()
    };
    let count = |messages: &str, key: Option<&str>| {
        d.append_keyed("c", Incoming::OpenAi, messages, key)
            .unwrap()
    };
    assert_eq!(count(&batch("system", "one"), None).count, 2);
    assert_eq!(count(&batch("system", "two"), Some("k")).count, 1);
    assert!(count(&batch("system", "two"), Some("k")).replayed);
    assert_eq!(
        count(&batch("developer", "three"), None).count,
        2,
        "another role"
    );
    let alone = serde_json::json!({"role": "system", "content": "Answer in kroner."}).to_string();
    assert_eq!(
        count(&alone, None).count,
        0,
        "the prompt alone: nothing new"
    );
    let events = d.journal().read_events("c", 0).unwrap();
    let roles: Vec<String> = events
        .iter()
        .filter_map(|s| match &s.event {
            Event::Message(m) => Some(format!("{:?}", m.role)),
            _ => None,
        })
        .collect();
    assert_eq!(roles, ["System", "User", "User", "Developer", "User"]);
    // Held as its corrections make it: the corrected prompt is held.
    let system = events
        .iter()
        .find_map(|s| match &s.event {
            Event::Message(m) if format!("{:?}", m.role) == "System" => Some(m.turn_id.clone()),
            _ => None,
        })
        .unwrap();
    let euros = vec![foldline_core::turn::Part::Text {
        text: "Answer in euros.".into(),
    }];
    d.correct("c", &system, euros, None).unwrap();
    let corrected = serde_json::json!([{"role": "system", "content": "Answer in euros."}, {"role": "user", "content": "six"}]);
    assert_eq!(count(&corrected.to_string(), None).count, 1);
    assert_eq!(
        count(&batch("system", "seven"), None).count,
        2,
        "its first wording is not held"
    );
}

/// `Driver::correct` by a sender (a server's member editing a message):
/// only a turn that sender sent is corrected, another's is `not_author`
/// with nothing written — also a covered turn a cold driver never held,
/// read from the journal to tell.
#[test]
fn the_driver_corrects_only_what_its_sender_sent() {
    let dir = tempfile::tempdir().unwrap();
    let d = extractive(dir.path());
    for i in 0..40 {
        let who = ["alice", "bob"][i % 2];
        let says = serde_json::json!({"role": "user", "content": format!("turn {i} {}", "w".repeat(1_500))});
        d.append_from("c", who, Incoming::OpenAi, &says.to_string(), None)
            .unwrap();
        d.on_message("c").unwrap();
    }
    let turns = turn_ids(&d);
    let covered = d.resolve("c").unwrap().head.expect("compacted");
    assert!(covered.covered_through_seq > 2);
    let text = |t: &str| vec![foldline_core::turn::Part::Text { text: t.to_owned() }];
    let stored = || d.journal().read_events("c", 0).unwrap().len();
    let before = stored();
    // turns[0] is alice's, turns[1] bob's; both covered.
    let cold = extractive(dir.path());
    let refused = cold.correct("c", &turns[0], text("bob's words"), Some("bob"));
    assert_eq!(refused.unwrap_err().code(), "not_author");
    let newest = turns.last().unwrap();
    let refused = d.correct("c", newest, text("alice's words"), Some("alice"));
    assert_eq!(refused.unwrap_err().code(), "not_author");
    assert_eq!(stored(), before, "nothing written");
    let fixed = cold
        .correct("c", &turns[1], text("bob, corrected"), Some("bob"))
        .unwrap();
    assert_eq!(fixed.correction_seq, 1);
    assert_eq!(stored(), before + 1);
    d.correct("c", newest, text("bob again"), Some("bob"))
        .unwrap();
    let context =
        serde_json::to_string(&d.context("c", ContextOptions::default()).unwrap()).unwrap();
    assert!(context.contains("bob, corrected") && context.contains("bob again"));
}

/// `Driver::correct`: a turn's correction numbered after its latest,
/// checked as every correction is (the turn it makes; a covered turn's
/// amendment within its bound; nothing written on a refusal), seen in the
/// context as the turn's text or, covered, as the amendment until the next
/// compaction absorbs it; and the chain still resolves.
#[test]
fn the_driver_corrects_a_turn_as_every_writer_checks_it() {
    let dir = tempfile::tempdir().unwrap();
    let decl = small_decl();
    let d = extractive(dir.path());
    let says =
        |role: &str, text: String| serde_json::json!({"role": role, "content": text}).to_string();
    let text = |t: &str| vec![foldline_core::turn::Part::Text { text: t.to_owned() }];
    d.append("c", &says("system", "Be brief.".into())).unwrap();
    for i in 0..40 {
        d.append(
            "c",
            &says(
                ["user", "assistant"][i % 2],
                format!("turn {i} {}", "w".repeat(1_500)),
            ),
        )
        .unwrap();
        d.on_message("c").unwrap();
    }
    let turns = turn_ids(&d);
    let covered = d
        .resolve("c")
        .unwrap()
        .head
        .expect("compacted")
        .covered_through_seq;
    assert!(covered > 5, "{covered}");
    let context = |d: &Driver<SqliteJournal, foldline_wasmtime::model::Extractive>| {
        serde_json::to_string(&d.context("c", ContextOptions::default()).unwrap()).unwrap()
    };
    let stored = || d.journal().read_events("c", 0).unwrap().len();
    // The newest turn, corrected twice: the second is in force.
    let newest = turns.last().unwrap();
    d.correct("c", newest, text("first fix"), None).unwrap();
    d.correct("c", newest, text("second fix"), None).unwrap();
    let now = context(&d);
    assert!(
        now.contains("second fix") && !now.contains("first fix"),
        "{now}"
    );
    // A covered turn: the amendment carries it.
    d.correct("c", &turns[2], text("the covered turn, corrected"), None)
        .unwrap();
    let amended = d.context("c", ContextOptions::default()).unwrap();
    assert!(amended.manifest.amendment_hash.is_some());
    assert!(serde_json::to_string(&amended)
        .unwrap()
        .contains("the covered turn, corrected"));
    // Refused, by code, nothing written: past the amendment's bound, past
    // the pinned room, a turn no compaction could take, a turn not there.
    let before = stored();
    let pinned = foldline_core::budget::admissible_pinned(&decl) as usize;
    let (turn_bound, _) = foldline_core::budget::admissible_turn(&decl);
    for (turn, parts, code) in [
        (
            &turns[3],
            text(&"a".repeat(decl.amendment_max_chars as usize + 1)),
            "amendment_too_large",
        ),
        (&turns[0], text(&"s".repeat(pinned + 1)), "pinned_too_large"),
        (
            newest,
            text(&"n".repeat(turn_bound as usize + 1)),
            "turn_too_large",
        ),
        (&"nowhere".to_owned(), text("x"), "invalid_input"),
    ] {
        assert_eq!(
            d.correct("c", turn, parts, None).unwrap_err().code(),
            code,
            "{turn}"
        );
        assert_eq!(stored(), before, "nothing written");
    }
    // The conversation goes on: compactions absorb the amendment.
    for i in 0..30 {
        d.append(
            "c",
            &says("user", format!("more {i} {}", "m".repeat(1_500))),
        )
        .unwrap();
        assert!(!matches!(
            d.on_message("c").unwrap(),
            Outcome::Refused(_) | Outcome::Failed(_)
        ));
        context(&d);
    }
    assert!(d.resolve("c").unwrap().amendment.is_none(), "absorbed");
    // A tool result keeps its content when a correction says something
    // else (a correction replaces what a turn says, not what it did): the
    // turn it makes is measured with it.
    let result = "r".repeat(turn_bound as usize - 300);
    let cycle = serde_json::json!([
        {"role": "assistant", "content": null, "tool_calls": [{"id": "k9", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "k9", "content": result},
        {"role": "assistant", "content": "done"},
    ]);
    // (With its answer: a result alone as the newest turn must fit the
    // context, `newest.rs`.)
    d.append("c", &cycle.to_string()).unwrap();
    let mut ids = turn_ids(&d);
    ids.pop();
    let answered = ids.pop().unwrap();
    let before = stored();
    let code = d
        .correct("c", &answered, text(&"t".repeat(400)), None)
        .unwrap_err();
    assert_eq!(code.code(), "turn_too_large");
    assert_eq!(stored(), before, "nothing written");
    d.correct("c", &answered, text("a short note"), None)
        .unwrap();
}

/// A correction of a turn that carries a tool call or result (which the
/// correction does not carry: they stay) is frozen as the turn it makes
/// when a compaction covers it — no amendment follows (resolve used to
/// compare the correction alone with the frozen turn, and found a
/// difference that was not there: a correction past the amendment's bound
/// left the chain unable to resolve) — and a driver reading the journal
/// cold resolves and selects as the one that saw it happen, also for a
/// correction made after the turn was covered.
#[test]
fn a_corrected_tool_turn_is_frozen_as_it_reads_and_resolves_alike_cold() {
    let dir = tempfile::tempdir().unwrap();
    let open = || extractive(dir.path());
    let d = open();
    let say = |i: usize| {
        let (role, text) = (
            ["user", "assistant"][i % 2],
            format!("turn {i} {}", "w".repeat(1_500)),
        );
        serde_json::json!({"role": role, "content": text}).to_string()
    };
    let text = |t: &str| vec![foldline_core::turn::Part::Text { text: t.to_owned() }];
    d.append("c", &say(0)).unwrap();
    let call = r#"[{"role":"assistant","content":"looking it up","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"the result"}]"#;
    d.append("c", call).unwrap();
    let ids = turn_ids(&d);
    let (asked, answered) = (ids[1].clone(), ids[2].clone());
    // Corrected while live, well past what an amendment may hold.
    let long = "v".repeat(9_000);
    d.correct("c", &answered, text(&long), None).unwrap();
    for i in 1..40 {
        d.append("c", &say(i)).unwrap();
        d.on_message("c").unwrap();
    }
    let r = d.resolve("c").unwrap();
    assert!(r.head.as_ref().expect("compacted").covered_through_seq > 3);
    assert!(
        r.amendment.is_none(),
        "frozen as corrected: {:?}",
        r.amendment
    );
    // Corrected after it was covered: an amendment, the same cold.
    d.correct("c", &asked, text("looked it up again"), None)
        .unwrap();
    let warm = d.context("c", ContextOptions::default()).unwrap();
    assert!(warm.manifest.amendment_hash.is_some());
    let cold = open();
    assert_eq!(cold.resolve("c").unwrap(), d.resolve("c").unwrap());
    assert_eq!(cold.context("c", ContextOptions::default()).unwrap(), warm);
    for i in 40..60 {
        d.append("c", &say(i)).unwrap();
        assert!(!matches!(
            d.on_message("c").unwrap(),
            Outcome::Refused(_) | Outcome::Failed(_)
        ));
    }
    assert!(d.resolve("c").unwrap().amendment.is_none(), "absorbed");
    let cold = open();
    assert_eq!(cold.resolve("c").unwrap(), d.resolve("c").unwrap());
}

/// `Driver::builder`: the token defaults with no declaration written by
/// hand, an owner so `/compact` is the owner's, and a declaration that
/// breaks a rule refused when built, by its code.
#[test]
fn the_builder_starts_from_the_token_defaults_and_checks_when_built() {
    let dir = tempfile::tempdir().unwrap();
    let d = Driver::builder(
        Foldline::embedded().unwrap(),
        SqliteJournal::open(dir.path().join("j.db")).unwrap(),
        foldline_wasmtime::model::Extractive,
    )
    .owner("alice")
    .build()
    .unwrap();
    assert!(matches!(
        d.declaration().budget,
        foldline_core::declaration::Budget::Tokens { window: 8_192, .. }
    ));
    let messages = serde_json::Value::from(foldline_wasmtime::import::demo_conversation(40));
    d.append("c", &messages.to_string()).unwrap();
    match d.compact_now("c", "alice", false).unwrap() {
        Outcome::Compacted(b) => assert_eq!(b.previous, None),
        o => panic!("the owner's /compact folds what there is: {o:?}"),
    }
    match d.compact_now("c", "mallory", false).unwrap() {
        Outcome::Refused(e) => assert_eq!(e.code, foldline_core::Code::NotOwner),
        o => panic!("{o:?}"),
    }
    let e = Driver::builder(
        Foldline::embedded().unwrap(),
        SqliteJournal::in_memory().unwrap(),
        foldline_wasmtime::model::Extractive,
    )
    .target("", "compactor")
    .build()
    .err()
    .expect("an empty target id is refused when built");
    assert_eq!(e.code(), "invalid_declaration", "{e}");
}

/// A custom model that never answers ends at its deadline: `with_deadline`
/// answers `timeout` at once, the run ends as a failed compaction (the
/// generic notice) with the lease given back, and another driver compacts
/// right after; a model that panics under a deadline answers a failure.
#[test]
fn a_hanging_custom_model_ends_at_its_deadline() {
    use foldline_wasmtime::model::with_deadline;
    let dir = tempfile::tempdir().unwrap();
    let hanging = model_fn(|_: &Packet| -> Result<String, ModelError> {
        std::thread::sleep(Duration::from_secs(600));
        Ok("too late".into())
    });
    let d = Driver::checked(
        Foldline::embedded().unwrap(),
        journal(dir.path()),
        with_deadline(hanging, Duration::from_millis(300)),
        small_decl(),
    )
    .unwrap();
    let started = Instant::now();
    match d.on_message("c").unwrap() {
        Outcome::Failed(f) => {
            assert_eq!(
                f.failure,
                foldline_core::stream::FailureKind::Timeout,
                "{f:?}"
            );
            assert_eq!(f.notice, "The chat could not be compacted.");
        }
        o => panic!("{o:?}"),
    }
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    let other = Driver::checked(
        Foldline::embedded().unwrap(),
        SqliteJournal::open(dir.path().join("j.db")).unwrap(),
        with_deadline(
            model_fn(|p: &Packet| Ok(format!("A summary of {} turns.", p.input.turn_count))),
            Duration::from_secs(60),
        ),
        small_decl(),
    )
    .unwrap();
    assert!(matches!(
        other.on_message("c").unwrap(),
        Outcome::Compacted(_)
    ));
    let d = Driver::checked(
        Foldline::embedded().unwrap(),
        SqliteJournal::open(dir.path().join("j.db")).unwrap(),
        with_deadline(model_fn(panicking), Duration::from_secs(60)),
        small_decl(),
    )
    .unwrap();
    let mut events = demo_events("c", 600);
    events.drain(..301);
    d.journal().append("c", &events).unwrap();
    assert!(matches!(d.on_message("c").unwrap(), Outcome::Failed(_)));
}

/// A tokenizer as most take Chinese text: a token a CJK character (and
/// fullwidth punctuation), four characters a token otherwise.
fn cjk_tokens(t: &str) -> u64 {
    let cjk = t.chars().filter(|c| *c >= '\u{2e80}').count() as u64;
    let other = t.chars().count() as u64 - cjk;
    cjk + other.div_ceil(4)
}

/// The host's token counts (`DriverBuilder::count_tokens`): each message
/// appended or corrected is counted by the host's tokenizer with its
/// framing, and the texts the core measures by its estimate (the summary
/// in force, the amendment, the prompt) are counted before a context is
/// sent, so the context as the provider counts it fits its limit (3,328
/// tokens at the seed's defaults) in a Chinese chat, where the core's
/// estimate (four characters a token) undercounts fourfold. With the
/// offline summarizer counting too (`Extractive::counting`) no turn is
/// left out; with a summarizer that does not, the context still fits and
/// leaves out what it must. Without the counter the same chat is sent past
/// the limit.
#[test]
fn the_hosts_token_counts_keep_the_context_in_the_window() {
    const LIMIT: u64 = 3328;
    let sentence = "我们的计划保持预算和日期不变，下周再检查一次。";
    // (the host counts, the summarizer counts)
    let run = |counting: bool, summarizer_counts: bool| {
        let dir = tempfile::tempdir().unwrap();
        let journal = SqliteJournal::open(dir.path().join("j.db")).unwrap();
        let model: Box<dyn foldline_wasmtime::model::Model + Send + Sync> = match summarizer_counts
        {
            true => Box::new(foldline_wasmtime::model::Extractive::counting(cjk_tokens)),
            false => Box::new(foldline_wasmtime::model::Extractive),
        };
        let mut b = Driver::builder(Foldline::embedded().unwrap(), journal, model);
        if counting {
            b = b.count_tokens(cjk_tokens).message_overhead_tokens(3);
        }
        let d = b.build().unwrap();
        let (mut most, mut compacted, mut left_out) = (0, 0, 0);
        for n in 1..=240u64 {
            let text = match n % 2 {
                1 => format!("问题{n}：下一步怎么办？"),
                _ => format!("回答{n}：{}", sentence.repeat(1 + (n as usize % 9) * 3)),
            };
            let role = if n % 2 == 1 { "user" } else { "assistant" };
            let m = serde_json::json!({"role": role, "content": text});
            d.append("c", &m.to_string()).unwrap();
            if matches!(d.on_message("c").unwrap(), Outcome::Compacted(_)) {
                compacted += 1;
            }
            let options = ContextOptions {
                format: foldline_core::format::Format::Openai,
                ..Default::default()
            };
            let ctx = serde_json::to_value(d.context("c", options).unwrap()).unwrap();
            // As OpenAI counts a chat request: 3 tokens of framing a message, 3 to prime the reply.
            let sent = ctx["messages"].as_array().unwrap();
            let real: u64 = sent
                .iter()
                .map(|m| 3 + cjk_tokens(m["content"].as_str().unwrap_or_default()))
                .sum::<u64>()
                + 3;
            most = most.max(real);
            left_out += ctx["manifest"]["uncoveredOmitted"].as_u64().unwrap_or(0);
            assert_eq!(
                sent.last().unwrap()["content"],
                text,
                "the newest turn, verbatim"
            );
        }
        if counting {
            // Stored with the count: the turn and a correction of it.
            let stored = d.journal().read_events("c", 0).unwrap();
            let Some(Event::Message(last)) = stored
                .iter()
                .rev()
                .map(|s| &s.event)
                .find(|e| matches!(e, Event::Message(_)))
            else {
                panic!("no message");
            };
            let words = match &last.parts[0] {
                foldline_core::turn::Part::Text { text } => cjk_tokens(text),
                _ => unreachable!(),
            };
            assert_eq!(last.tokens, Some(words + 3));
            let fix = vec![foldline_core::turn::Part::Text {
                text: sentence.repeat(4),
            }];
            d.correct("c", &last.turn_id, fix, None).unwrap();
            let stored = d.journal().read_events("c", 0).unwrap();
            let Some(Event::Correction(c)) = stored.last().map(|s| &s.event) else {
                panic!("no correction");
            };
            assert_eq!(c.tokens, Some(cjk_tokens(&sentence.repeat(4)) + 3));
        }
        (most, compacted, left_out)
    };
    // The priming's 3 tokens are the provider's, beside the context.
    let (most, compacted, left_out) = run(true, true);
    assert!(compacted >= 5, "{compacted} compactions");
    assert!(
        most <= LIMIT + 3,
        "{most} tokens sent as the provider counts them"
    );
    assert_eq!(left_out, 0, "no turn left out");
    let (uncounted_summaries, _, uncounted_left_out) = run(true, false);
    assert!(
        uncounted_summaries <= LIMIT + 3,
        "{uncounted_summaries} tokens sent with summaries the summarizer did not count"
    );
    assert!(
        uncounted_left_out > 0,
        "the summarizer's own counting is what keeps every turn in"
    );
    let (estimated, _, _) = run(false, false);
    assert!(
        estimated > LIMIT + 3,
        "the estimate alone sent {estimated}: the check is live"
    );
    println!(
        "counted: at most {most} tokens sent ({compacted} compactions); summaries uncounted: {uncounted_summaries} ({uncounted_left_out} turns left out); estimated: {estimated}"
    );
}

/// The newest turn's room (`Driver::check_newest`, part of every append's
/// check): at the seed's token defaults a 4,000-character system prompt
/// leaves a member's newest turn 2,235 tokens beside it and the least
/// summary. A pasted document past that was accepted, and every context
/// then failed `tail_turn_too_large` until the next message; it is refused
/// now, as a tool's result alone is, with nothing written. Within the room
/// the context holds it whole; an assistant's answer as long is kept (no
/// call waits on it) and the next message folds it.
#[test]
fn a_newest_turn_past_the_contexts_room_is_refused_unless_the_assistants() {
    let dir = tempfile::tempdir().unwrap();
    let d = Driver::builder(
        Foldline::embedded().unwrap(),
        SqliteJournal::open(dir.path().join("j.db")).unwrap(),
        foldline_wasmtime::model::Extractive,
    )
    .build()
    .unwrap();
    let system = format!(
        "You are a careful analyst. {}",
        "Follow the house style guide strictly and cite sources. ".repeat(70)
    );
    let opening = serde_json::json!([
        {"role": "system", "content": system},
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "hi"},
    ]);
    d.append("c", &opening.to_string()).unwrap();
    let stored = || d.journal().read_events("c", 0).unwrap().len();
    let before = stored();
    let doc = |n| {
        format!(
            "Please review this document: {}",
            "The quarterly report shows growth in all regions. ".repeat(n)
        )
    };
    let too_large = [
        serde_json::json!({"role": "user", "content": doc(200)}),
        serde_json::json!([
            {"role": "assistant", "content": null, "tool_calls": [{"id": "k1", "type": "function", "function": {"name": "fetch", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "k1", "content": doc(200)},
        ]),
    ];
    for batch in too_large {
        let e = d.append("c", &batch.to_string()).unwrap_err();
        assert_eq!(e.code(), "turn_too_large", "{e}");
        assert!(
            e.to_string().contains("newest turn") && e.to_string().contains("2235 left"),
            "{e}"
        );
        assert_eq!(stored(), before, "nothing written");
    }
    let openai = || ContextOptions {
        format: foldline_core::format::Format::Openai,
        ..Default::default()
    };
    let last = |d: &Driver<_, _>| {
        let ctx = serde_json::to_value(d.context("c", openai()).unwrap()).unwrap();
        ctx["messages"].as_array().unwrap().last().unwrap()["content"].clone()
    };
    d.append(
        "c",
        &serde_json::json!({"role": "user", "content": doc(170)}).to_string(),
    )
    .unwrap();
    d.on_message("c").unwrap();
    assert_eq!(last(&d), doc(170));
    // An edit of the newest turn is held to the same room.
    let newest = turn_ids(&d).pop().unwrap();
    let longer = vec![foldline_core::turn::Part::Text { text: doc(200) }];
    let before = stored();
    let e = d.correct("c", &newest, longer, None).unwrap_err();
    assert_eq!(e.code(), "turn_too_large", "{e}");
    assert_eq!(stored(), before, "nothing written");
    d.append(
        "c",
        &serde_json::json!({"role": "assistant", "content": doc(200)}).to_string(),
    )
    .unwrap();
    d.append("c", r#"{"role": "user", "content": "thanks"}"#)
        .unwrap();
    d.on_message("c").unwrap();
    assert_eq!(last(&d), "thanks");
}
