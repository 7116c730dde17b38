//! The core is layered, one directory per layer under `core/src`:
//! primitives (the files beside `lib.rs`: `canonical`, `error`, `decode`),
//! `records/` (the wire types), `render/` (envelopes, formats, budgets: the
//! model-facing forms of records), `history/` (reconstruction, amendments,
//! sized by their envelopes), then `ops/` (`plan`, `settle`,
//! `resolve`, `select`, `timeline`, `stream`, `run`, `validate`, `member`),
//! then `entry/` (`api`, `held`, `settle_bytes`, `schema`: the JSON entry
//! points hosts call). These tests read every `crate::<module>` path in `core/src`
//! (comments aside) and fail naming a cycle between modules, or an import of
//! a layer above the importing one.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, bottom up.
const LAYERS: [&str; 6] = ["primitives", "records", "render", "history", "ops", "entry"];

/// Every `.rs` file under `dir`.
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// A file's layer and module: `src/x.rs` is the primitive `x`,
/// `src/<layer>/x.rs` the module `x` of that layer, and a module directory's
/// files (`ops/member/*.rs`) belong to it. `None`: `lib.rs` and a layer's `mod.rs`.
fn place(rel: &Path) -> Option<(String, String)> {
    let parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned())
        .collect();
    match parts.as_slice() {
        [file] if file == "lib" => None,
        [file] => Some(("primitives".into(), file.clone())),
        [_, file] if file == "mod" => None,
        [layer, file] => Some((layer.clone(), file.clone())),
        [layer, module, ..] => Some((layer.clone(), module.clone())),
        [] => None,
    }
}

/// The lowercase segment at the start of `path`.
fn segment(path: &str) -> String {
    path.chars()
        .take_while(|c| c.is_ascii_lowercase() || *c == '_')
        .collect()
}

/// The module a path after `crate::` names: `records::event::Event` names
/// `event`, a primitive's path (`error::Code`) its first segment.
fn path_module(path: &str) -> String {
    let first = segment(path);
    match path[first.len()..].strip_prefix("::") {
        Some(rest) if LAYERS[1..].contains(&first.as_str()) => segment(rest),
        _ => first,
    }
}

/// Module → its layer and the modules its code names.
fn imports() -> BTreeMap<String, (String, BTreeSet<String>)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut all = Vec::new();
    files(&src, &mut all);
    let mut graph: BTreeMap<String, (String, BTreeSet<String>)> = BTreeMap::new();
    for path in &all {
        let Some((layer, module)) = place(path.strip_prefix(&src).unwrap()) else {
            continue;
        };
        assert!(LAYERS.contains(&layer.as_str()), "{path:?} is in no layer");
        let code = std::fs::read_to_string(path).unwrap();
        let (_, deps) = graph
            .entry(module.clone())
            .or_insert_with(|| (layer.clone(), BTreeSet::new()));
        for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
            for (i, _) in line.match_indices("crate::") {
                let name = path_module(&line[i + 7..]);
                if !name.is_empty() && name != module {
                    deps.insert(name);
                }
            }
        }
    }
    let known: BTreeSet<String> = graph.keys().cloned().collect();
    for (_, deps) in graph.values_mut() {
        deps.retain(|d| known.contains(d));
    }
    graph
}

/// Module → the modules it imports.
fn edges() -> BTreeMap<String, BTreeSet<String>> {
    imports().into_iter().map(|(m, (_, d))| (m, d)).collect()
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
    let graph = edges();
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
    let graph = edges();
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

#[test]
fn each_layer_imports_only_the_layers_below_it() {
    let graph = imports();
    let rank = |layer: &str| LAYERS.iter().position(|l| *l == layer).unwrap();
    let mut upward = Vec::new();
    for (module, (layer, deps)) in &graph {
        for dep in deps {
            let (dep_layer, _) = &graph[dep];
            if rank(dep_layer) > rank(layer) {
                upward.push(format!(
                    "`{module}` ({layer}) imports `{dep}` ({dep_layer})"
                ));
            }
        }
    }
    assert!(upward.is_empty(), "imports of a layer above: {upward:#?}");
    assert_eq!(graph["plan"].0, "ops");
    assert_eq!(graph["boundary"].0, "records");
    assert!(
        graph["member"].0 == "ops" && !graph.contains_key("trim"),
        "a module directory's files (ops/member/*.rs) belong to it"
    );
}

/// A path through the crate root's re-exports (`crate::event`) hides which
/// layer it reaches into; every in-crate import names the layer
/// (`crate::records::event`), or is a primitive beside `lib.rs`.
#[test]
fn in_crate_paths_name_the_layer_they_import_from() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut all = Vec::new();
    files(&src, &mut all);
    let primitives: BTreeSet<String> = imports()
        .into_iter()
        .filter(|(_, (layer, _))| layer == "primitives")
        .map(|(m, _)| m)
        .collect();
    let mut hidden = Vec::new();
    for path in &all {
        let code = std::fs::read_to_string(path).unwrap();
        for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
            for (i, _) in line.match_indices("crate::") {
                let first = segment(&line[i + 7..]);
                if !first.is_empty()
                    && !LAYERS.contains(&first.as_str())
                    && !primitives.contains(&first)
                {
                    hidden.push(format!("{}: crate::{first}", path.display()));
                }
            }
        }
    }
    assert!(primitives.contains("error") && primitives.contains("canonical"));
    assert!(hidden.is_empty(), "paths through the root: {hidden:#?}");
}
