//! The contract's JSON shape, for the check that keeps the TypeScript types
//! in step with the Rust ones (compiled in tests only; nothing of it is in
//! the artifact).
//!
//! `derive(Decode)` gives every contract type a [`Shape`]: its fields' JSON
//! names, whether a request may omit them, and the contract types they refer
//! to; for enums, the variants. The test below writes them, from the entry
//! points' requests and answers down, to `js/test/types/shapes.json`; the
//! package's type test (`js/test/types/contract.mjs`) turns that file into
//! compile-time assertions over `js/src/types.ts`, so a field added, renamed
//! or dropped on either side fails a test.

use std::collections::BTreeMap;

/// Type name → its shape as JSON text.
pub type Shapes = BTreeMap<&'static str, &'static str>;

/// A contract type's shape, and the shapes of the types it refers to.
pub trait Shape {
    /// Add this type's shape (and those it refers to) to `out`.
    fn shapes(out: &mut Shapes);
}

macro_rules! primitive {
    ($($t:ty),*) => {$(impl Shape for $t { fn shapes(_: &mut Shapes) {} })*};
}
primitive!(
    String,
    bool,
    u8,
    u16,
    u32,
    u64,
    usize,
    i32,
    i64,
    serde_json::Value
);

impl<T: Shape> Shape for Option<T> {
    fn shapes(out: &mut Shapes) {
        T::shapes(out);
    }
}
impl<T: Shape> Shape for Vec<T> {
    fn shapes(out: &mut Shapes) {
        T::shapes(out);
    }
}
impl<T: Shape> Shape for Box<T> {
    fn shapes(out: &mut Shapes) {
        T::shapes(out);
    }
}
impl<K, V: Shape> Shape for BTreeMap<K, V> {
    fn shapes(out: &mut Shapes) {
        V::shapes(out);
    }
}

/// A rendering is foldline's messages or a provider's shape (typed in
/// TypeScript per format, by `MessagesOf`): opaque here, but foldline's
/// message type is part of the contract.
impl Shape for crate::render::format::Rendered {
    fn shapes(out: &mut Shapes) {
        if out.insert("Rendered", "{\"kind\":\"opaque\"}").is_none() {
            <crate::ops::select::ContextMessage as Shape>::shapes(out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The contract file, next to the package's type tests.
    const FILE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../js/test/types/shapes.json");

    fn contract() -> String {
        let mut out = Shapes::new();
        <crate::ops::plan::PlanRequest as Shape>::shapes(&mut out);
        <crate::ops::plan::PlanOutcome as Shape>::shapes(&mut out);
        <crate::ops::validate::ValidateRequest as Shape>::shapes(&mut out);
        <crate::ops::validate::ValidateResponse as Shape>::shapes(&mut out);
        <crate::ops::select::SelectRequest as Shape>::shapes(&mut out);
        <crate::ops::select::Selection as Shape>::shapes(&mut out);
        <crate::ops::timeline::TimelineRequest as Shape>::shapes(&mut out);
        <crate::ops::timeline::Timeline as Shape>::shapes(&mut out);
        <crate::ops::member::trim::TrimRequest as Shape>::shapes(&mut out);
        <crate::ops::member::trim::TrimResult as Shape>::shapes(&mut out);
        <crate::ops::member::tool_result::ToolResultRequest as Shape>::shapes(&mut out);
        <crate::ops::member::tool_result::ToolResultResponse as Shape>::shapes(&mut out);
        <crate::ops::member::settings::SettingsRequest as Shape>::shapes(&mut out);
        <crate::ops::member::settings::SettingsResponse as Shape>::shapes(&mut out);
        <crate::ops::run::StepRequest as Shape>::shapes(&mut out);
        <crate::ops::run::Step as Shape>::shapes(&mut out);
        <crate::error::Error as Shape>::shapes(&mut out);
        let body: Vec<String> = out.iter().map(|(k, v)| format!("  {k:?}: {v}")).collect();
        format!("{{\n{}\n}}\n", body.join(",\n"))
    }

    /// The shapes are written with `FOLDLINE_WRITE_CONTRACT=1`; otherwise a
    /// Rust change that the file does not hold fails here.
    #[test]
    fn the_contract_file_holds_the_rust_types() {
        let now = contract();
        serde_json::from_str::<serde_json::Value>(&now).expect("the shapes are JSON");
        write_or_check(
            FILE,
            &now,
            "js/test/types/shapes.json is not what the Rust types say: run \
             FOLDLINE_WRITE_CONTRACT=1 cargo test -p foldline-core --lib schema, \
             then make js/src/types.ts agree (npm run test:types checks it)",
        );
    }

    /// A file generated from the Rust code: written with
    /// `FOLDLINE_WRITE_CONTRACT=1`, otherwise checked, failing with `stale`
    /// when it says something else.
    pub(super) fn write_or_check(file: &str, now: &str, stale: &str) {
        if std::env::var_os("FOLDLINE_WRITE_CONTRACT").is_some() {
            std::fs::write(file, now).expect("write the generated file");
            return;
        }
        let stored = std::fs::read_to_string(file).unwrap_or_default();
        assert!(stored == now, "{stale}");
    }
}

/// `js/src/defaults.ts`, written from `crate::defaults` and the roles a
/// compaction never folds.
#[cfg(test)]
mod js_defaults {
    /// The JS package's copy, next to the modules that use it.
    const FILE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../js/src/defaults.ts");

    fn typescript() -> String {
        let mut out = String::from(
            "// The hosts' defaults, written from core/src/defaults.rs (do not edit:\n\
             // FOLDLINE_WRITE_CONTRACT=1 cargo test -p foldline-core --lib schema).\n",
        );
        for (name, value, doc) in crate::defaults::ALL {
            out.push_str(&format!("\n/** {doc} */\nexport const {name} = {value};\n"));
        }
        // The roles a compaction never folds (`Role::always_pinned`): a host
        // keeps their turns in the live window whatever the head covers.
        use crate::records::turn::Role;
        let all = [
            Role::System,
            Role::Developer,
            Role::Document,
            Role::User,
            Role::Assistant,
            Role::Tool,
        ];
        for r in all {
            // A role added to the enum must be added above: this match stops compiling.
            match r {
                Role::System
                | Role::Developer
                | Role::Document
                | Role::User
                | Role::Assistant
                | Role::Tool => {}
            }
        }
        let pinned: Vec<String> = all
            .into_iter()
            .filter(|r| r.always_pinned())
            .map(|r| serde_json::to_string(&r).unwrap())
            .collect();
        out.push_str(&format!(
            "\n/** Roles a compaction never folds (`Role::always_pinned`). */\nexport const PINNED_ROLES: ReadonlySet<string> = new Set([{}]);\n",
            pinned.join(", ")
        ));
        // Every name an output format is read by: the core's `Format` with
        // its aliases (`ai-sdk`), so a server refuses what the core would.
        let mut shapes = super::Shapes::new();
        <crate::render::format::Format as super::Shape>::shapes(&mut shapes);
        let shape: serde_json::Value = serde_json::from_str(shapes["Format"]).unwrap();
        let names: Vec<String> = shape["names"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.to_string())
            .collect();
        out.push_str(&format!(
            "\n/** Every name an output format is read by (the core's `Format`, with its aliases). */\nexport const FORMATS: ReadonlySet<string> = new Set([{}]);\n",
            names.join(", ")
        ));
        out
    }

    /// `js/src/defaults.ts` says what the Rust constants say.
    #[test]
    fn the_js_defaults_are_the_cores() {
        super::tests::write_or_check(
            FILE,
            &typescript(),
            "js/src/defaults.ts is not what core/src/defaults.rs says: run \
             FOLDLINE_WRITE_CONTRACT=1 cargo test -p foldline-core --lib schema",
        );
    }
}
