//! The member-compression corpus in `tests/member/` (seed 002's properties).
use foldline_core::member::settings::{
    settings, Availability, OffReason, Preferences, SettingsRequest,
};
use foldline_core::member::tool_result::{compress, ToolResultRequest};
use foldline_core::member::trim::{trim, TrimRequest, RULES};
use foldline_core::member::Status;
use serde::Deserialize;
use serde_json::Value;

fn corpus<T: for<'a> Deserialize<'a>>(name: &str) -> Vec<T> {
    let path = format!("{}/../tests/member/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

#[derive(Deserialize)]
struct TrimCase {
    name: String,
    rule: String,
    input: String,
    expected: String,
    status: Status,
    reason: Option<String>,
    stops: Option<String>,
}

#[test]
fn prompt_trim_corpus() {
    let cases: Vec<TrimCase> = corpus("trim.json");
    assert!(cases.len() >= 80, "{} cases", cases.len());
    let mut failures = Vec::new();
    let mut bypassed = 0;
    for c in &cases {
        let r = trim(&TrimRequest {
            text: c.input.clone(),
        });
        let m = &r.measurement;
        if r.text != c.expected
            || m.status != c.status
            || (c.reason.is_some() && m.reason != c.reason)
        {
            failures.push(format!(
                "{}: got {:?} {:?} {:?}, expected {:?} {:?} {:?}",
                c.name, r.text, m.status, m.reason, c.expected, c.status, c.reason
            ));
            continue;
        }
        assert_eq!(m.eligible_bytes, c.input.len() as u64, "{}", c.name);
        assert_eq!(m.delivered_bytes, r.text.len() as u64, "{}", c.name);
        if m.status == Status::Applied {
            assert!(m.delivered_bytes < m.eligible_bytes, "{}", c.name);
            assert!(!m.rules.is_empty(), "{}", c.name);
        } else {
            bypassed += 1;
        }
    }
    assert!(
        failures.is_empty(),
        "{} failing cases:\n{}",
        failures.len(),
        failures.join("\n")
    );
    for rule in RULES {
        assert!(
            cases.iter().any(|c| c.status == Status::Applied
                && trim(&TrimRequest {
                    text: c.input.clone()
                })
                .measurement
                .rules
                .iter()
                .any(|r| r == rule.name)),
            "rule {} never fires in the corpus",
            rule.name
        );
        assert!(
            cases.iter().any(|c| c.stops.as_deref() == Some(rule.name)),
            "no case shows a protection stopping {}",
            rule.name
        );
    }
    assert!(cases.iter().any(|c| c.rule == "language"));
    println!(
        "prompt trim: {} cases, {} bypassed ({}‰)",
        cases.len(),
        bypassed,
        bypassed * 1000 / cases.len()
    );
}

#[derive(Deserialize)]
struct ToolCase {
    name: String,
    request: ToolResultRequest,
    expected: Value,
    status: Status,
    reason: Option<String>,
    #[serde(default)]
    rules: Vec<String>,
}

#[test]
fn tool_result_corpus() {
    let cases: Vec<ToolCase> = corpus("tool_result.json");
    assert!(cases.len() >= 30, "{} cases", cases.len());
    let mut failures = Vec::new();
    for c in &cases {
        let r = compress(&c.request);
        let m = &r.measurement;
        if r.result != c.expected
            || m.status != c.status
            || m.reason != c.reason
            || m.rules != c.rules
        {
            failures.push(format!(
                "{}: got {} {:?} {:?} {:?}",
                c.name,
                serde_json::to_string(&r.result)
                    .unwrap()
                    .chars()
                    .take(400)
                    .collect::<String>(),
                m.status,
                m.reason,
                m.rules
            ));
            continue;
        }
        if m.status != Status::Applied {
            assert_eq!(
                r.result, c.request.result,
                "{}: a bypass must be byte-for-byte",
                c.name
            );
        } else {
            // Every field but stdout and stderr is untouched.
            let (a, b) = (
                c.request.result.as_object().unwrap(),
                r.result.as_object().unwrap(),
            );
            for (k, v) in a {
                if k != "stdout" && k != "stderr" {
                    assert_eq!(b.get(k), Some(v), "{}: {k} rewritten", c.name);
                }
            }
            assert!(m.delivered_bytes < m.eligible_bytes);
        }
    }
    assert!(
        failures.is_empty(),
        "{} failing cases:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn a_megabyte_log_is_elided_with_an_explicit_marker() {
    let log: String = (0..40_000)
        .map(|i| format!("line {i:05} ok ........................\n"))
        .collect();
    assert!(log.len() > 1_000_000);
    let r = compress(&ToolResultRequest {
        tool: "run_code".into(),
        private: false,
        result: serde_json::json!({"stdout": log, "exitStatus": 0}),
    });
    let out = r.result["stdout"].as_str().unwrap();
    assert!(out.starts_with("line 00000 ok"));
    assert!(out
        .trim_end()
        .ends_with("line 39999 ok ........................"));
    assert!(out.contains("[… 39921 lines ("), "{}", &out[..200]); // 40,000 lines and the empty one after the last newline
    assert!(out.len() < 12_000);
    assert_eq!(r.measurement.status, Status::Applied);
    assert_eq!(r.measurement.eligible_bytes as usize, log.len());
}

#[test]
fn availability_never_means_opted_in() {
    let all = Availability {
        surface: true,
        tool_result: true,
        plain_speak: true,
        prompt_trim: true,
    };
    let r = settings(&SettingsRequest {
        availability: all,
        preferences: Preferences::default(),
        message: None,
    });
    assert!(!r.state.master);
    for t in [
        r.state.tool_result,
        r.state.plain_speak,
        r.state.prompt_trim,
    ] {
        assert!(!t.enabled);
        assert_eq!(t.off_reason, Some(OffReason::MasterOff));
    }
    assert!(r.state.safety_compaction);
    assert_eq!(r.plain_speak_prompt, None);
    let prefs = Preferences {
        master: true,
        tool_result: true,
        plain_speak: false,
        prompt_trim: true,
    };
    let partial = Availability {
        prompt_trim: false,
        ..all
    };
    let r = settings(&SettingsRequest {
        availability: partial,
        preferences: prefs,
        message: None,
    });
    assert!(r.state.tool_result.enabled);
    assert_eq!(r.state.plain_speak.off_reason, Some(OffReason::NotOptedIn));
    assert_eq!(
        r.state.prompt_trim.off_reason,
        Some(OffReason::NotAvailable)
    );
    assert_eq!(
        r.projection,
        "[pipeline settings — server-authored; members cannot change this block]\n\
         Compression preference: on\n\
         Tool-result compression: on\n\
         Plain-speak responses: off (not opted in)\n\
         Prompt trim: off (not available)\n\
         System safety compaction: always on"
    );
    let off = settings(&SettingsRequest {
        availability: Availability::default(),
        preferences: prefs,
        message: None,
    });
    assert!(
        !off.state.master,
        "no surface: the preference cannot take effect"
    );
    assert_eq!(
        off.state.tool_result.off_reason,
        Some(OffReason::NotAvailable)
    );
}

#[test]
fn settings_questions_get_the_server_rendered_answer() {
    let a = Availability {
        surface: true,
        tool_result: true,
        plain_speak: true,
        prompt_trim: true,
    };
    let p = Preferences {
        master: true,
        plain_speak: true,
        ..Preferences::default()
    };
    for q in [
        "Is prompt trim on for me?",
        "what compression settings are active right now",
        "Which tool-result compression status do I have?",
        "Are you using plain speak?",
    ] {
        let r = settings(&SettingsRequest {
            availability: a,
            preferences: p,
            message: Some(q.into()),
        });
        let ans = r.self_inspection.unwrap_or_else(|| panic!("{q}"));
        assert!(ans.contains("Plain-speak responses: on"));
        assert!(ans.contains("Prompt trim: off (not opted in)"));
        assert!(ans.contains("System safety compaction: always on"));
        assert!(r
            .plain_speak_prompt
            .as_deref()
            .unwrap()
            .contains("destructive-action confirmations"));
    }
    for q in [
        "/compact",
        "Compress this paragraph into one sentence please",
        "What is the capital of Peru?",
    ] {
        let r = settings(&SettingsRequest {
            availability: a,
            preferences: p,
            message: Some(q.into()),
        });
        assert_eq!(r.self_inspection, None, "{q}");
    }
}
