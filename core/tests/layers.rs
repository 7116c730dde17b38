//! The core's modules import one another without cycles: a reader can take
//! them bottom-up — records (`turn`, `declaration`, `frontier`, `boundary`,
//! `amendment`, `event`, `packet`), history (`reconstruct`, `amend`), render
//! (`envelope`, `format`), then the operations (`plan`, `settle`, `resolve`,
//! `select`, `timeline`, `validate`, `api`). This test reads every
//! `crate::<module>` path in `core/src` (comments aside) and fails naming a
//! cycle if one appears.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Module → the modules its code names.
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            for inner in std::fs::read_dir(&path).unwrap() {
                files.push(inner.unwrap().path());
            }
        } else {
            files.push(path);
        }
    }
    for path in files
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
    {
        let rel = path.strip_prefix(&src).unwrap();
        let module = rel
            .iter()
            .next()
            .unwrap()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_owned();
        if module == "lib" {
            continue;
        }
        let code = std::fs::read_to_string(path).unwrap();
        let deps = graph.entry(module.clone()).or_default();
        for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
            for (i, _) in line.match_indices("crate::") {
                let name: String = line[i + 7..]
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                    .collect();
                if !name.is_empty() && name != module {
                    deps.insert(name);
                }
            }
        }
    }
    let known: BTreeSet<String> = graph.keys().cloned().collect();
    for deps in graph.values_mut() {
        deps.retain(|d| known.contains(d));
    }
    graph
}

/// A cycle through `at`, if its imports lead back to a module on `path`.
fn cycle(
    graph: &BTreeMap<String, BTreeSet<String>>,
    at: &str,
    path: &mut Vec<String>,
    done: &mut BTreeSet<String>,
) -> Option<Vec<String>> {
    if let Some(i) = path.iter().position(|m| m == at) {
        let mut c = path[i..].to_vec();
        c.push(at.to_owned());
        return Some(c);
    }
    if done.contains(at) {
        return None;
    }
    path.push(at.to_owned());
    for next in &graph[at] {
        if let Some(c) = cycle(graph, next, path, done) {
            return Some(c);
        }
    }
    path.pop();
    done.insert(at.to_owned());
    None
}

#[test]
fn the_core_modules_import_one_another_without_cycles() {
    let graph = imports();
    assert!(graph.len() > 20, "read {} modules", graph.len());
    assert!(
        graph["select"].contains("plan"),
        "the reader sees real imports"
    );
    let mut done = BTreeSet::new();
    for module in graph.keys() {
        if let Some(c) = cycle(&graph, module, &mut Vec::new(), &mut done) {
            panic!("an import cycle in core/src: {}", c.join(" → "));
        }
    }
}

#[test]
fn the_records_name_no_operation() {
    let graph = imports();
    let operations = [
        "plan", "settle", "resolve", "select", "timeline", "validate", "run", "api",
    ];
    for record in [
        "turn",
        "declaration",
        "frontier",
        "boundary",
        "amendment",
        "event",
    ] {
        for op in operations {
            assert!(
                !graph[record].contains(op),
                "the record module `{record}` imports `{op}`, a layer above it"
            );
        }
    }
}
