//! `foldline serve` over real loopback HTTP: the program is started as a
//! separate process, called with a real HTTP client, and its task events
//! are read as a browser's EventSource would (`id:`/`event:`/`data:` blocks,
//! resumed with `Last-Event-ID`). A crash is a SIGKILL; a stop is a SIGTERM.

use std::io::{BufRead, BufReader};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod support;

use foldline_core::event::{Event, TaskState};
use foldline_wasmtime::journal::{Journal, SqliteJournal};
use foldline_wasmtime::serve::hash_token;
use serde_json::{json, Value};
use support::server::Server;

const ALICE: &str = "alice-token-1";
const BOB: &str = "bob-token-2";

/// Files of one test: a journal, a members file, a small declaration.
struct Setup {
    dir: tempfile::TempDir,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let members = json!({"members": [
            {"id": "alice", "tokenSha256": hash_token(ALICE)},
            {"id": "bob", "tokenSha256": hash_token(BOB)},
        ]});
        std::fs::write(dir.path().join("members.json"), members.to_string()).unwrap();
        // Compacts after ~20,000 characters, keeps 8,000 exact.
        let mut d =
            foldline_core::declaration::Declaration::new("assistant", "assistant-compactor");
        d.budget = foldline_core::declaration::Budget::Chars {
            trigger: 20_000,
            retain: 8_000,
        };
        d.summary.max_chars = Some(1_500);
        std::fs::write(
            dir.path().join("decl.json"),
            serde_json::to_string(&d).unwrap(),
        )
        .unwrap();
        Setup { dir }
    }

    /// The small declaration the test's servers run under.
    fn declaration(&self) -> foldline_core::declaration::Declaration {
        let text = std::fs::read_to_string(self.dir.path().join("decl.json")).unwrap();
        serde_json::from_str(&text).unwrap()
    }

    fn journal(&self) -> std::path::PathBuf {
        self.dir.path().join("j.db")
    }

    fn start(&self, args: &[&str]) -> Server {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_foldline"));
        cmd.arg("--journal")
            .arg(self.journal())
            .arg("--declaration")
            .arg(self.dir.path().join("decl.json"))
            .args(["serve", "--listen", "127.0.0.1:0", "--members"])
            .arg(self.dir.path().join("members.json"))
            .args(args);
        support::server::start(cmd)
    }

    /// Wait until the automatic checks after the latest appends are done:
    /// the conversation's journal stops growing.
    fn settle(&self, conv: &str) {
        let len = || {
            SqliteJournal::open(self.journal())
                .unwrap()
                .read_events(conv, 0)
                .unwrap()
                .len()
        };
        // A warm candidate's preparation writes no event but holds the
        // writer lease: quiet is also no live lease on the conversation.
        let leased = || {
            let db = rusqlite::Connection::open(self.journal()).unwrap();
            let until: Option<i64> = db
                .query_row(
                    "SELECT until_ms FROM writer_leases WHERE conversation = ?1 AND holder <> ''",
                    [conv],
                    |r| r.get(0),
                )
                .ok();
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis() as i64;
            until.is_some_and(|u| u > now)
        };
        wait_for("the automatic checks to end", || {
            let before = len();
            std::thread::sleep(Duration::from_millis(300));
            len() == before && !leased()
        });
    }

    /// Boundaries in the journal, and whether it holds the text anywhere.
    fn boundaries(&self, conv: &str) -> usize {
        SqliteJournal::open(self.journal())
            .unwrap()
            .read_events(conv, 0)
            .unwrap()
            .iter()
            .filter(|s| matches!(s.event, Event::Boundary(_)))
            .count()
    }
}

fn agent() -> ureq::Agent {
    ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(60))
        .build()
}

/// Call the API: the status and the JSON answer (or `null`).
fn call(method: &str, url: &str, token: Option<&str>, body: Option<&str>) -> (u16, Value) {
    let mut r = agent().request(method, url);
    if let Some(t) = token {
        r = r.set("Authorization", &format!("Bearer {t}"));
    }
    let res = match body {
        Some(b) => r.set("Content-Type", "application/json").send_string(b),
        None => r.call(),
    };
    let resp = match res {
        Ok(r) => r,
        Err(ureq::Error::Status(_, r)) => r,
        Err(e) => panic!("{method} {url}: {e}"),
    };
    let status = resp.status();
    let text = resp.into_string().unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn code(v: &Value) -> &str {
    v["error"]["code"].as_str().unwrap_or("")
}

/// One SSE event.
#[derive(Debug, Clone)]
struct Sse {
    id: u64,
    event: String,
    data: Value,
}

/// Read a task's event stream to its end, as EventSource does.
fn events(url: &str, token: &str, last: Option<u64>) -> Vec<Sse> {
    let mut r = agent()
        .get(url)
        .set("Authorization", &format!("Bearer {token}"))
        .set("Accept", "text/event-stream");
    if let Some(l) = last {
        r = r.set("Last-Event-ID", &l.to_string());
    }
    let resp = r.call().unwrap();
    assert_eq!(resp.content_type(), "text/event-stream");
    let mut out = Vec::new();
    let (mut id, mut event, mut data) = (None, String::new(), String::new());
    for line in BufReader::new(resp.into_reader()).lines() {
        let line = line.unwrap();
        if line.is_empty() {
            if !data.is_empty() {
                out.push(Sse {
                    id: id.take().unwrap(),
                    event: std::mem::take(&mut event),
                    data: serde_json::from_str(&std::mem::take(&mut data)).unwrap(),
                });
            }
            continue;
        }
        if let Some(v) = line.strip_prefix("id:") {
            id = Some(v.trim().parse().unwrap());
        } else if let Some(v) = line.strip_prefix("event:") {
            event = v.trim().to_owned();
        } else if let Some(v) = line.strip_prefix("data:") {
            data.push_str(v.trim_start());
        }
    }
    out
}

/// A turn of the bundled demo conversation, ~150 characters.
fn turn(i: usize) -> String {
    foldline_wasmtime::import::demo_conversation(i + 1)[i].to_string()
}

/// How many demo turns hold about `chars` characters of content.
fn turns_for(chars: usize) -> usize {
    let all = foldline_wasmtime::import::demo_conversation(400);
    let mut sum = 0;
    for (i, m) in all.iter().enumerate() {
        sum += m["content"].as_str().map_or(0, str::len);
        if sum >= chars {
            return i + 1;
        }
    }
    all.len()
}

fn append_turns(base: &str, conv: &str, range: std::ops::Range<usize>) {
    for i in range {
        let (s, v) = call(
            "POST",
            &format!("{base}/api/conversations/{conv}/messages"),
            Some(ALICE),
            Some(&turn(i)),
        );
        assert_eq!(s, 201, "{v}");
    }
}

/// The turns of `range` in one request: one automatic check runs after it,
/// so what it compacts does not depend on how checks and appends interleave.
fn append_batch(base: &str, conv: &str, range: std::ops::Range<usize>) {
    let batch: Vec<String> = range.map(turn).collect();
    let (s, v) = call(
        "POST",
        &format!("{base}/api/conversations/{conv}/messages"),
        Some(ALICE),
        Some(&format!("[{}]", batch.join(","))),
    );
    assert_eq!(s, 201, "{v}");
}

/// Alice posts `batch` to the conversation at `conv` (its URL).
fn post_messages(conv: &str, batch: Vec<Value>) {
    let (s, v) = call(
        "POST",
        &format!("{conv}/messages"),
        Some(ALICE),
        Some(&Value::Array(batch).to_string()),
    );
    assert_eq!(s, 201, "{v}");
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "waited for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// An OpenAI-compatible endpoint whose answer the test sets: `ok`, `hang`
/// (until set to something else) or `fail` (a 500 with provider text).
fn fake_model(mode: Arc<Mutex<&'static str>>) -> String {
    fake_model_counting(mode, Arc::default())
}

/// [`fake_model`], counting the requests it was sent in `sent`.
fn fake_model_counting(
    mode: Arc<Mutex<&'static str>>,
    sent: Arc<std::sync::atomic::AtomicUsize>,
) -> String {
    let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", server.server_addr().to_ip().unwrap());
    std::thread::spawn(move || {
        for mut req in server.incoming_requests() {
            let mode = mode.clone();
            sent.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            std::thread::spawn(move || {
                let mut body = String::new();
                let _ = req.as_reader().read_to_string(&mut body);
                while *mode.lock().unwrap() == "hang" {
                    std::thread::sleep(Duration::from_millis(20));
                }
                let m = *mode.lock().unwrap();
                let r = if m == "fail" {
                    tiny_http::Response::from_string("SECRET-PROVIDER-DETAIL quota of org-42")
                        .with_status_code(500)
                } else {
                    tiny_http::Response::from_string(
                        "data: {\"model\":\"local-1\",\"choices\":[{\"delta\":{\"content\":\"Alice planned the launch; open question: the date.\"},\"finish_reason\":\"stop\"}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":9}}\n\ndata: [DONE]\n\n",
                    )
                };
                let _ = req.respond(r);
            });
        }
    });
    url
}

#[test]
fn append_compacts_automatically_and_condense_streams_its_task_to_the_end() {
    let setup = Setup::new();
    let srv = setup.start(&[]);
    let base = &srv.base;
    let conv = format!("{base}/api/conversations/c1");
    // Past the 20,000 trigger: the automatic check (after the answers, off
    // the request path) appends a boundary.
    // Each part in one request, so the state a /compact meets below does not
    // depend on how the automatic checks interleaved with the appends (turn
    // by turn, a second automatic boundary could form or not).
    let n = turns_for(30_000);
    append_batch(base, "c1", 0..n);
    wait_for("an automatic boundary", || setup.boundaries("c1") >= 1);
    setup.settle("c1");
    let (s, v) = call("GET", &format!("{conv}/verify"), Some(ALICE), None);
    assert_eq!((s, v["ok"].as_bool()), (200, Some(true)), "{v}");

    // Enough after the head for a manual fold, below the trigger.
    append_batch(base, "c1", n..n + turns_for(5_000));
    let (s, v) = call("POST", &format!("{conv}/condense"), Some(ALICE), None);
    assert_eq!(s, 202, "{v}");
    let task = v["task"].as_str().unwrap().to_owned();
    let url = format!("{base}{}", v["events"].as_str().unwrap());
    let all = events(&url, ALICE, None);
    let names: Vec<&str> = all.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(names, ["requested", "completed"], "{all:?}");
    assert_eq!(all[0].data["task"], task.as_str());
    assert_eq!(all[0].id, v["requestedSeq"].as_u64().unwrap());
    let boundary = all[1].data["boundaryId"].as_str().unwrap().to_owned();
    let journal = SqliteJournal::open(setup.journal()).unwrap();
    let ids: Vec<String> = journal
        .read_events("c1", 0)
        .unwrap()
        .into_iter()
        .filter_map(|s| match s.event {
            Event::Boundary(b) => Some(b.id),
            _ => None,
        })
        .collect();
    assert_eq!(ids.iter().filter(|i| **i == boundary).count(), 1);

    // A reload resumes after the last id it saw, and sees only what it missed.
    let resumed = events(&url, ALICE, Some(all[0].id));
    assert_eq!(resumed.len(), 1);
    assert_eq!(resumed[0].event, "completed");
    assert!(events(&url, ALICE, Some(all[1].id)).is_empty());

    // The context starts with the summary envelope; the timeline shows the boundary.
    let (s, ctx) = call(
        "GET",
        &format!("{conv}/context?format=openai"),
        Some(ALICE),
        None,
    );
    assert_eq!(s, 200, "{ctx}");
    let summary = ctx["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| {
            m["content"]
                .as_str()
                .is_some_and(|c| c.starts_with("[untrusted-history-summary]"))
        })
        .count();
    assert_eq!(summary, 1, "{ctx}");
    let (s, t) = call("GET", &format!("{conv}/timeline"), Some(ALICE), None);
    assert_eq!(s, 200);
    assert!(t.to_string().contains(&boundary), "{t}");

    // A second /compact folds what the exact tail still held, down to the
    // newest unit (a member's /compact folds whatever earlier context there
    // is); after it nothing is left to fold.
    let (s, v) = call("POST", &format!("{conv}/condense"), Some(ALICE), None);
    assert_eq!(s, 202, "{v}");
    let url = format!("{base}{}", v["events"].as_str().unwrap());
    let names: Vec<String> = events(&url, ALICE, None)
        .into_iter()
        .map(|e| e.event)
        .collect();
    assert_eq!(names, ["requested", "completed"]);
    let (s, v) = call("POST", &format!("{conv}/condense"), Some(ALICE), None);
    assert_eq!((s, code(&v)), (409, "nothing_to_fold"), "{v}");
    assert_eq!(setup.boundaries("c1"), ids.len() + 1);
    // Every head got one boundary: the chain verifies, no fork.
    let (_, v) = call("GET", &format!("{conv}/verify"), Some(ALICE), None);
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(
        v["resolution"]["accepted"].as_array().unwrap().len(),
        ids.len() + 1
    );
}

#[test]
fn every_route_refuses_strangers_and_bad_input_with_stable_codes() {
    let setup = Setup::new();
    let srv = setup.start(&["--body-limit", "4000", "--condense-per-minute", "2"]);
    let base = &srv.base;
    let conv = format!("{base}/api/conversations/c2");
    let n = turns_for(15_000);
    append_turns(base, "c2", 0..n);
    // The checks after the appends (a warm candidate prepared under the
    // writer lease) end before the refusals are counted and the answer asks
    // for the lease.
    setup.settle("c2");
    let before = SqliteJournal::open(setup.journal())
        .unwrap()
        .read_events("c2", 0)
        .unwrap()
        .len();

    // No token, a wrong token, another member's token.
    for (token, status, c) in [
        (None, 401, "unauthorized"),
        (Some("guess"), 401, "unauthorized"),
        (Some(BOB), 403, "not_owner"),
    ] {
        for (m, path) in [
            ("GET", "context"),
            ("GET", "timeline"),
            ("GET", "verify"),
            ("POST", "condense"),
            ("POST", "answer"),
        ] {
            let (s, v) = call(m, &format!("{conv}/{path}"), token, None);
            assert_eq!((s, code(&v)), (status, c), "{m} {path} {v}");
        }
        let (s, v) = call("POST", &format!("{conv}/messages"), token, Some(&turn(0)));
        assert_eq!((s, code(&v)), (status, c), "{v}");
    }
    // Nobody's conversation; a bad id.
    let (s, v) = call(
        "GET",
        &format!("{base}/api/conversations/nope/context"),
        Some(ALICE),
        None,
    );
    assert_eq!((s, code(&v)), (404, "not_found"));
    let (s, v) = call(
        "GET",
        &format!("{base}/api/conversations/a%20b/verify"),
        Some(ALICE),
        None,
    );
    assert_eq!((s, code(&v)), (400, "invalid_input"));

    // Bad bodies write nothing.
    for body in [
        r#"{"role":"wizard","content":"x"}"#.to_owned(),
        r#"{"type":"frontier"}"#.to_owned(),
        "not json".to_owned(),
        "[]".to_owned(),
    ] {
        let (s, v) = call(
            "POST",
            &format!("{conv}/messages"),
            Some(ALICE),
            Some(&body),
        );
        assert_eq!((s, code(&v)), (400, "invalid_input"), "{body}: {v}");
    }
    let big = json!({"role": "user", "content": "x".repeat(5000)}).to_string();
    let (s, v) = call("POST", &format!("{conv}/messages"), Some(ALICE), Some(&big));
    assert_eq!((s, code(&v)), (413, "body_too_large"), "{v}");
    let after = SqliteJournal::open(setup.journal())
        .unwrap()
        .read_events("c2", 0)
        .unwrap()
        .len();
    assert_eq!(before, after, "a refused body wrote nothing");
    let (s, v) = call(
        "GET",
        &format!("{conv}/context?format=xml"),
        Some(ALICE),
        None,
    );
    assert_eq!((s, code(&v)), (400, "invalid_input"));
    // `ai-sdk` is the core's alias of `aiSdk`: the same messages.
    let [(s, dashed), (_, camel)] = ["ai-sdk", "aiSdk"].map(|f| {
        let path = format!("{conv}/context?format={f}&messages=true");
        call("GET", &path, Some(ALICE), None)
    });
    assert_eq!(s, 200);
    assert!(dashed.as_array().is_some_and(|m| !m.is_empty()));
    assert_eq!(dashed, camel);

    // An answer owns the session: manual compaction is refused, messages still land.
    let (s, a) = call("POST", &format!("{conv}/answer"), Some(ALICE), None);
    assert_eq!(s, 201, "{a}");
    let answer = a["answer"].as_str().unwrap();
    let (s, v) = call("POST", &format!("{conv}/condense"), Some(ALICE), None);
    assert_eq!((s, code(&v)), (409, "session_busy"), "{v}");
    let (s, v) = call("POST", &format!("{conv}/answer"), Some(ALICE), None);
    assert_eq!((s, code(&v)), (409, "busy"), "{v}");
    append_turns(base, "c2", n..n + 1);
    let (s, _) = call(
        "DELETE",
        &format!("{conv}/answer/{answer}"),
        Some(ALICE),
        None,
    );
    assert_eq!(s, 204);
    let (s, v) = call(
        "DELETE",
        &format!("{conv}/answer/{answer}"),
        Some(ALICE),
        None,
    );
    assert_eq!((s, code(&v)), (404, "not_found"));

    // The per-member condense rate (2 a minute here); the first two count
    // even when refused for another reason.
    let mut last = (0, Value::Null);
    for _ in 0..3 {
        last = call("POST", &format!("{conv}/condense"), Some(ALICE), None);
    }
    assert_eq!((last.0, code(&last.1)), (429, "rate_limited"), "{}", last.1);
    // The first folds; the second either finds it still running (busy) or
    // folds what the exact tail held; the third is over the rate.
    let folded = setup.boundaries("c2");
    assert!(
        (1..=2).contains(&folded),
        "{folded} of the two condense requests folded"
    );
}

/// A provider that hangs holds at most `--compactions` automatic checks at
/// once (each a model call on a blocking thread until it answers or times
/// out): the other conversations over their trigger wait their turn without
/// a thread, so the requests' threads stay free (before, 600 such
/// conversations held every one of tokio's 512 and a fresh append waited
/// two minutes). Once the provider answers, every conversation compacts.
#[test]
fn a_hanging_provider_holds_at_most_the_servers_compaction_turns() {
    use std::sync::atomic::Ordering;
    let setup = Setup::new();
    let mode = Arc::new(Mutex::new("hang"));
    let sent = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let model = fake_model_counting(mode.clone(), sent.clone());
    let srv = setup.start(&["--openai-base-url", &model, "--compactions", "2"]);
    let base = &srv.base;
    let over = turns_for(22_000);
    let convs: Vec<String> = (0..6).map(|i| format!("h{i}")).collect();
    for c in &convs {
        append_batch(base, c, 0..over);
    }
    wait_for("two summary calls", || sent.load(Ordering::SeqCst) >= 2);
    std::thread::sleep(Duration::from_millis(1_500));
    assert_eq!(sent.load(Ordering::SeqCst), 2, "more calls than turns");
    let t0 = Instant::now();
    append_turns(base, "fresh", 0..1);
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    *mode.lock().unwrap() = "ok";
    for c in &convs {
        wait_for("every conversation compacted", || setup.boundaries(c) >= 1);
    }
}

/// The members file is read again on SIGHUP: a member taken out of it is
/// refused from then on (`401`), a long poll of theirs already waiting too
/// once something is written; one added is served; their conversations
/// stay theirs. A file that does not parse leaves the members as they were.
#[test]
fn the_members_file_is_read_again_on_hangup() {
    const CAROL: &str = "carol-token-3";
    let setup = Setup::new();
    let srv = setup.start(&[]);
    let base = srv.base.clone();
    let conv = format!("{base}/api/conversations/m1");
    append_turns(&base, "m1", 0..1);
    let (s, v) = call("PUT", &format!("{conv}/members/bob"), Some(ALICE), None);
    assert_eq!(s, 204, "{v}");
    let (s, _) = call("GET", &format!("{conv}/timeline"), Some(BOB), None);
    assert_eq!(s, 200);
    let (s, v) = call("GET", &format!("{conv}/events?after=0"), Some(BOB), None);
    assert_eq!(s, 200, "{v}");
    let last = v["last"].as_u64().unwrap();
    let poll = std::thread::spawn(move || {
        let url = format!("{conv}/events?after={last}&wait=10000");
        call("GET", &url, Some(BOB), None)
    });
    std::thread::sleep(Duration::from_millis(300));
    let hang_up = |members: Value| {
        let file = setup.dir.path().join("members.json");
        std::fs::write(file, members.to_string()).unwrap();
        let hup = Command::new("kill")
            .args(["-HUP", &srv.child.id().to_string()])
            .status()
            .unwrap();
        assert!(hup.success());
        std::thread::sleep(Duration::from_millis(500));
    };
    hang_up(json!({"members": [
        {"id": "alice", "tokenSha256": hash_token(ALICE)},
        {"id": "carol", "tokenSha256": hash_token(CAROL)},
    ]}));
    append_turns(&base, "m1", 1..2);
    let (s, v) = poll.join().unwrap();
    assert_eq!((s, code(&v)), (401, "unauthorized"), "{v}");
    let url = format!("{base}/api/conversations/m1/timeline");
    assert_eq!(call("GET", &url, Some(BOB), None).0, 401);
    assert_eq!(call("GET", &url, Some(ALICE), None).0, 200);
    let carol = format!("{base}/api/conversations/c9/messages");
    let hello = r#"{"role":"user","content":"hello"}"#;
    assert_eq!(call("POST", &carol, Some(CAROL), Some(hello)).0, 201);
    hang_up(json!({"members": []}));
    assert_eq!(
        call("POST", &carol, Some(CAROL), Some(hello)).0,
        201,
        "kept"
    );
    assert_eq!(call("GET", &url, Some(BOB), None).0, 401);
}

#[test]
fn provider_text_stays_in_the_audit_and_a_member_sees_the_generic_notice() {
    let setup = Setup::new();
    let mode = Arc::new(Mutex::new("fail"));
    let model = fake_model(mode.clone());
    let srv = setup.start(&["--openai-base-url", &model]);
    let base = &srv.base;
    let conv = format!("{base}/api/conversations/c3");
    append_turns(base, "c3", 0..turns_for(15_000));
    let (s, v) = call("POST", &format!("{conv}/condense"), Some(ALICE), None);
    assert_eq!(s, 202, "{v}");
    let url = format!("{base}{}", v["events"].as_str().unwrap());
    let all = events(&url, ALICE, None);
    assert_eq!(all.last().unwrap().event, "failed", "{all:?}");
    assert_eq!(
        all.last().unwrap().data["notice"],
        "The chat could not be compacted."
    );
    for path in ["timeline", "context", "verify", "events?after=0"] {
        let (_, v) = call("GET", &format!("{conv}/{path}"), Some(ALICE), None);
        assert!(!v.to_string().contains("SECRET"), "{path}: {v}");
    }
    // The events route keeps the failure (typed, for the local timeline)
    // without its audit reason.
    let (_, v) = call("GET", &format!("{conv}/events?after=0"), Some(ALICE), None);
    assert!(v["events"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["event"]["type"] == "compactionFailed" && e["event"]["reason"] == ""));
    let audit = SqliteJournal::open(setup.journal())
        .unwrap()
        .read_events("c3", 0)
        .unwrap();
    assert!(audit.iter().any(|s| matches!(&s.event,
        Event::CompactionFailed(f) if f.reason.contains("SECRET-PROVIDER-DETAIL"))));
}

#[test]
fn a_server_killed_in_the_middle_of_a_task_ends_it_on_restart_with_one_boundary() {
    let setup = Setup::new();
    let mode = Arc::new(Mutex::new("hang"));
    let model = fake_model(mode.clone());
    let srv = setup.start(&["--openai-base-url", &model]);
    let base = srv.base.clone();
    let conv = format!("{base}/api/conversations/c4");
    // Below the 20,000 trigger: only the manual task calls the model.
    append_turns(&base, "c4", 0..turns_for(15_000));
    let (s, v) = call("POST", &format!("{conv}/condense"), Some(ALICE), None);
    assert_eq!(s, 202, "{v}");
    let requested = v["requestedSeq"].as_u64().unwrap();
    let path = v["events"].as_str().unwrap().to_owned();
    drop(srv); // SIGKILL while the model call hangs

    *mode.lock().unwrap() = "ok";
    let srv = setup.start(&["--openai-base-url", &model]);
    let url = format!("{}{path}", srv.base);
    let rest = events(&url, ALICE, Some(requested));
    assert_eq!(rest.len(), 1, "{rest:?}");
    assert_eq!(rest[0].event, "failed");
    assert_eq!(setup.boundaries("c4"), 0);
    let conv = format!("{}/api/conversations/c4", srv.base);
    let (s, v) = call("POST", &format!("{conv}/condense"), Some(ALICE), None);
    assert_eq!(s, 202, "{v}");
    let all = events(
        &format!("{}{}", srv.base, v["events"].as_str().unwrap()),
        ALICE,
        None,
    );
    assert_eq!(all.last().unwrap().event, "completed", "{all:?}");
    assert_eq!(setup.boundaries("c4"), 1);
    let (_, v) = call("GET", &format!("{conv}/verify"), Some(ALICE), None);
    assert_eq!(v["ok"], true, "{v}");
}

#[test]
fn a_stopped_server_finishes_its_running_task_before_it_exits() {
    let setup = Setup::new();
    let mode = Arc::new(Mutex::new("hang"));
    let model = fake_model(mode.clone());
    let mut srv = setup.start(&["--openai-base-url", &model]);
    let conv = format!("{}/api/conversations/c5", srv.base);
    append_turns(&srv.base, "c5", 0..turns_for(15_000));
    let (s, v) = call("POST", &format!("{conv}/condense"), Some(ALICE), None);
    assert_eq!(s, 202, "{v}");
    let url = format!("{}{}", srv.base, v["events"].as_str().unwrap());
    let reader = std::thread::spawn(move || events(&url, ALICE, None));
    std::thread::sleep(Duration::from_millis(300));
    let term = Command::new("kill")
        .args(["-TERM", &srv.child.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    std::thread::sleep(Duration::from_millis(300));
    *mode.lock().unwrap() = "ok";
    let all = reader.join().unwrap();
    assert_eq!(all.last().unwrap().event, "completed", "{all:?}");
    let status = srv.child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let journal = SqliteJournal::open(setup.journal()).unwrap();
    let ended =
        journal.read_events("c5", 0).unwrap().iter().any(
            |s| matches!(&s.event, Event::CompactionTask(t) if t.state == TaskState::Completed),
        );
    assert!(ended);
}

/// Hostile input over real HTTP: raw events, sequences that cannot advance,
/// wrong field types, undecodable paths, wrong methods, a message no
/// compaction could take, and seeded random JSON. Never a 5xx; every
/// refusal is `{"error": {code, message}}`; nothing a refused request sent
/// is written; after every request the conversation still selects and
/// verifies, and it still compacts.
#[test]
fn hostile_input_never_breaks_a_conversation() {
    let setup = Setup::new();
    let srv = setup.start(&[]);
    let base = &srv.base;
    let conv = format!("{base}/api/conversations/h1");
    append_turns(base, "h1", 0..4);
    let shape = |s: u16, v: &Value, what: &str| {
        assert!(s < 500, "{what}: {s} {v}");
        if s >= 400 {
            assert!(
                !code(v).is_empty() && v["error"]["message"].is_string(),
                "{what}: {s} {v}"
            );
        }
    };
    let mut hostile: Vec<String> = vec![
        json!({"type": "message", "conversation": "h1", "sourceSeq": u64::MAX, "turnId": "x", "role": "user", "parts": [{"type": "text", "text": "hi"}]}).to_string(),
        json!({"type": "message", "conversation": "h1", "sourceSeq": 2, "turnId": "h1-1", "role": "user", "parts": [{"type": "text", "text": "other"}]}).to_string(),
        json!({"role": "assistant", "content": null, "tool_calls": [1, 2, 3]}).to_string(),
        json!({"role": "assistant", "content": "x", "tool_calls": "nope"}).to_string(),
        json!({"role": "assistant", "content": "x", "tool_calls": {"id": "a"}}).to_string(),
        json!({"role": "assistant", "content": "x", "tool_calls": [{"id": "a", "type": "function"}]}).to_string(),
        json!({"role": "assistant", "content": "x", "tool_calls": [{"id": "a", "function": {"name": 5}}]}).to_string(),
        json!({"role": "user", "content": "x", "name": 5}).to_string(),
        json!({"role": "tool", "content": "x", "tool_call_id": 7}).to_string(),
        json!([{"role": "user", "content": "ok"}, 5]).to_string(),
        json!({"role": "user", "content": "y".repeat(390_000)}).to_string(),
    ];
    // Seeded random JSON: a small linear congruential generator, so a
    // failure names a body that can be replayed.
    let mut x: u64 = 0x5eed;
    let mut next = move || {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        x >> 33
    };
    let atoms = [
        "null",
        "true",
        "1",
        "-1",
        "1e308",
        "\"user\"",
        "\"assistant\"",
        "\"tool\"",
        "\"\\ud800\"",
        "[]",
        "{}",
        "18446744073709551615",
    ];
    let keys = [
        "role",
        "content",
        "tool_calls",
        "tool_call_id",
        "name",
        "type",
        "function",
        "id",
        "sourceSeq",
        "turnId",
        "parts",
    ];
    for _ in 0..120 {
        let n = next() % 5;
        let fields: Vec<String> = (0..n)
            .map(|_| {
                let k = keys[(next() % keys.len() as u64) as usize];
                let v = atoms[(next() % atoms.len() as u64) as usize];
                format!("\"{k}\":{v}")
            })
            .collect();
        hostile.push(format!("{{{}}}", fields.join(",")));
    }
    // The messages stored: what a request writes (the automatic checks of
    // earlier accepted requests may still write frontiers and boundaries in
    // the background meanwhile).
    let stored = || {
        SqliteJournal::open(setup.journal())
            .unwrap()
            .read_events("h1", 0)
            .unwrap()
            .iter()
            .filter(|s| matches!(s.event, Event::Message(_) | Event::LateDelivery(_)))
            .count()
    };
    let mut accepted = 0;
    for body in &hostile {
        let before = stored();
        let (s, v) = call("POST", &format!("{conv}/messages"), Some(ALICE), Some(body));
        let what = body.chars().take(120).collect::<String>();
        shape(s, &v, &what);
        if s >= 400 {
            assert_eq!(stored(), before, "{what}: a refused request wrote nothing");
        } else {
            accepted += 1;
        }
        let (s, v) = call("GET", &format!("{conv}/context"), Some(ALICE), None);
        assert!(
            s == 200 || code(&v) == "tail_turn_too_large",
            "{what}: context {s} {v}"
        );
        let (s, v) = call("GET", &format!("{conv}/verify"), Some(ALICE), None);
        assert_eq!(s, 200, "{what}: verify {v}");
    }
    assert!(accepted >= 1, "some random bodies are ordinary messages");
    let (s, v) = call(
        "POST",
        &format!("{conv}/messages"),
        Some(ALICE),
        Some(&hostile[10]),
    );
    assert_eq!((s, code(&v)), (413, "turn_too_large"), "{v}");
    // The framework's own refusals in the one shape.
    for (m, url) in [
        ("GET", format!("{base}/api/conversations/%FF%FE/context")),
        (
            "GET",
            format!("{base}/api/conversations/h1/tasks/%FF/events"),
        ),
        ("PUT", format!("{conv}/context")),
        ("DELETE", format!("{conv}/messages")),
    ] {
        let (s, v) = call(m, &url, Some(ALICE), None);
        shape(s, &v, &url);
        assert!(s == 400 || s == 405 || s == 404, "{m} {url}: {s} {v}");
    }
    // The bearer scheme in any case; "." and ".." are not ids.
    let lower = agent()
        .get(&format!("{conv}/verify"))
        .set("Authorization", &format!("bearer {ALICE}"))
        .call()
        .unwrap();
    assert_eq!(lower.status(), 200);
    for id in ["%2E", "%2E%2E"] {
        // (A URL library may normalize the segment away first: then 404.)
        let (s, v) = call(
            "GET",
            &format!("{base}/api/conversations/{id}/verify"),
            Some(ALICE),
            None,
        );
        shape(s, &v, id);
        assert!(s == 400 || s == 404, "{id}: {s} {v}");
    }
    // And the conversation still compacts.
    append_turns(base, "h1", 4..turns_for(30_000));
    let (s, v) = call("POST", &format!("{conv}/condense"), Some(ALICE), None);
    assert!(s == 202 || code(&v) == "nothing_to_fold", "{s} {v}");
    wait_for("a boundary", || setup.boundaries("h1") >= 1);
    let (s, v) = call("GET", &format!("{conv}/verify"), Some(ALICE), None);
    assert_eq!(s, 200, "{v}");
}

/// An append retried under its `Idempotency-Key` — after a lost answer, a
/// timeout, or a restart of the server — writes nothing again and answers
/// as the first time; the same key with other messages is refused.
#[test]
fn a_retried_append_never_writes_twice() {
    let setup = Setup::new();
    let post = |base: &str, key: &str, body: &str| {
        let r = agent()
            .post(&format!("{base}/api/conversations/k1/messages"))
            .set("Authorization", &format!("Bearer {ALICE}"))
            .set("Idempotency-Key", key)
            .send_string(body);
        let r = match r {
            Ok(r) | Err(ureq::Error::Status(_, r)) => r,
            Err(e) => panic!("{e}"),
        };
        let replayed = r.header("idempotent-replayed").is_some();
        let status = r.status();
        let v: Value = serde_json::from_str(&r.into_string().unwrap()).unwrap_or(Value::Null);
        (status, v, replayed)
    };
    let messages = || {
        SqliteJournal::open(setup.journal())
            .unwrap()
            .read_events("k1", 0)
            .unwrap()
            .iter()
            .filter(|s| matches!(s.event, Event::Message(_)))
            .count()
    };
    let batch =
        json!([{"role": "user", "content": "one"}, {"role": "assistant", "content": "two"}])
            .to_string();
    let first = {
        let srv = setup.start(&[]);
        let (s, v, replayed) = post(&srv.base, "req-1", &batch);
        assert_eq!((s, replayed), (201, false), "{v}");
        let (s, again, replayed) = post(&srv.base, "req-1", &batch);
        assert_eq!((s, replayed), (201, true), "{again}");
        assert_eq!(again, v, "the first answer again");
        let (s, other, _) = post(&srv.base, "req-1", r#"{"role":"user","content":"else"}"#);
        assert_eq!(
            (s, code(&other)),
            (422, "idempotency_key_reused"),
            "{other}"
        );
        let (s, v2, _) = post(&srv.base, "bad key!", &batch);
        assert_eq!((s, code(&v2)), (400, "invalid_input"), "{v2}");
        v
    };
    assert_eq!(messages(), 2);
    // A new server process (the first one gone): the key is read back from
    // the journal.
    let srv = setup.start(&[]);
    let (s, v, replayed) = post(&srv.base, "req-1", &batch);
    assert_eq!((s, replayed, &v), (201, true, &first));
    let (s, _, replayed) = post(&srv.base, "req-2", &batch);
    assert_eq!((s, replayed), (201, false));
    assert_eq!(messages(), 4);
    let (s, v) = call(
        "GET",
        &format!("{}/api/conversations/k1/verify", srv.base),
        Some(ALICE),
        None,
    );
    assert_eq!(s, 200, "{v}");
}

/// A room: the owner lets another member in; they post (the sender is the
/// authenticated member, never the body), read the same timeline and
/// context and follow the owner's task; only the owner condenses and
/// manages the room; a member let out, and a stranger, see nothing.
/// `PUT …/messages/{turn}`: a member corrects a message they sent; the
/// model-bound context and the timeline show the correction, the journal
/// keeps the original beside it, and a message sent by another member is
/// `403 not_author` with nothing written (the status of every refusal is
/// compared with the edge handler's in js/test/servers/run.mjs).
#[test]
fn a_member_corrects_a_message_they_sent() {
    let setup = Setup::new();
    let srv = setup.start(&[]);
    let conv = format!("{}/api/conversations/fix", srv.base);
    let post = |token: &str, text: &str| {
        let body = json!({"role": "user", "content": text}).to_string();
        let (s, v) = call(
            "POST",
            &format!("{conv}/messages"),
            Some(token),
            Some(&body),
        );
        assert_eq!(s, 201, "{v}");
    };
    // Who the token belongs to: what a page offers Edit by.
    let (s, v) = call(
        "GET",
        &format!("{}/api/members/me", srv.base),
        Some(BOB),
        None,
    );
    assert_eq!((s, v), (200, json!({"id": "bob"})));
    post(ALICE, "Book the train to Porto on Tuesdya.");
    let (s, _) = call("PUT", &format!("{conv}/members/bob"), Some(ALICE), None);
    assert_eq!(s, 204);
    post(BOB, "And a table for four.");
    let put = |token: &str, turn: &str, content: Value| {
        let body = json!({"content": content}).to_string();
        call(
            "PUT",
            &format!("{conv}/messages/{turn}"),
            Some(token),
            Some(&body),
        )
    };
    let (s, v) = put(BOB, "fix-1", json!("not alice's words"));
    assert_eq!((s, code(&v)), (403, "not_author"), "{v}");
    let (s, v) = put(ALICE, "fix-1", json!("Book the train to Porto on Tuesday."));
    assert_eq!((s, &v["correctionSeq"]), (200, &json!(1)), "{v}");
    let (s, v) = put(
        ALICE,
        "fix-1",
        json!([{"type": "text", "text": "Book the 9:05 train to Porto on Tuesday."}]),
    );
    assert_eq!((s, &v["correctionSeq"]), (200, &json!(2)), "{v}");
    let (_, context) = call(
        "GET",
        &format!("{conv}/context?format=openai&messages=true"),
        Some(BOB),
        None,
    );
    let said = context.to_string();
    assert!(
        said.contains("the 9:05 train") && !said.contains("Tuesdya"),
        "{said}"
    );
    let (_, timeline) = call("GET", &format!("{conv}/timeline"), Some(ALICE), None);
    let first = &timeline["items"][0];
    assert_eq!(first["corrected"], json!(true), "{timeline}");
    // The journal keeps what was said first, and each correction.
    let (_, feed) = call("GET", &format!("{conv}/events?after=0"), Some(ALICE), None);
    let kinds: Vec<&str> = feed["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["event"]["type"].as_str())
        .filter(|k| *k != "frontier")
        .collect();
    assert_eq!(
        kinds,
        ["message", "message", "correction", "correction"],
        "{feed}"
    );
    assert!(feed.to_string().contains("Tuesdya"));
}

#[test]
fn a_room_shares_one_conversation_and_only_its_owner_condenses() {
    const CAROL: &str = "carol-token-3";
    let setup = Setup::new();
    let members = json!({"members": [
        {"id": "alice", "tokenSha256": hash_token(ALICE)},
        {"id": "bob", "tokenSha256": hash_token(BOB)},
        {"id": "carol", "tokenSha256": hash_token(CAROL)},
    ]});
    std::fs::write(setup.dir.path().join("members.json"), members.to_string()).unwrap();
    let srv = setup.start(&[]);
    let conv = format!("{}/api/conversations/room", srv.base);
    append_turns(&srv.base, "room", 0..turns_for(12_000));
    let (s, v) = call("GET", &format!("{conv}/timeline"), Some(BOB), None);
    assert_eq!(
        (s, code(&v)),
        (403, "not_owner"),
        "not in the room yet: {v}"
    );
    // Only the owner manages the room, and only with the server's members.
    let (s, v) = call("PUT", &format!("{conv}/members/bob"), Some(BOB), None);
    assert_eq!((s, code(&v)), (403, "not_owner"), "{v}");
    let (s, v) = call("PUT", &format!("{conv}/members/mallory"), Some(ALICE), None);
    assert_eq!((s, code(&v)), (404, "not_found"), "{v}");
    let (s, _) = call("PUT", &format!("{conv}/members/bob"), Some(ALICE), None);
    assert_eq!(s, 204);
    let (s, v) = call("GET", &format!("{conv}/members"), Some(BOB), None);
    assert_eq!(
        (s, &v),
        (200, &json!({"owner": "alice", "members": ["bob"]}))
    );
    // Bob posts; the body's sender is not believed.
    for i in 0..turns_for(12_000) {
        let mut m: Value = serde_json::from_str(&turn(i)).unwrap();
        m["sender"] = json!("alice");
        let (s, v) = call(
            "POST",
            &format!("{conv}/messages"),
            Some(BOB),
            Some(&m.to_string()),
        );
        assert!(s == 201 || s == 400, "{v}");
        if s == 400 {
            // An unknown field is refused outright, so post it plain.
            let (s, v) = call(
                "POST",
                &format!("{conv}/messages"),
                Some(BOB),
                Some(&turn(i)),
            );
            assert_eq!(s, 201, "{v}");
        }
    }
    let senders: std::collections::BTreeSet<String> = SqliteJournal::open(setup.journal())
        .unwrap()
        .read_events("room", 0)
        .unwrap()
        .into_iter()
        .filter_map(|s| match s.event {
            Event::Message(m) => Some(m.sender),
            _ => None,
        })
        .collect();
    assert_eq!(
        senders,
        ["alice".to_owned(), "bob".to_owned()].into_iter().collect(),
        "each message's sender is who posted it"
    );
    // Everyone in the room reads the same timeline (once the automatic
    // checks after the appends are done, so both read the same journal).
    setup.settle("room");
    let (_, a) = call("GET", &format!("{conv}/timeline"), Some(ALICE), None);
    let (s, b) = call("GET", &format!("{conv}/timeline"), Some(BOB), None);
    assert_eq!((s, &a), (200, &b));
    // Only the owner condenses; the room follows the owner's task.
    let (s, v) = call("POST", &format!("{conv}/condense"), Some(BOB), None);
    assert_eq!((s, code(&v)), (403, "not_owner"), "{v}");
    let (s, v) = call("POST", &format!("{conv}/condense"), Some(ALICE), None);
    assert_eq!(s, 202, "{v}");
    let url = format!("{}{}", srv.base, v["events"].as_str().unwrap());
    let seen: Vec<String> = events(&url, BOB, None)
        .into_iter()
        .map(|e| e.event)
        .collect();
    assert_eq!(seen, ["requested", "completed"]);
    // A stranger sees nothing; a member let out sees nothing again.
    let (s, v) = call("GET", &format!("{conv}/context"), Some(CAROL), None);
    assert_eq!((s, code(&v)), (403, "not_owner"), "{v}");
    let (s, _) = call("DELETE", &format!("{conv}/members/bob"), Some(ALICE), None);
    assert_eq!(s, 204);
    let (s, v) = call(
        "POST",
        &format!("{conv}/messages"),
        Some(BOB),
        Some(&turn(0)),
    );
    assert_eq!((s, code(&v)), (403, "not_owner"), "{v}");
    let (s, v) = call("GET", &format!("{conv}/timeline"), Some(BOB), None);
    assert_eq!((s, code(&v)), (403, "not_owner"), "{v}");
}

#[test]
fn the_events_route_feeds_a_local_copy_resumable_by_position_with_a_long_poll() {
    let setup = Setup::new();
    let srv = setup.start(&[]);
    let base = srv.base.clone();
    let conv = format!("{base}/api/conversations/feed");
    append_turns(&base, "feed", 0..12);
    // The automatic checks the appends scheduled run in the background (the
    // first one activates the conversation: a frontier event); let them
    // finish, so the positions below are the journal's last.
    let mut seen = None;
    let (s, v) = loop {
        std::thread::sleep(std::time::Duration::from_millis(300));
        let (s, v) = call("GET", &format!("{conv}/events?after=0"), Some(ALICE), None);
        if seen == v["last"].as_u64() {
            break (s, v);
        }
        seen = v["last"].as_u64();
    };
    assert_eq!(s, 200, "{v}");
    let all = v["events"].as_array().unwrap().clone();
    let last = v["last"].as_u64().unwrap();
    // The chain's verdict rides along, for the local projection.
    assert!(v["accepted"].is_array() && v["retired"].is_array(), "{v}");
    assert_eq!(all.last().unwrap()["seq"].as_u64(), Some(last));
    assert!(all.iter().all(|e| e["event"]["type"].is_string()));
    assert_eq!(v["more"], false);
    // In pages of 4, walked by `last` while `more`: the same events.
    let (mut paged, mut after) = (Vec::new(), 0);
    loop {
        let url = format!("{conv}/events?after={after}&limit=4");
        let (_, p) = call("GET", &url, Some(ALICE), None);
        let events = p["events"].as_array().unwrap();
        assert!(events.len() <= 4);
        paged.extend(events.iter().cloned());
        after = p["last"].as_u64().unwrap();
        if p["more"] != true {
            break;
        }
    }
    assert_eq!(paged, all);
    // Resumed from a position: only what follows it.
    let (_, v) = call(
        "GET",
        &format!("{conv}/events?after={}", last - 2),
        Some(ALICE),
        None,
    );
    assert_eq!(v["events"].as_array().unwrap().len(), 2);
    // Nothing new answers at once; a long poll answers when something is written.
    let (_, v) = call(
        "GET",
        &format!("{conv}/events?after={last}"),
        Some(ALICE),
        None,
    );
    assert_eq!(v["events"], serde_json::json!([]));
    let poll = {
        let url = format!("{conv}/events?after={last}&wait=10000");
        std::thread::spawn(move || call("GET", &url, Some(ALICE), None))
    };
    std::thread::sleep(std::time::Duration::from_millis(300));
    append_turns(&base, "feed", 12..13);
    let (s, v) = poll.join().unwrap();
    assert_eq!(s, 200);
    assert!(!v["events"].as_array().unwrap().is_empty(), "{v}");
    // Bad input and strangers get their codes.
    let (s, v) = call("GET", &format!("{conv}/events?after=x"), Some(ALICE), None);
    assert_eq!((s, code(&v)), (400, "invalid_input"));
    let (s, v) = call("GET", &format!("{conv}/events?after=0"), Some(BOB), None);
    assert_eq!((s, code(&v)), (403, "not_owner"));
}

/// `GET` with an optional `If-None-Match`: the status, the `ETag` and the
/// JSON answer (`null` for a `304`).
fn get_tagged(url: &str, token: &str, known: Option<&str>) -> (u16, String, Value) {
    let mut r = agent()
        .get(url)
        .set("Authorization", &format!("Bearer {token}"));
    if let Some(k) = known {
        r = r.set("If-None-Match", k);
    }
    let resp = match r.call() {
        Ok(r) | Err(ureq::Error::Status(_, r)) => r,
        Err(e) => panic!("GET {url}: {e}"),
    };
    let (status, tag) = (resp.status(), resp.header("etag").unwrap_or("").to_owned());
    let text = resp.into_string().unwrap();
    (
        status,
        tag,
        serde_json::from_str(&text).unwrap_or(Value::Null),
    )
}

#[test]
fn the_timeline_route_answers_pages_and_304_while_nothing_is_written() {
    let setup = Setup::new();
    let srv = setup.start(&[]);
    let base = srv.base.clone();
    let conv = format!("{base}/api/conversations/pages");
    append_turns(&base, "pages", 0..30);
    // Let the automatic checks the appends scheduled finish: the tag (the
    // journal position drawn at) stops moving.
    let mut seen = String::new();
    let (tag, whole) = loop {
        std::thread::sleep(Duration::from_millis(300));
        let (s, tag, v) = get_tagged(&format!("{conv}/timeline"), ALICE, None);
        assert_eq!(s, 200, "{v}");
        if tag == seen {
            break (tag, v);
        }
        seen = tag;
    };
    let items = whole["items"].as_array().unwrap().clone();
    assert!(items.len() >= 25 && whole.get("earlier").is_none());
    // Pages of 7, walked back by `earlier`, are the whole timeline.
    let (mut before, mut pages) = (String::new(), Vec::new());
    loop {
        let (_, _, p) = get_tagged(&format!("{conv}/timeline?limit=7{before}"), ALICE, None);
        pages.push(p["items"].as_array().unwrap().clone());
        match p["earlier"].as_u64() {
            Some(e) => before = format!("&before={e}"),
            None => break,
        }
    }
    assert!(pages.len() >= 4);
    pages.reverse();
    assert_eq!(pages.concat(), items);
    // Nothing written: 304 with the same tag, at once or after the wait.
    let (s, again, _) = get_tagged(&format!("{conv}/timeline"), ALICE, Some(&tag));
    assert_eq!((s, again.as_str()), (304, tag.as_str()));
    let t0 = std::time::Instant::now();
    let (s, _, _) = get_tagged(&format!("{conv}/timeline?wait=600"), ALICE, Some(&tag));
    assert!(s == 304 && t0.elapsed() >= Duration::from_millis(600));
    // A write ends the long poll with the new timeline and a new tag.
    let poll = {
        let (url, tag) = (format!("{conv}/timeline?wait=20000"), tag.clone());
        std::thread::spawn(move || {
            let t0 = std::time::Instant::now();
            (get_tagged(&url, ALICE, Some(&tag)), t0.elapsed())
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    append_turns(&base, "pages", 30..31);
    let ((s, newer, v), took) = poll.join().unwrap();
    assert_eq!(s, 200, "{v}");
    assert!(newer != tag && took < Duration::from_secs(15), "{took:?}");
    assert!(v["items"].as_array().unwrap().len() > items.len());
    // Bad input and strangers get their codes.
    let (s, v) = call(
        "GET",
        &format!("{conv}/timeline?limit=x"),
        Some(ALICE),
        None,
    );
    assert_eq!((s, code(&v)), (400, "invalid_input"));
    // A parameter given twice is refused, not one of its values chosen
    // (the edge handler answers the same).
    for q in [
        "timeline?limit=1&limit=2",
        "events?after=0&after=3",
        "context?format=openai&format=anthropic",
    ] {
        let (s, v) = call("GET", &format!("{conv}/{q}"), Some(ALICE), None);
        assert_eq!((s, code(&v)), (400, "invalid_input"), "{q}: {v}");
        assert!(v.to_string().contains("given more than once"), "{v}");
    }
    let (s, v) = call("GET", &format!("{conv}/timeline"), Some(BOB), None);
    assert_eq!((s, code(&v)), (403, "not_owner"));
}

/// A long poll waiting on a conversation nobody writes to reads it once,
/// however long it waits (each read again every 250 ms before); a write by
/// another connection to the file — another process, `foldline import` —
/// still answers it at once, through the server's watch of the journal.
#[test]
fn an_idle_long_poll_reads_nothing_and_another_process_s_write_answers_it() {
    use std::sync::atomic::Ordering;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("j.db");
    let journal = support::intercept::Intercept::counting(SqliteJournal::open(&db).unwrap());
    let reads = journal.reads.clone();
    let (_rt, base) = in_process(
        Box::new(journal),
        db.clone(),
        foldline_core::declaration::Declaration::new("assistant", "assistant-compactor"),
        |b| b,
    );
    let conv = format!("{base}/api/conversations/quiet");
    append_turns(&base, "quiet", 0..2);
    // Where the conversation stands once its automatic check wrote.
    let mut last = 0;
    loop {
        std::thread::sleep(Duration::from_millis(300));
        let (_, v) = call("GET", &format!("{conv}/events?after=0"), Some(ALICE), None);
        let now = v["last"].as_u64().unwrap();
        if now == last {
            break;
        }
        last = now;
    }
    let url = format!("{conv}/events?after={last}&wait=20000");
    let started = Instant::now();
    let poll = std::thread::spawn(move || call("GET", &url, Some(ALICE), None));
    std::thread::sleep(Duration::from_millis(500));
    let before = reads.load(Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(2_000));
    // At most one: the watch may yet tell of the conversation's own last
    // write (before: one read every 250 ms, eight here).
    let idle = reads.load(Ordering::SeqCst) - before;
    assert!(
        idle <= 1,
        "an idle long poll read its conversation {idle} times in 2 s"
    );
    let other = SqliteJournal::open(&db).unwrap();
    let seen = other.read_events("quiet", 0).unwrap().len();
    let mut note = support::fixtures::demo_events("quiet", 1);
    for (i, e) in note.iter_mut().enumerate() {
        if let Event::Message(m) = e {
            m.turn_id = format!("written-elsewhere-{i}");
        }
    }
    other.append("quiet", &note).unwrap();
    let (s, v) = poll.join().unwrap();
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["last"].as_u64(), Some((seen + note.len()) as u64), "{v}");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "answered only when its wait was up"
    );
}

/// The pages following one conversation all wake on a write and share one
/// drawing of their page (in-process, so the journal's whole reads — one
/// per drawing — can be counted).
#[test]
fn pages_woken_by_one_write_share_one_drawing() {
    use std::sync::atomic::Ordering;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("j.db");
    let journal = support::intercept::Intercept::counting(SqliteJournal::open(&db).unwrap());
    let whole_reads = journal.whole_reads.clone();
    let (rt, base) = in_process(
        Box::new(journal),
        db,
        foldline_core::declaration::Declaration::new("assistant", "assistant-compactor"),
        // No kept text: each drawing reads the conversation whole, so the
        // whole reads count the drawings.
        |b| b.timeline_text_bytes(0),
    );
    let conv = format!("{base}/api/conversations/shared");
    append_turns(&base, "shared", 0..12);
    // Settled: the tag stops moving.
    let mut seen = String::new();
    let tag = loop {
        std::thread::sleep(Duration::from_millis(300));
        let (_, tag, _) = get_tagged(&format!("{conv}/timeline?limit=5"), ALICE, None);
        if tag == seen {
            break tag;
        }
        seen = tag;
    };
    let whole = || whole_reads.load(Ordering::SeqCst);
    let before = whole();
    let pages: Vec<_> = (0..5)
        .map(|_| {
            let (url, tag) = (format!("{conv}/timeline?limit=5&wait=20000"), tag.clone());
            std::thread::spawn(move || get_tagged(&url, ALICE, Some(&tag)))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    append_turns(&base, "shared", 12..13);
    let answers: Vec<_> = pages.into_iter().map(|p| p.join().unwrap()).collect();
    assert!(answers
        .iter()
        .all(|(s, t, v)| *s == 200 && *t != tag && *v == answers[0].2));
    // One drawing for the five (the append's own reads start past 0; a
    // compaction check that wrote after it would make a second).
    let drawings = whole() - before;
    assert!(
        drawings <= 2,
        "five pages woken by one write took {drawings} drawings"
    );
    drop(rt);
}

/// The builder of an in-process server's driver.
type ServeBuilder = foldline_wasmtime::builder::DriverBuilder<
    Box<dyn Journal>,
    Box<dyn foldline_wasmtime::model::Model + Send + Sync>,
>;

/// `foldline serve` in this process over `journal` (the SQLite file `db`),
/// summarizing with the extractive model under `declaration`, the driver
/// further set by `tune`, alice its one member: the runtime it runs on and
/// its base URL.
fn in_process(
    journal: Box<dyn Journal>,
    db: std::path::PathBuf,
    declaration: foldline_core::declaration::Declaration,
    tune: impl FnOnce(ServeBuilder) -> ServeBuilder,
) -> (tokio::runtime::Runtime, String) {
    in_process_with(journal, db, declaration, |_| {}, tune)
}

/// [`in_process`], the server's configuration further set by `configure`.
fn in_process_with(
    journal: Box<dyn Journal>,
    db: std::path::PathBuf,
    declaration: foldline_core::declaration::Declaration,
    configure: impl FnOnce(&mut foldline_wasmtime::serve::ServeConfig),
    tune: impl FnOnce(ServeBuilder) -> ServeBuilder,
) -> (tokio::runtime::Runtime, String) {
    use foldline_wasmtime::serve::{Location, Members, ServeConfig};
    let members = Members::parse(
        &json!({"members": [{"id": "alice", "tokenSha256": hash_token(ALICE)}]}).to_string(),
    )
    .unwrap();
    let driver = foldline_wasmtime::driver::Driver::builder(
        foldline_wasmtime::runtime::Foldline::embedded().unwrap(),
        journal,
        Box::new(foldline_wasmtime::model::Extractive)
            as Box<dyn foldline_wasmtime::model::Model + Send + Sync>,
    )
    .declaration(declaration);
    let mut config = ServeConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        Location::Sqlite(db),
        members,
    );
    configure(&mut config);
    let server =
        foldline_wasmtime::serve::Server::open(tune(driver).build().unwrap(), config).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let base = rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(foldline_wasmtime::serve::listen::run(
            listener,
            server.router(),
            Duration::from_secs(30),
            std::future::pending(),
        ));
        base
    });
    (rt, base)
}

/// A server embedded as a library plans with its own member-compression
/// availability, whatever the driver it was given says: a conversation 200
/// characters short of the trigger, which the fragments of a member's
/// context take over it, compacts, and the member's context leaves out no
/// turn no summary covers. (Planned without the room, the check skipped and
/// the context left the oldest turn out.)
#[test]
fn an_embedded_server_plans_with_room_for_its_members_fragments() {
    let setup = Setup::new();
    let (_rt, base) = in_process_with(
        Box::new(SqliteJournal::open(setup.journal()).unwrap()),
        setup.journal(),
        setup.declaration(),
        |c| {
            c.compression = foldline_core::member::settings::Availability {
                surface: true,
                tool_result: true,
                plain_speak: true,
                prompt_trim: true,
            }
        },
        |b| b,
    );
    let conv = format!("{base}/api/conversations/room");
    let batch: Vec<Value> = (0..20)
        .map(|i| {
            let size = if i == 19 { 800 } else { 1_000 };
            json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": format!("turn {i} ").chars().chain(std::iter::repeat('w')).take(size).collect::<String>()})
        })
        .collect();
    post_messages(&conv, batch);
    wait_for("the compaction the fragments make due", || {
        SqliteJournal::open(setup.journal())
            .unwrap()
            .read_events("room", 0)
            .unwrap()
            .iter()
            .any(|e| matches!(e.event, Event::Boundary(_)))
    });
    let (s, ctx) = call("GET", &format!("{conv}/context"), Some(ALICE), None);
    assert_eq!(s, 200, "{ctx}");
    // `uncoveredOmitted` is written only when turns were left out.
    let m = &ctx["manifest"];
    assert_eq!(m["uncoveredOmitted"], Value::Null, "{m}");
    assert_eq!(m["omitted"], json!([]), "{m}");
    assert!(ctx["manifest"]["sizes"]["member"].as_u64().unwrap() > 0);
}

/// On a server whose members may opt in to compression, every context
/// carries their fragments beside the pinned turns, and the plan keeps them
/// room: a system prompt that would leave them none is `413
/// pinned_too_large` (accepted, no compaction could ever fit beside it,
/// none was written, and every context left out the turns no summary
/// covered, more with each message); one that leaves them their room
/// compacts as the conversation grows, and a member's context with
/// plain-speak on leaves out nothing.
#[test]
fn a_prompt_leaves_members_fragments_their_room() {
    let setup = Setup::new();
    let declaration = setup.declaration();
    let bound = foldline_core::budget::admissible_pinned(&declaration) as usize;
    let availability = foldline_core::member::settings::Availability {
        surface: true,
        tool_result: true,
        plain_speak: true,
        prompt_trim: true,
    };
    let room = foldline_core::member::seams::fragments_room(availability).chars as usize;
    let (_rt, base) = in_process_with(
        Box::new(SqliteJournal::open(setup.journal()).unwrap()),
        setup.journal(),
        declaration,
        |c| c.compression = availability,
        |b| b,
    );
    let prefs = json!({"master": true, "plainSpeak": true}).to_string();
    let (s, _) = call(
        "PUT",
        &format!("{base}/api/members/me/compression"),
        Some(ALICE),
        Some(&prefs),
    );
    assert_eq!(s, 200);
    let conv = format!("{base}/api/conversations/tight");
    let system = |n: usize| json!({"role": "system", "content": "r".repeat(n)}).to_string();
    let (s, v) = call(
        "POST",
        &format!("{conv}/messages"),
        Some(ALICE),
        Some(&system(bound - room + 1)),
    );
    assert_eq!((s, code(&v)), (413, "pinned_too_large"), "{v}");
    assert!(v.to_string().contains("compression fragments"), "{v}");
    post_messages(
        &conv,
        vec![serde_json::from_str(&system(bound - room)).unwrap()],
    );
    for i in 0..12 {
        let turn = json!({"role": "user", "content": format!("turn {i} {}", "w".repeat(900))});
        post_messages(&conv, vec![turn]);
        // Each message's check runs after its answer: as a member writes.
        std::thread::sleep(Duration::from_millis(300));
    }
    wait_for("a member's context that leaves out no turn", || {
        let (s, ctx) = call("GET", &format!("{conv}/context"), Some(ALICE), None);
        s == 200
            && ctx["manifest"]["uncoveredOmitted"].is_null()
            && ctx["manifest"]["sizes"]["member"].as_u64() > Some(0)
    });
    let boundaries = SqliteJournal::open(setup.journal())
        .unwrap()
        .read_events("tight", 0)
        .unwrap()
        .iter()
        .filter(|e| matches!(e.event, Event::Boundary(_)))
        .count();
    assert!(boundaries >= 5, "{boundaries} compactions");
}

/// A task's event stream reads the journal a page at a time from the task
/// on: followed long after it ended, it reads up to its terminal event, not
/// all that was written since.
#[test]
fn a_task_followed_long_after_it_ended_reads_up_to_its_end() {
    use std::sync::atomic::Ordering;
    let setup = Setup::new();
    let journal =
        support::intercept::Intercept::counting(SqliteJournal::open(setup.journal()).unwrap());
    let events_read = journal.events_read.clone();
    let (rt, base) = in_process(
        Box::new(journal),
        setup.journal(),
        setup.declaration(),
        |b| b,
    );
    let conv = format!("{base}/api/conversations/old");
    append_batch(&base, "old", 0..turns_for(30_000));
    setup.settle("old");
    let (s, task) = call("POST", &format!("{conv}/condense"), Some(ALICE), None);
    assert_eq!(s, 202, "{task}");
    let url = format!("{base}{}", task["events"].as_str().unwrap());
    let first = events(&url, ALICE, None);
    assert_eq!(
        first.iter().map(|e| e.event.as_str()).collect::<Vec<_>>(),
        ["requested", "completed"]
    );
    // 3,000 messages after the task ended.
    for b in 0..3 {
        let batch: Vec<Value> = (0..1_000)
            .map(|i| json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": format!("Later {b}.{i}.")}))
            .collect();
        post_messages(&conv, batch);
    }
    setup.settle("old");
    let before = events_read.load(Ordering::SeqCst);
    let again = events(&url, ALICE, None);
    let read = events_read.load(Ordering::SeqCst) - before;
    assert_eq!(
        again
            .iter()
            .map(|e| (e.id, e.event.as_str()))
            .collect::<Vec<_>>(),
        first
            .iter()
            .map(|e| (e.id, e.event.as_str()))
            .collect::<Vec<_>>()
    );
    // Up to the terminal event, in pages of at most 1,000.
    assert!(read <= 1_000, "{read} events read to follow the old task");
    drop(rt);
}

/// The server keeps each conversation's append position and idempotency
/// keys for at most `CONVERSATIONS_KEPT` conversations: one let go reads
/// them back from the journal (a whole read of it, with the driver keeping
/// every conversation so only the position can cause one), so a retry after
/// more than that many other conversations were written is still
/// recognized.
#[test]
fn a_retry_is_recognized_after_its_conversation_was_let_go() {
    let setup = Setup::new();
    let journal =
        support::intercept::Intercept::counting(SqliteJournal::open(setup.journal()).unwrap());
    let whole_reads_of = journal.whole_reads_of.clone();
    let (rt, base) = in_process(
        Box::new(journal),
        setup.journal(),
        setup.declaration(),
        |b| b.conversations_kept(usize::MAX),
    );
    let keyed = |conv: &str, key: &str, text: &str| {
        let r = agent()
            .post(&format!("{base}/api/conversations/{conv}/messages"))
            .set("Authorization", &format!("Bearer {ALICE}"))
            .set("Idempotency-Key", key)
            .send_string(&json!({"role": "user", "content": text}).to_string());
        let r = match r {
            Ok(r) | Err(ureq::Error::Status(_, r)) => r,
            Err(e) => panic!("{e}"),
        };
        (r.status(), r.header("idempotent-replayed").is_some())
    };
    let whole_reads = || {
        whole_reads_of
            .lock()
            .unwrap()
            .get("first")
            .copied()
            .unwrap_or(0)
    };
    assert_eq!(keyed("first", "k-first", "Hello."), (201, false));
    setup.settle("first");
    // Kept: a second keyed append reads only what is new.
    let before = whole_reads();
    assert_eq!(keyed("first", "k-second", "Again."), (201, false));
    assert_eq!(whole_reads(), before, "a kept position is not read again");
    let others = foldline_core::defaults::CONVERSATIONS_KEPT + 8;
    for i in 0..others {
        assert_eq!(keyed(&format!("other-{i}"), "k", "Hi."), (201, false));
    }
    setup.settle("first");
    let before = whole_reads();
    assert_eq!(keyed("first", "k-first", "Hello."), (201, true), "replayed");
    assert!(
        whole_reads() > before,
        "the position was let go and read back"
    );
    assert_eq!(keyed("first", "k-first", "Other words.").0, 422);
    let stored = SqliteJournal::open(setup.journal())
        .unwrap()
        .read_events("first", 0)
        .unwrap();
    assert_eq!(
        stored
            .iter()
            .filter(|s| matches!(s.event, Event::Message(_)))
            .count(),
        2
    );
    drop(rt);
}

/// Read `c` until the server ends the connection (or answers `want`):
/// what it sent. Panics if it is still open after ten seconds.
fn read_until_let_go(c: &mut std::net::TcpStream, want: &str, what: &str) -> String {
    use std::io::Read;
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let (started, mut got, mut buf) = (Instant::now(), Vec::new(), [0u8; 4096]);
    loop {
        match c.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("{what}: still held after {:?} ({e})", started.elapsed()),
        }
        if !want.is_empty() && String::from_utf8_lossy(&got).contains(want) {
            break;
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// A client that connects and sends nothing, or half a request's head, is
/// let go once the request timeout has passed, and so is one whose body
/// never ends: `408 timeout`, nothing written, the conversation never
/// created. (axum's own `serve` installs no timer, so hyper's header
/// timeout never ran, and an append's deadline began only after its body:
/// all three were held for good, each with its file, and enough of them
/// left the server accepting no one.) Meanwhile others are served; and the
/// server, started with a soft limit of 256 open files, has raised it to
/// the hard one.
#[test]
fn a_client_that_sends_too_slowly_is_let_go() {
    use std::io::Write;
    let s = Setup::new();
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(r#"ulimit -Sn 256 && exec "$0" "$@""#)
        .arg(env!("CARGO_BIN_EXE_foldline"))
        .arg("--journal")
        .arg(s.journal())
        .arg("--declaration")
        .arg(s.dir.path().join("decl.json"))
        .args(["serve", "--listen", "127.0.0.1:0", "--request-timeout", "1"])
        .arg("--members")
        .arg(s.dir.path().join("members.json"));
    let srv = support::server::start(cmd);

    let limits = std::fs::read_to_string(format!("/proc/{}/limits", srv.child.id())).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    let f: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(f[3], f[4], "the soft limit raised to the hard one: {line}");

    let addr = srv.base.strip_prefix("http://").unwrap();
    let open = || std::net::TcpStream::connect(addr).unwrap();
    let mut idle = open();
    let mut half = open();
    half.write_all(b"GET /api/conversations/slow/verify HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    let mut slow = open();
    let head = format!(
        "POST /api/conversations/slow/messages HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ALICE}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n["
    );
    slow.write_all(head.as_bytes()).unwrap();

    let (status, _) = call(
        "POST",
        &format!("{}/api/conversations/ok/messages", srv.base),
        Some(ALICE),
        Some(r#"{"role":"user","content":"served while three clients stall"}"#),
    );
    assert_eq!(status, 201, "others are served meanwhile");

    read_until_let_go(&mut idle, "", "a connection that sent nothing");
    read_until_let_go(&mut half, "", "a connection that sent half a head");
    let answer = read_until_let_go(&mut slow, "\"timeout\"", "a body that never ends");
    assert!(
        answer.starts_with("HTTP/1.1 408") && answer.contains("nothing was written"),
        "{answer}"
    );
    let (status, body) = call(
        "GET",
        &format!("{}/api/conversations/slow/verify", srv.base),
        Some(ALICE),
        None,
    );
    assert_eq!((status, code(&body)), (404, "not_found"), "{body}");
}

/// A stop does not wait out the long polls: a chat page's timeline poll
/// (`wait`, up to 25 s) and a client's events poll are answered at once
/// (`304`, and the page with nothing new), the page polls again and meets
/// the next server, and the server exits. (They held the stop for their
/// whole wait: 24 s for one SIGTERM.)
#[test]
fn a_stop_answers_the_long_polls_at_once() {
    let setup = Setup::new();
    let mut srv = setup.start(&[]);
    let conv = format!("{}/api/conversations/polled", srv.base);
    let (s, _) = call(
        "POST",
        &format!("{conv}/messages"),
        Some(ALICE),
        Some(r#"{"role":"user","content":"something to follow"}"#),
    );
    assert_eq!(s, 201);
    setup.settle("polled");
    let (_, tag, _) = get_tagged(&format!("{conv}/timeline"), ALICE, None);
    let page = {
        let url = format!("{conv}/timeline?wait=25000");
        std::thread::spawn(move || get_tagged(&url, ALICE, Some(&tag)))
    };
    let feed = {
        let url = format!("{conv}/events?after=1000&wait=25000");
        std::thread::spawn(move || call("GET", &url, Some(ALICE), None))
    };
    std::thread::sleep(Duration::from_millis(500));
    let stopped = Instant::now();
    let term = Command::new("kill")
        .args(["-TERM", &srv.child.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    let (status, _, _) = page.join().unwrap();
    assert_eq!(status, 304);
    let (status, body) = feed.join().unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["events"], serde_json::json!([]), "{body}");
    assert!(srv.child.wait().unwrap().success());
    assert!(
        stopped.elapsed() < Duration::from_secs(10),
        "stopped after {:?}",
        stopped.elapsed()
    );
}

/// A client that stops reading its answer is let go once a write has made
/// no progress for the request timeout: the answer is cut short and the
/// connection closed, where hyper (which has no write timeout) kept both
/// for as long as the client liked. Others are served meanwhile.
#[test]
fn a_client_that_stops_reading_is_let_go() {
    use std::io::{Read, Write};
    let s = Setup::new();
    let srv = s.start(&["--request-timeout", "1"]);
    let base = srv.base.clone();
    // A timeline of about 7 MB: more than the server's socket can hold
    // (Linux lets a send buffer grow to 4 MiB), so its writes stall.
    for batch in 0..8 {
        let messages: Vec<Value> = (0..150)
            .map(|i| json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": format!("{batch}-{i} {}", "a long line of the trip plan. ".repeat(200))}))
            .collect();
        post_messages(&format!("{base}/api/conversations/slow"), messages);
    }
    s.settle("slow");

    // Room for 4 KiB at a time on the client's side: the server's writes
    // stall once its own buffers are full.
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    let addr: std::net::SocketAddr = base.strip_prefix("http://").unwrap().parse().unwrap();
    sock.connect(&addr.into()).unwrap();
    let mut c: std::net::TcpStream = sock.into();
    write!(
        c,
        "GET /api/conversations/slow/timeline HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ALICE}\r\n\r\n"
    )
    .unwrap();
    let mut head = [0u8; 1024];
    let n = c.read(&mut head).unwrap();
    let head = String::from_utf8_lossy(&head[..n]).into_owned();
    let head_len = head.find("\r\n\r\n").unwrap() + 4;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .map(|v| v.trim().parse().unwrap())
        .unwrap_or(0);
    assert!(length > 6_000_000, "a timeline of {length} bytes");
    std::thread::sleep(Duration::from_secs(4));

    let (status, _) = call(
        "GET",
        &format!("{base}/api/conversations/slow/verify"),
        Some(ALICE),
        None,
    );
    assert_eq!(status, 200, "others are served meanwhile");
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let (mut got, mut buf) = (n, [0u8; 65536]);
    loop {
        match c.read(&mut buf) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("still held after the stall ({e}), {got} bytes read"),
        }
    }
    let whole = head_len + length;
    assert!(
        got < whole,
        "the whole answer came ({got} of {whole} bytes): the stalled connection was kept"
    );
}

/// An address already taken is refused naming it (`io: listening on
/// 127.0.0.1:PORT: Address already in use`, where the error said only the
/// last part).
#[test]
fn a_taken_address_is_named() {
    let s = Setup::new();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_foldline"))
        .arg("--journal")
        .arg(s.journal())
        .args(["serve", "--listen", &addr, "--members"])
        .arg(s.dir.path().join("members.json"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains(&format!("io: listening on {addr}: ")),
        "{said}"
    );
}

/// A history no summary covers, more than the server's memory bound lets
/// a compaction check take at once (an import with `--no-compact` whose
/// oldest turns one fold may take, 5,001 of ~930 bytes, do not fit 16 MiB
/// with their content): each message is still taken, and the check's
/// refusal is logged with what folds it; the `compact` the log names folds
/// it, after which a check at the same bound passes.
#[test]
fn a_history_too_large_for_a_check_is_logged_with_what_folds_it() {
    let s = Setup::new();
    let bin = env!("CARGO_BIN_EXE_foldline");
    let file = s.dir.path().join("m.json");
    let messages: Vec<Value> = (0..6_000)
        .map(|i| {
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            json!({"role": role, "content": format!("message {i} {}", "about the plan and the budget ".repeat(30))})
        })
        .collect();
    std::fs::write(&file, Value::Array(messages).to_string()).unwrap();
    let program = |args: &[&str]| {
        let mut cmd = Command::new(bin);
        cmd.arg("--journal")
            .arg(s.journal())
            .arg("--declaration")
            .arg(s.dir.path().join("decl.json"))
            .args(["--conversation", "big"])
            .args(args);
        cmd
    };
    let succeeds = |mut cmd: Command| {
        let out = cmd.output().unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{said}");
    };
    let mut import = program(&["import", "--no-compact"]);
    import.arg(&file);
    succeeds(import);
    // The server at 16 MiB: a message taken, the check's refusal logged
    // (its log read on a thread, so a missing line fails, never hangs).
    let mut cmd = program(&[
        "--memory-mib",
        "16",
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--members",
    ]);
    cmd.arg(s.dir.path().join("members.json"))
        .stderr(std::process::Stdio::piped());
    let mut srv = Server {
        child: cmd.spawn().unwrap(),
        base: String::new(),
    };
    let log = BufReader::new(srv.child.stderr.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        log.lines()
            .map_while(Result::ok)
            .try_for_each(|l| tx.send(l))
    });
    let next = || {
        rx.recv_timeout(Duration::from_secs(60))
            .expect("a line of the log")
    };
    while srv.base.is_empty() {
        if let Some(a) = next().strip_prefix("foldline serve: listening on ") {
            srv.base = a.to_owned();
        }
    }
    let url = format!("{}/api/conversations/big/messages", srv.base);
    let (status, _) = call(
        "POST",
        &url,
        Some(ALICE),
        Some(r#"{"role": "user", "content": "one more"}"#),
    );
    assert_eq!(status, 201);
    let hint = std::iter::repeat_with(next)
        .find(|l| l.contains("fold it once with"))
        .expect("the refusal's hint");
    // Its checks wait meanwhile: the next message's check is not run (it
    // would fail the same way, at this size in ~0.1 s; 3 s of quiet).
    let (status, _) = call(
        "POST",
        &url,
        Some(ALICE),
        Some(r#"{"role": "user", "content": "and one more"}"#),
    );
    assert_eq!(status, 201);
    let later: Vec<String> =
        std::iter::from_fn(|| rx.recv_timeout(Duration::from_secs(3)).ok()).collect();
    assert!(
        !later.iter().any(|l| l.contains("compaction check of big")),
        "{later:?}"
    );
    // Its context is drawn meanwhile, at the same 16 MiB.
    let context = format!("{}/api/conversations/big/context", srv.base);
    let (status, body) = call("GET", &context, Some(ALICE), None);
    assert_eq!(status, 200, "{body}");
    drop(srv);
    assert!(
        hint.contains("what a compaction check takes of big")
            && hint.contains("is more than 16 MiB")
            && hint.contains("--conversation big --memory-mib 2048 compact")
            && hint.contains("its checks wait 300 s meanwhile"),
        "{hint}"
    );
    // What the log names folds it; then the check passes at 16 MiB.
    succeeds(program(&["--memory-mib", "2048", "compact"]));
    succeeds(program(&["--memory-mib", "16", "context"]));
}

/// The per-member condense rate is counted where every server on the
/// journal reads it (the store beside the journal): two servers on one
/// SQLite file, as replicas behind a balancer are on one PostgreSQL
/// database, allow a member no more between them than one does — and a
/// restart forgets nothing. Another member's rate is their own.
#[test]
fn the_condense_rate_is_shared_by_every_server_on_the_journal() {
    let setup = Setup::new();
    let a = setup.start(&["--condense-per-minute", "2"]);
    let b = setup.start(&["--condense-per-minute", "2"]);
    append_turns(&a.base, "c", 0..turns_for(25_000));
    let condense = |base: &str, token| {
        let (s, v) = call(
            "POST",
            &format!("{base}/api/conversations/c/condense"),
            Some(token),
            None,
        );
        (
            s,
            code(&v).to_owned(),
            v["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        )
    };
    // Alice's first two, one on each server (each answered as the task
    // goes: 202, or 409 while the other folds).
    for base in [&a.base, &b.base] {
        let (s, c, _) = condense(base, ALICE);
        assert!(s == 202 || s == 409, "{s} {c}");
    }
    let (s, c, m) = condense(&b.base, ALICE);
    assert_eq!((s, c.as_str()), (429, "rate_limited"), "{m}");
    assert!(m.contains("at most 2 manual compactions per minute"), "{m}");
    let (s, c, _) = condense(&a.base, ALICE);
    assert_eq!((s, c.as_str()), (429, "rate_limited"));
    drop(a);
    let again = setup.start(&["--condense-per-minute", "2"]);
    let (s, c, _) = condense(&again.base, ALICE);
    assert_eq!(
        (s, c.as_str()),
        (429, "rate_limited"),
        "a restart forgets nothing"
    );
    // Bob's own conversation: his rate is his.
    let (s, v) = call(
        "POST",
        &format!("{}/api/conversations/d/messages", again.base),
        Some(BOB),
        Some(&turn(0)),
    );
    assert_eq!(s, 201, "{v}");
    let (s, c, _) = condense(&b.base, BOB);
    assert_ne!((s, c.as_str()), (429, "rate_limited"));
}
