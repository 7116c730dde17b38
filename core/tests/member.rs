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

mod common;

mod seams {
    use super::common::*;
    use foldline_core::event::Event;
    use foldline_core::format::Kind;
    use foldline_core::member::seams::MemberInput;
    use foldline_core::member::settings::{Availability, Preferences};
    use foldline_core::select::{select, SelectRequest, Selection};
    use foldline_core::turn::Part;

    pub(super) const ALL: Availability = Availability {
        surface: true,
        tool_result: true,
        plain_speak: true,
        prompt_trim: true,
    };
    const OPTED: Preferences = Preferences {
        master: true,
        tool_result: true,
        plain_speak: true,
        prompt_trim: true,
    };

    fn opted_in() -> MemberInput {
        MemberInput {
            availability: ALL,
            preferences: OPTED,
        }
    }

    fn opted_out() -> MemberInput {
        MemberInput {
            availability: ALL,
            preferences: Preferences::default(),
        }
    }

    fn run(
        events: Vec<Event>,
        member: Option<MemberInput>,
        limit: Option<u64>,
    ) -> foldline_core::Result<Selection> {
        select(&SelectRequest {
            limit,
            member,
            ..select_request(&chars_decl(200_000, 100_000), events)
        })
    }

    fn parts(s: &Selection) -> Vec<(Kind, Vec<Part>)> {
        match s.messages.as_ref().unwrap() {
            foldline_core::format::Rendered::Foldline(m) => {
                m.iter().map(|m| (m.kind, m.parts.clone())).collect()
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn without_a_member_state_nothing_changes() {
        let events = member_conversation(None);
        let s = run(events.clone(), None, None).unwrap();
        assert!(s.manifest.member.is_none() && s.answer.is_none());
        assert_eq!(s.manifest.sizes.member, 0);
        let sent: Vec<Vec<Part>> = parts(&s).into_iter().map(|(_, p)| p).collect();
        let journal: Vec<Vec<Part>> = events
            .iter()
            .map(|e| match e {
                Event::Message(m) => m.parts.clone(),
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(sent, journal, "verbatim without a member state");
    }

    #[test]
    fn opting_out_sends_everything_verbatim_again() {
        let events = member_conversation(None);
        let on = run(events.clone(), Some(opted_in()), None).unwrap();
        let off = run(events.clone(), Some(opted_out()), None).unwrap();
        let plain = run(events, None, None).unwrap();
        assert_ne!(on.manifest.rendered_hash, off.manifest.rendered_hash);
        // Off: the projection is the only difference from no state at all.
        let mut off_parts = parts(&off);
        assert_eq!(off_parts.remove(1).0, Kind::Member);
        assert_eq!(off_parts, parts(&plain));
        assert!(off.manifest.member.unwrap().passes.is_empty());
    }

    #[test]
    fn protected_spans_survive_the_trim_of_the_newest_message() {
        let text = "Could you please fetch https://example.org/a?b=1 and run `ls -la`? I don't really want \"basically\" anything else. Thanks!";
        let s = run(member_conversation(Some(text)), Some(opted_in()), None).unwrap();
        let all = parts(&s);
        let Part::Text { text: sent } = &all.last().unwrap().1[0] else {
            panic!()
        };
        for span in [
            "https://example.org/a?b=1",
            "`ls -la`",
            "I don't really want \"basically\" anything else.",
        ] {
            assert!(sent.contains(span), "{span:?} in {sent:?}");
        }
        assert!(sent.len() < text.len(), "{sent:?}");
    }

    #[test]
    fn the_fragments_count_against_the_budget() {
        let events = member_conversation(None);
        let plain = run(events.clone(), None, None).unwrap();
        let member = Some(opted_in());
        let shaped = run(events.clone(), member, None).unwrap();
        assert!(shaped.manifest.sizes.member > 500);
        assert_eq!(
            shaped.manifest.sizes.total,
            plain.manifest.sizes.total + shaped.manifest.sizes.member
        );
        // A budget the plain context fits but the fragments do not: the
        // oldest unit leaves the tail (listed), never silently.
        let tight = run(events, member, Some(plain.manifest.sizes.total)).unwrap();
        assert!(!tight.manifest.omitted.is_empty());
    }

    #[test]
    fn a_settings_question_is_answered_from_the_state_in_force() {
        let events = member_conversation(Some("Which compression settings are enabled?"));
        let off = run(events.clone(), Some(opted_out()), None).unwrap();
        let answer = off.answer.unwrap();
        assert!(answer.contains("Compression preference: off"), "{answer}");
        let on = run(events, Some(opted_in()), None).unwrap();
        assert!(on.answer.unwrap().contains("Prompt trim: on"));
        let not_a_question = run(
            member_conversation(Some("/compact")),
            Some(opted_in()),
            None,
        )
        .unwrap();
        assert!(not_a_question.answer.is_none());
    }
}

/// The fragments a member's context carries (the settings projection,
/// plain-speak) are counted by `plan` when the host passes the deployment's
/// availability: a long conversation compacts early enough that no member's
/// context ever leaves out a turn no summary covers to make room for them.
mod room {
    use super::common::*;
    use foldline_core::declaration::{Budget, CompactionMode, Declaration};
    use foldline_core::member::seams::MemberInput;
    use foldline_core::member::settings::{Availability, Preferences};
    use foldline_core::select::select;
    use foldline_core::turn::Role;

    use super::seams::ALL;
    const SURFACE: Availability = Availability {
        surface: true,
        tool_result: false,
        plain_speak: false,
        prompt_trim: false,
    };

    fn preferences(b: u8) -> Preferences {
        Preferences {
            master: b & 1 != 0,
            tool_result: b & 2 != 0,
            plain_speak: b & 4 != 0,
            prompt_trim: b & 8 != 0,
        }
    }

    /// Seed 002's token budget in lazy mode: compaction only at the hard
    /// limit, where no eager threshold leaves room below it.
    fn lazy_tokens() -> Declaration {
        let mut d = Declaration::new("agent", "agent-compactor");
        d.budget = Budget::default_tokens();
        if let Budget::Tokens { mode, .. } = &mut d.budget {
            *mode = CompactionMode::Lazy;
        }
        d
    }

    /// A conversation of `messages` turns of 200 to 3,000 characters (a
    /// fixed sequence), planned after each message with `planned` passed,
    /// as a host passes its deployment's availability. After each message,
    /// every member's context under `members` (all 16 combinations of
    /// opt-ins): the most turns no summary covers that one of them left
    /// out, summed over the messages.
    fn uncovered_left_out(
        decl: Declaration,
        planned: Availability,
        members: Availability,
        messages: u64,
    ) -> u64 {
        let mut s = Sim::new(decl);
        s.compression = planned;
        let mut x: u64 = 7;
        let mut left_out = 0;
        for i in 0..messages {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let size = 200 + (x >> 33) % 2_800;
            let role = if i % 2 == 0 {
                Role::User
            } else {
                Role::Assistant
            };
            let seq = s.next_seq;
            let body = format!("m{i} {}", "w ".repeat(size as usize / 2));
            s.events.push(msg(seq, &format!("t{seq}"), role, &body));
            s.next_seq += 1;
            s.step();
            let r = s.resolve().unwrap();
            let mut req = select_request(&s.decl, s.events.clone());
            req.frontier = r.frontier;
            req.head = r.head;
            req.amendment = r.amendment;
            left_out += (0u8..16)
                .map(|p| {
                    req.member = Some(MemberInput {
                        availability: members,
                        preferences: preferences(p),
                    });
                    select(&req).unwrap().manifest.uncovered_omitted
                })
                .max()
                .unwrap();
        }
        assert!(s.runs > 3, "the conversation compacted {} times", s.runs);
        left_out
    }

    #[test]
    fn no_member_s_context_leaves_out_an_uncovered_turn_for_the_fragments() {
        // Seed 000's characters (trigger 80,000) and seed 002's tokens in
        // lazy mode, with every tool available and with the surface alone.
        for (decl, messages) in [
            (Declaration::new("agent", "agent-compactor"), 250),
            (lazy_tokens(), 150),
        ] {
            for a in [ALL, SURFACE] {
                assert_eq!(
                    uncovered_left_out(decl.clone(), a, a, messages),
                    0,
                    "{:?} {a:?}",
                    decl.budget
                );
            }
        }
    }

    #[test]
    fn plans_told_nothing_leave_members_turns_out() {
        // The test above is live: planned without the availability, the
        // same conversations leave turns no summary covers out of some
        // member's context just below the limit.
        for (decl, messages) in [
            (Declaration::new("agent", "agent-compactor"), 250),
            (lazy_tokens(), 150),
        ] {
            let n = uncovered_left_out(decl.clone(), Availability::default(), ALL, messages);
            assert!(n > 0, "{:?}: nothing left out", decl.budget);
        }
    }
}
