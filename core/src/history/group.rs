//! Source groups and coherent units.
//!
//! Turns sharing a source sequence form a source group. Groups merge into one
//! *unit* wherever cutting between them would separate a tool call from its
//! result, or would let a part start with a tool result. Compaction freezes and
//! retains whole units only, so no turn or tool pair is ever split.

use std::collections::BTreeMap;

use crate::records::turn::Turn;

/// A run of whole source groups that may not be cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unit {
    /// First turn index (inclusive) in the slice the units were built from.
    pub start: usize,
    /// Last turn index (exclusive).
    pub end: usize,
    /// Source groups inside.
    pub groups: u64,
}

/// Split ordered, non-pinned turns into coherent units.
pub fn units(turns: &[&Turn]) -> Vec<Unit> {
    let n = turns.len();
    if n == 0 {
        return Vec::new();
    }
    // Group index of each turn, and the first turn of each group.
    let mut group_of = Vec::with_capacity(n);
    let mut group_start = Vec::new();
    for (i, t) in turns.iter().enumerate() {
        if i == 0 || turns[i - 1].source_seq != t.source_seq {
            group_start.push(i);
        }
        group_of.push(group_start.len() - 1);
    }
    let g = group_start.len();
    // blocked[k] > 0: the cut between group k and k+1 is forbidden.
    // A difference array keeps this linear in the number of turns.
    let mut diff = vec![0i64; g + 1];
    let mut call_group: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, t) in turns.iter().enumerate() {
        let gi = group_of[i];
        for id in t.result_ids() {
            if let Some(&gc) = call_group.get(id) {
                if gc < gi {
                    diff[gc] += 1;
                    diff[gi] -= 1;
                }
            }
        }
        for id in t.call_ids() {
            call_group.insert(id, gi);
        }
    }
    let mut blocked = vec![false; g];
    let mut run = 0i64;
    for k in 0..g {
        run += diff[k];
        blocked[k] = run > 0;
    }
    // A group that starts with a tool result cannot start a unit.
    for k in 1..g {
        if turns[group_start[k]].starts_with_tool_result() {
            blocked[k - 1] = true;
        }
    }
    let mut out = Vec::new();
    let mut start_group = 0usize;
    for k in 0..g {
        let last = k + 1 == g;
        if last || !blocked[k] {
            let start = group_start[start_group];
            let end = if last { n } else { group_start[k + 1] };
            out.push(Unit {
                start,
                end,
                groups: (k + 1 - start_group) as u64,
            });
            start_group = k + 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::turn::{Part, Role};

    fn turn(id: &str, seq: u64, role: Role, parts: Vec<Part>) -> Turn {
        Turn {
            turn_id: id.into(),
            source_seq: seq,
            index: 0,
            role,
            author_agent: None,
            sender: String::new(),
            source: String::new(),
            parts,
            chars: 1,
            tokens: 1,
            content_hash: String::new(),
            pinned: false,
            sensitive: false,
            late: false,
            corrected: false,
            metadata_only: false,
            meta_calls: Vec::new(),
            meta_results: Vec::new(),
            attributed: false,
        }
    }

    #[test]
    fn tool_pair_across_groups_is_one_unit() {
        let t = [
            turn("a", 1, Role::User, vec![Part::Text { text: "x".into() }]),
            turn(
                "b",
                2,
                Role::Assistant,
                vec![Part::ToolCall {
                    call_id: "c1".into(),
                    name: "f".into(),
                    arguments: "{}".into(),
                    custom: false,
                    provider_options: serde_json::Value::Null,
                }],
            ),
            turn("m", 3, Role::User, vec![Part::Text { text: "y".into() }]),
            turn(
                "c",
                4,
                Role::Tool,
                vec![Part::ToolResult {
                    call_id: "c1".into(),
                    name: "f".into(),
                    content: "r".into(),
                    is_error: false,
                }],
            ),
            turn("d", 5, Role::User, vec![Part::Text { text: "z".into() }]),
        ];
        let refs: Vec<&Turn> = t.iter().collect();
        let u = units(&refs);
        assert_eq!(
            u.iter().map(|u| (u.start, u.end)).collect::<Vec<_>>(),
            vec![(0, 1), (1, 4), (4, 5)]
        );
    }

    #[test]
    fn orphan_tool_result_never_starts_a_unit() {
        let t = [
            turn("a", 1, Role::User, vec![Part::Text { text: "x".into() }]),
            turn(
                "b",
                2,
                Role::Tool,
                vec![Part::ToolResult {
                    call_id: "gone".into(),
                    name: String::new(),
                    content: "r".into(),
                    is_error: false,
                }],
            ),
        ];
        let refs: Vec<&Turn> = t.iter().collect();
        assert_eq!(units(&refs).len(), 1);
    }

    /// An approval request and its answer arrive apart (the member answers
    /// later, between other turns): the call, the request, the answer and
    /// the result stay one unit.
    #[test]
    fn an_approval_and_its_answer_are_one_unit() {
        let t = [
            turn("a", 1, Role::User, vec![Part::Text { text: "x".into() }]),
            turn(
                "b",
                2,
                Role::Assistant,
                vec![
                    Part::ToolCall {
                        call_id: "c1".into(),
                        name: "pay".into(),
                        arguments: "{}".into(),
                        custom: false,
                        provider_options: serde_json::Value::Null,
                    },
                    Part::ApprovalRequest {
                        approval_id: "ap1".into(),
                        call_id: "c1".into(),
                    },
                ],
            ),
            turn("m", 3, Role::User, vec![Part::Text { text: "y".into() }]),
            turn(
                "c",
                4,
                Role::Tool,
                vec![Part::ApprovalResponse {
                    approval_id: "ap1".into(),
                    approved: true,
                    reason: String::new(),
                }],
            ),
            turn("d", 5, Role::User, vec![Part::Text { text: "z".into() }]),
        ];
        let refs: Vec<&Turn> = t.iter().collect();
        assert_eq!(
            units(&refs)
                .iter()
                .map(|u| (u.start, u.end))
                .collect::<Vec<_>>(),
            vec![(0, 1), (1, 4), (4, 5)]
        );
    }
}
