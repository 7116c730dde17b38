//! Seed 002's settings by their names, as environment variables of the
//! `foldline` program and `foldline serve`: each overrides the matching
//! field of the declaration (or of the driver), so operators set them as the
//! seed names them; declaration files keep working. Ratios are decimals
//! (`0.70`) read exactly into the declaration's per-mille, never through a
//! float. docs/defaults.md lists them.

use foldline_core::declaration::{Budget, CompactionMode, Declaration};

use crate::error::{HostError, Result};

/// The token-budget variables and what they set.
pub const BUDGET_VARIABLES: [&str; 8] = [
    "CHAT_CONTEXT_DEFAULT_WINDOW_TOKENS",
    "CHAT_CONTEXT_RESERVED_OUTPUT_TOKENS",
    "CHAT_CONTEXT_SAFETY_MARGIN_TOKENS",
    "CHAT_CONTEXT_RETRIEVAL_TOKEN_SHARE",
    "CONTEXT_COMPACTION_MODE",
    "CONTEXT_COMPACTION_SOFT_RATIO",
    "CONTEXT_COMPACTION_EAGER_RATIO",
    "CONTEXT_COMPACTION_TARGET_RATIO",
];

/// What the settings change beside the declaration: the driver's warm
/// candidates and their lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriverSettings {
    /// `CONTEXT_COMPACTION_WARM_CANDIDATES_ENABLED` (and the master switch).
    pub warm_candidates: Option<bool>,
    /// `CONTEXT_COMPACTION_WARM_CANDIDATE_LEASE_SECONDS`, in milliseconds.
    pub warm_lease_ms: Option<u64>,
}

/// Apply the settings found by `get` (the process environment in the
/// program) to `decl`: any token-budget variable turns the budget into a
/// token budget (from its current token fields, or seed 002's defaults) and
/// sets its field. `CHAT_CONTEXT_BUDGET_ENABLED=false` is the master switch
/// off: no eager compaction and no warm candidates (lazy mode) — it cannot
/// turn off the safety compaction at the hard limit, which is mandatory.
///
/// # Errors
/// `invalid_input` naming the variable and the value it refused.
pub fn apply(
    decl: &mut Declaration,
    get: impl Fn(&str) -> Option<String>,
) -> Result<DriverSettings> {
    let vars = Vars(get);
    let enabled = vars.flag("CHAT_CONTEXT_BUDGET_ENABLED")?;
    if BUDGET_VARIABLES.iter().any(|n| (vars.0)(n).is_some()) || enabled == Some(false) {
        decl.budget = token_budget(&decl.budget, &vars, enabled)?;
    }
    let warm = vars.flag("CONTEXT_COMPACTION_WARM_CANDIDATES_ENABLED")?;
    Ok(DriverSettings {
        warm_candidates: if enabled == Some(false) {
            Some(false)
        } else {
            warm
        },
        warm_lease_ms: vars
            .int("CONTEXT_COMPACTION_WARM_CANDIDATE_LEASE_SECONDS")?
            .map(|s| s.saturating_mul(1000)),
    })
}

/// The token budget the variables set, from `current`'s token fields (or
/// seed 002's defaults when it counts characters); the master switch off
/// (`enabled == Some(false)`) makes it lazy.
fn token_budget<F: Fn(&str) -> Option<String>>(
    current: &Budget,
    vars: &Vars<F>,
    enabled: Option<bool>,
) -> Result<Budget> {
    let mut budget = match current {
        b @ Budget::Tokens { .. } => *b,
        Budget::Chars { .. } => Budget::default_tokens(),
    };
    if let Budget::Tokens {
        window,
        reserved_output,
        safety_margin,
        retrieval_share,
        soft,
        eager,
        target,
        mode,
    } = &mut budget
    {
        let set = |field: &mut u64, v: Option<u64>| *field = v.unwrap_or(*field);
        set(window, vars.int("CHAT_CONTEXT_DEFAULT_WINDOW_TOKENS")?);
        set(
            reserved_output,
            vars.int("CHAT_CONTEXT_RESERVED_OUTPUT_TOKENS")?,
        );
        set(
            safety_margin,
            vars.int("CHAT_CONTEXT_SAFETY_MARGIN_TOKENS")?,
        );
        set(
            retrieval_share,
            vars.ratio("CHAT_CONTEXT_RETRIEVAL_TOKEN_SHARE")?,
        );
        set(soft, vars.ratio("CONTEXT_COMPACTION_SOFT_RATIO")?);
        set(eager, vars.ratio("CONTEXT_COMPACTION_EAGER_RATIO")?);
        set(target, vars.ratio("CONTEXT_COMPACTION_TARGET_RATIO")?);
        *mode = vars.mode()?.unwrap_or(*mode);
        if enabled == Some(false) {
            *mode = CompactionMode::Lazy;
        }
    }
    Ok(budget)
}

/// The variables as [`apply`] reads them: each one parsed, or refused
/// naming the variable and the value.
struct Vars<F: Fn(&str) -> Option<String>>(F);

impl<F: Fn(&str) -> Option<String>> Vars<F> {
    fn parse<T>(&self, name: &str, what: &str, f: impl Fn(&str) -> Option<T>) -> Result<Option<T>> {
        (self.0)(name)
            .map(|v| f(v.trim()).ok_or_else(|| HostError::Input(format!("{name}={v:?}: {what}"))))
            .transpose()
    }
    fn int(&self, name: &str) -> Result<Option<u64>> {
        self.parse(name, "a whole number is needed", |v| v.parse().ok())
    }
    fn ratio(&self, name: &str) -> Result<Option<u64>> {
        self.parse(
            name,
            "a ratio from 0 to 1 with at most three decimals is needed (0.70)",
            permille,
        )
    }
    fn flag(&self, name: &str) -> Result<Option<bool>> {
        self.parse(name, "true or false is needed", |v| {
            match v.to_ascii_lowercase().as_str() {
                "1" | "true" | "yes" | "on" => Some(true),
                "0" | "false" | "no" | "off" => Some(false),
                _ => None,
            }
        })
    }
    fn mode(&self) -> Result<Option<CompactionMode>> {
        self.parse(
            "CONTEXT_COMPACTION_MODE",
            "eager or lazy is needed",
            |v| match v.to_ascii_lowercase().as_str() {
                "eager" => Some(CompactionMode::Eager),
                "lazy" => Some(CompactionMode::Lazy),
                _ => None,
            },
        )
    }
}

/// A decimal ratio from 0 to 1 (`0.7`, `0.70`, `1`) as per-mille, exactly.
fn permille(s: &str) -> Option<u64> {
    let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
    if whole.is_empty() && frac.is_empty() || frac.len() > 3 {
        return None;
    }
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    if !frac.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let frac: u64 = format!("{frac:0<3}").parse().ok()?;
    let v = whole.checked_mul(1000)?.checked_add(frac)?;
    (v <= 1000).then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn ratios_are_read_exactly() {
        assert_eq!(permille("0.7"), Some(700));
        assert_eq!(permille("0.705"), Some(705));
        assert_eq!(permille("1"), Some(1000));
        assert_eq!(permille(".5"), Some(500));
        for bad in ["1.5", "0.7055", "-0.1", "x", "", "."] {
            assert_eq!(permille(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_seed_names_set_the_token_budget() {
        let mut d = Declaration::new("a", "a-compactor");
        let s = apply(
            &mut d,
            env(&[
                ("CHAT_CONTEXT_DEFAULT_WINDOW_TOKENS", "32768"),
                ("CONTEXT_COMPACTION_EAGER_RATIO", "0.80"),
                ("CONTEXT_COMPACTION_MODE", "lazy"),
                ("CONTEXT_COMPACTION_WARM_CANDIDATE_LEASE_SECONDS", "60"),
            ]),
        )
        .unwrap();
        match d.budget {
            Budget::Tokens {
                window,
                eager,
                mode,
                ..
            } => assert_eq!((window, eager, mode), (32_768, 800, CompactionMode::Lazy)),
            b => panic!("{b:?}"),
        }
        assert_eq!(s.warm_lease_ms, Some(60_000));
    }

    /// The master switch off: lazy, no warm candidates — the hard limit's
    /// safety compaction stays (the breaker and the switch never stop it;
    /// vectors plan/breaker-never-stops-safety and plan/tokens-lazy-*).
    #[test]
    fn the_master_switch_off_keeps_safety_compaction() {
        let mut d = Declaration::new("a", "a-compactor");
        let s = apply(&mut d, env(&[("CHAT_CONTEXT_BUDGET_ENABLED", "false")])).unwrap();
        assert!(matches!(
            d.budget,
            Budget::Tokens {
                mode: CompactionMode::Lazy,
                ..
            }
        ));
        assert_eq!(s.warm_candidates, Some(false));
    }

    #[test]
    fn a_bad_value_names_its_variable() {
        let mut d = Declaration::new("a", "a-compactor");
        let e = apply(&mut d, env(&[("CONTEXT_COMPACTION_SOFT_RATIO", "70%")])).unwrap_err();
        assert!(
            e.to_string().contains("CONTEXT_COMPACTION_SOFT_RATIO"),
            "{e}"
        );
        assert_eq!(e.code(), "invalid_input");
    }
}
