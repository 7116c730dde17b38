// The project's structure, checked (issue #34):
// - no import circle among the files of host-wasmtime/src or js/src
//   (core/src has its own layered check: core/tests/layers.rs);
// - no module of the JS package imports its face (js/src/core.ts): only the
//   platform entries re-export it;
// - no source file over 800 lines in core/src, host-wasmtime/src, js/src;
// - no function of a host over 80 lines (a function that must be longer is
//   listed in LONG with its length, which it may not pass; the list is empty).
// Run: node tests/structure/run.mjs (from the repository root).
import { readFileSync, readdirSync, statSync, existsSync } from "node:fs";
import { join, dirname, relative, basename } from "node:path";

const root = join(dirname(new URL(import.meta.url).pathname), "..", "..");
const MAX_FILE_LINES = 800;
const MAX_FN_LINES = 80;
// Known long functions (path:name → lines). None today: keep it so.
const LONG = {};

function files(dir, ext, out = []) {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) files(p, ext, out);
    else if (name.endsWith(ext)) out.push(p);
  }
  return out;
}
const rel = (p) => relative(root, p);
const code = (p) => readFileSync(p, "utf8").split("\n").filter((l) => !l.trimStart().startsWith("//"));
const problems = [];

// A circle through `at`, if its edges lead back to a file on `path`.
function circle(graph, at, path, done) {
  const i = path.indexOf(at);
  if (i >= 0) return [...path.slice(i), at];
  if (done.has(at)) return null;
  path.push(at);
  for (const next of graph.get(at) ?? []) {
    const c = circle(graph, next, path, done);
    if (c) return c;
  }
  path.pop();
  done.add(at);
  return null;
}
function circles(name, graph) {
  const done = new Set();
  for (const at of graph.keys()) {
    const c = circle(graph, at, [], done);
    if (c) { problems.push(`${name}: an import circle: ${c.map(rel).join(" -> ")}`); return; }
  }
}

// Rust: a file's edges are the files its `crate::a::b` and `super::x` paths
// name. A module directory's mod.rs and the files it declares are one
// module (containment, not an import), as are lib.rs and the files beside it.
function rustGraph(src) {
  const all = files(src, ".rs");
  const resolve = (dir, segs) => {
    let best = null;
    for (let k = 1; k <= segs.length; k++) {
      const base = join(dir, ...segs.slice(0, k));
      const f = [`${base}.rs`, join(base, "mod.rs")].find(existsSync);
      if (!f) break;
      best = f;
    }
    return best;
  };
  const facade = (f) => ["mod.rs", "lib.rs", "main.rs"].includes(basename(f));
  const graph = new Map();
  for (const f of all) {
    const deps = new Set();
    const own = dirname(f);
    for (const line of code(f)) {
      if (/^\s*(pub(\([a-z]+\))?\s+)?mod\s/.test(line)) continue;
      // `crate::{a, b::c}` names `crate::a` and `crate::b::c`.
      const paths = line.replace(/\b(crate|super)::\{([^}]*)\}/g, (_, root, items) =>
        items.split(",").map((i) => `${root}::${i.trim()}`).join(" "));
      for (const m of paths.matchAll(/\b(crate|super)((?:::[a-z_][a-z0-9_]*)+)/g)) {
        const segs = m[2].split("::").filter(Boolean);
        const dir = m[1] === "crate" ? src : (facade(f) ? dirname(own) : own);
        const to = resolve(dir, segs) ?? (m[1] === "super" ? [join(dir, "mod.rs"), join(dir, "lib.rs")].find(existsSync) : null);
        if (!to || to === f) continue;
        // Containment: a facade and the files of its own directory.
        const parentFacade = (a, b) => facade(a) && dirname(b).startsWith(dirname(a));
        if (parentFacade(f, to) || parentFacade(to, f)) continue;
        deps.add(to);
      }
    }
    graph.set(f, deps);
  }
  return graph;
}

// TypeScript: relative imports and re-exports.
function tsGraph(src) {
  const graph = new Map();
  for (const f of files(src, ".ts")) {
    const deps = new Set();
    // Whole statements: an import may span lines (`import type {\n …\n} from`).
    for (const m of code(f).join("\n").matchAll(/^\s*(?:import|export)\b[^;]*?\bfrom\s+["'](\.[^"']+)["']/gm)) {
      const to = join(dirname(f), m[1].replace(/\.js$/, ".ts"));
      if (to.startsWith(src) && existsSync(to)) deps.add(to);
    }
    graph.set(f, deps);
  }
  return graph;
}

const host = rustGraph(join(root, "host-wasmtime", "src"));
const js = tsGraph(join(root, "js", "src"));
if (host.size < 30 || js.size < 15) problems.push(`read too little: ${host.size} Rust files, ${js.size} TypeScript files`);
if (![...host.values()].some((d) => [...d].some((t) => t.endsWith("serve/access.rs")))) problems.push("the Rust reader sees no import of serve/access.rs");
circles("host-wasmtime/src", host);
circles("js/src", js);

const face = join(root, "js", "src", "core.ts");
const entries = new Set(["index.ts", "node.ts", "browser.ts"].map((n) => join(root, "js", "src", n)));
for (const [f, deps] of js) if (deps.has(face) && !entries.has(f)) problems.push(`${rel(f)} imports the package's face (core.ts); import the module that defines the name`);

for (const dir of ["core/src", "host-wasmtime/src", "js/src"]) {
  for (const f of [...files(join(root, dir), ".rs"), ...files(join(root, dir), ".ts")]) {
    const n = readFileSync(f, "utf8").split("\n").length - 1;
    if (n > MAX_FILE_LINES) problems.push(`${rel(f)}: ${n} lines (at most ${MAX_FILE_LINES})`);
  }
}

// Function lengths: a Rust `fn` to the `}` at its indentation; a top-level
// TypeScript `function` to the `}` at column 0.
const lengths = [];
for (const f of files(join(root, "host-wasmtime", "src"), ".rs")) {
  const lines = readFileSync(f, "utf8").split("\n");
  lines.forEach((l, i) => {
    const m = l.match(/^(\s*)(?:pub(?:\([a-z]+\))?\s+)?(?:async\s+)?(?:unsafe\s+)?fn\s+([a-z_][a-z0-9_]*)/);
    if (!m || l.trimEnd().endsWith(";")) return;
    const end = lines.findIndex((x, j) => j > i && x === `${m[1]}}`);
    if (end > i) lengths.push([`${rel(f)}:${m[2]}`, end - i + 1]);
  });
}
for (const f of files(join(root, "js", "src"), ".ts")) {
  const lines = readFileSync(f, "utf8").split("\n");
  lines.forEach((l, i) => {
    const m = l.match(/^(?:export\s+)?(?:async\s+)?function\s*\*?\s*([A-Za-z_$][\w$]*)/);
    if (!m || l.trimEnd().endsWith(";")) return;
    const end = lines.findIndex((x, j) => j > i && x === "}");
    if (end > i) lengths.push([`${rel(f)}:${m[1]}`, end - i + 1]);
  });
}
if (lengths.length < 200) problems.push(`read too few functions: ${lengths.length}`);
for (const [name, n] of lengths) {
  const allowed = LONG[name] ?? MAX_FN_LINES;
  if (n > allowed) problems.push(`${name}: ${n} lines (at most ${allowed}${LONG[name] ? ", its length when it was listed" : ""})`);
}
for (const name of Object.keys(LONG)) {
  const found = lengths.find(([n]) => n === name);
  if (!found) problems.push(`${name} is listed as a long function but no longer exists: drop it from LONG`);
  else if (found[1] <= MAX_FN_LINES) problems.push(`${name} is ${found[1]} lines now: drop it from LONG`);
}

if (problems.length) {
  console.error(problems.map((p) => `structure: ${p}`).join("\n"));
  process.exit(1);
}
console.log(`structure: no import circle (${host.size} Rust, ${js.size} TypeScript files), no file over ${MAX_FILE_LINES} lines, no host function over ${MAX_FN_LINES} lines (${lengths.length} read)`);
