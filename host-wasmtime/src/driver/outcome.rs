//! How an [`Outcome`] reads to a person: the line `foldline compact` prints
//! and the message of `foldline serve`'s `nothing_to_fold`.

use std::fmt;

use foldline_core::declaration::Metric;
use foldline_core::plan::{PauseReason, PlanOutcome};

use super::Outcome;

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Busy => write!(f, "busy: another writer holds this conversation"),
            Outcome::Skipped(r) => write!(
                f,
                "skipped: {} of the {} {} at which compaction is due",
                r.total,
                r.trigger,
                unit(r.metric)
            ),
            Outcome::Paused(PlanOutcome::Paused {
                reason: PauseReason::CircuitOpen,
                consecutive_failures,
                retry_in,
            }) => {
                write!(
                    f,
                    "paused: the circuit breaker opened after {consecutive_failures} failed runs"
                )?;
                match retry_in {
                    Some(n) => write!(f, "; one attempt is let through after {n} more turns"),
                    None => Ok(()),
                }
            }
            Outcome::Paused(_) => write!(
                f,
                "paused: the declaration disables eager compaction (safety compaction still runs at the hard limit)"
            ),
            Outcome::Warm(Some(packet)) => {
                write!(f, "warm: a candidate is prepared ahead of need ({packet})")
            }
            Outcome::Warm(None) => write!(f, "warm: between the soft and the eager threshold"),
            Outcome::Compacted(b) => write!(
                f,
                "compacted through source {}: {} turns folded, context {} -> {} characters (boundary {})",
                b.covered_through_seq,
                b.input.turn_count,
                b.stats.before.chars,
                b.stats.after.chars,
                b.id
            ),
            Outcome::Refused(e) => write!(f, "refused: {} ({})", e.code, e.message),
            Outcome::Failed(r) => write!(f, "{} (audit: {})", r.notice, r.audit_reason),
        }
    }
}

/// The metric's unit, as a person counts it.
fn unit(m: Metric) -> &'static str {
    match m {
        Metric::Chars => "characters",
        Metric::Tokens => "tokens",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outcome_reads_as_a_sentence_not_as_rust() {
        let skipped = Outcome::Skipped(foldline_core::plan::SkipRecord {
            metric: Metric::Chars,
            total: 120,
            trigger: 80_000,
            warm_at: None,
            pinned: 0,
            envelopes: 0,
            eligible_turns: 0,
            warm_refused: None,
            checked_through_seq: 0,
        });
        assert_eq!(
            skipped.to_string(),
            "skipped: 120 of the 80000 characters at which compaction is due"
        );
        let open = Outcome::Paused(PlanOutcome::Paused {
            reason: PauseReason::CircuitOpen,
            consecutive_failures: 3,
            retry_in: Some(7),
        });
        assert_eq!(
            open.to_string(),
            "paused: the circuit breaker opened after 3 failed runs; one attempt is let through after 7 more turns"
        );
        for o in [skipped, open, Outcome::Busy, Outcome::Warm(None)] {
            let s = o.to_string();
            assert!(!s.contains('{') && !s.contains("Record"), "{s}");
        }
    }
}
