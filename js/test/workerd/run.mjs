// Runs the shared suite inside workerd (miniflare). The worker imports the
// .wasm as a precompiled WebAssembly.Module, as edge runtimes require.
import { Miniflare } from "miniflare";
import { readFile, readdir } from "node:fs/promises";

const root = new URL("../..", import.meta.url);
async function modulesUnder(dir, prefix) {
  const out = [];
  for (const e of await readdir(new URL(dir, root), { withFileTypes: true })) {
    const rel = `${dir}/${e.name}`;
    if (e.isDirectory()) out.push(...(await modulesUnder(rel, prefix)));
    else if (e.name.endsWith(".js") || e.name.endsWith(".mjs")) {
      out.push({ type: "ESModule", path: `${prefix}${rel}`, contents: await readFile(new URL(rel, root), "utf8") });
    }
  }
  return out;
}

const worker = `
import * as f from "./dist/browser.js";
import wasmModule from "./pkg/foldline_bg.wasm";
import { suite } from "./test/shared.mjs";
export default {
  async fetch() {
    await f.init(wasmModule);
    const out = [];
    for (const [name, fn] of suite(f, async () => new f.MemoryJournal())) {
      try { await fn(); out.push({ name, ok: true }); }
      catch (e) { out.push({ name, ok: false, error: String(e && e.stack || e) }); }
    }
    return Response.json(out);
  },
};`;

const modules = [
  { type: "ESModule", path: "/w/worker.mjs", contents: worker },
  ...(await modulesUnder("dist", "/w/")),
  ...(await modulesUnder("pkg", "/w/")),
  { type: "ESModule", path: "/w/test/shared.mjs", contents: await readFile(new URL("test/shared.mjs", root), "utf8") },
  { type: "CompiledWasm", path: "/w/pkg/foldline_bg.wasm", contents: await readFile(new URL("pkg/foldline_bg.wasm", root)) },
];
const mf = new Miniflare({ modules, modulesRoot: "/w", compatibilityDate: "2025-01-01" });
let failed = 0, passed = 0;
/** Run one named check, counting it. */
async function named(name, fn) {
  try {
    await fn();
    passed++;
    console.log(`ok - workerd: ${name}`);
  } catch (e) {
    failed++;
    console.log(`not ok - workerd: ${name}\n  ${e && e.stack || e}`);
  }
}
/** The [{name, ok, error}] a worker answered, counted. */
async function report(res) {
  const text = await res.text();
  let results;
  try { results = JSON.parse(text); } catch { throw new Error(`worker answered: ${text.slice(0, 2000)}`); }
  for (const r of results) {
    console.log(`${r.ok ? "ok" : "not ok"} - workerd: ${r.name}${r.ok ? "" : `\n  ${r.error}`}`);
    if (r.ok) passed++; else failed++;
  }
}
await named("the fetch handler passes the foldline serve scenario over HTTP", () => runHandlerScenario("memory"));
await named("the fetch handler passes the scenario on D1 (journal, owners, compression)", () => runHandlerScenario("d1"));
try {
  await report(await mf.dispatchFetch("http://localhost/"));
} finally {
  await mf.dispose();
}
await runD1();
console.log(`workerd: ${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);

/**
 * The D1 stores in workerd against miniflare's D1: the shared suite with a
 * D1Journal (each case a database of its own), the checks of several
 * isolates on one database (`d1.mjs`), and a conversation compacted there
 * that the `foldline` program reads from the database file as it is.
 */
async function runD1() {
  const bindings = Array.from({ length: 80 }, (_, i) => `DB${i}`);
  const d1Worker = `
import * as f from "./dist/browser.js";
import wasmModule from "./pkg/foldline_bg.wasm";
import { suite } from "./test/shared.mjs";
import { d1Checks } from "./test/workerd/d1.mjs";
export default {
  async fetch(req, env) {
    await f.init(wasmModule);
    let n = 0;
    const fresh = () => env["DB" + n++];
    const out = [];
    const cases = [
      ...suite(f, async () => f.D1Journal.open(fresh())).map(([name, fn]) => ["D1Journal: " + name, fn]),
      ...d1Checks(f, fresh),
    ];
    for (const [name, fn] of cases) {
      try { await fn(); out.push({ name, ok: true }); }
      catch (e) { out.push({ name, ok: false, error: String(e && e.stack || e) }); }
    }
    return Response.json(out);
  },
};`;
  const dmods = [
    { type: "ESModule", path: "/w/worker.mjs", contents: d1Worker },
    ...modules.filter((m) => m.path !== "/w/worker.mjs"),
    { type: "ESModule", path: "/w/test/workerd/d1.mjs", contents: await readFile(new URL("test/workerd/d1.mjs", root), "utf8") },
  ];
  const dmf = new Miniflare({ modules: dmods, modulesRoot: "/w", compatibilityDate: "2025-01-01", d1Databases: bindings });
  try {
    await report(await dmf.dispatchFetch("http://localhost/"));
  } finally {
    await dmf.dispose();
  }
  await named("a conversation compacted on D1 verifies with the foldline program, which sends the model the same context", () => d1Interop());
}

/**
 * 150 messages through the JS driver on D1 (persisted to a directory, as
 * `wrangler dev` keeps it), then the database file given to the `foldline`
 * program: the chain verifies, and its context is the one the worker sent.
 */
async function d1Interop() {
  const { spawnSync } = await import("node:child_process");
  const { existsSync, mkdtempSync, readdirSync, writeFileSync, copyFileSync, rmSync } = await import("node:fs");
  const { tmpdir } = await import("node:os");
  const { join } = await import("node:path");
  const { fileURLToPath } = await import("node:url");
  const program = process.env.FOLDLINE_BIN ?? fileURLToPath(new URL("../target/debug/foldline", root));
  if (!existsSync(program)) {
    if (process.env.FOLDLINE_BIN) throw new Error(`FOLDLINE_BIN=${program} does not exist`);
    console.log(`# skipped: no foldline program at ${program} (cargo build -p foldline-wasmtime --features cli, or FOLDLINE_BIN)`);
    return;
  }
  const dir = mkdtempSync(join(tmpdir(), "foldline-d1-"));
  const declaration = { targetId: "assistant", compactorId: "assistant-compactor", budget: { kind: "tokens", window: 8192 } };
  const worker = `
import * as f from "./dist/browser.js";
import wasmModule from "./pkg/foldline_bg.wasm";
export default {
  async fetch(req, env) {
    await f.init(wasmModule);
    const journal = await f.D1Journal.open(env.DB);
    const c = f.createCompactor({ journal, model: f.modelFromFunction(async (p) => "Summary of " + p.input.turnCount + " turns: the trip, the budget, the dates."), declaration: ${JSON.stringify(declaration)} });
    let compactions = 0;
    for (let s = 1; s <= 150; s++) {
      await c.append("trip", { role: s % 2 ? "user" : "assistant", content: "message " + s + " " + "about the trip ".repeat(40) });
      if ((await c.onMessage("trip")).status === "compacted") compactions++;
    }
    const context = await c.context("trip", { format: "openai" });
    const events = (await journal.readEvents("trip")).map((e) => e.event);
    const boundaries = events.filter((e) => e.type === "boundary").length;
    return Response.json({ compactions, boundaries, messages: context.messages, first: events.find((e) => e.type === "message") });
  },
};`;
  const imf = new Miniflare({
    modules: [{ type: "ESModule", path: "/w/worker.mjs", contents: worker }, ...modules.filter((m) => m.path !== "/w/worker.mjs")],
    modulesRoot: "/w", compatibilityDate: "2025-01-01", d1Databases: ["DB"], d1Persist: dir,
  });
  let sent;
  try {
    sent = await (await imf.dispatchFetch("http://localhost/")).json();
  } finally {
    await imf.dispose();
  }
  try {
    if (!(sent.compactions >= 3)) throw new Error(`compacted ${sent.compactions} times in 150 messages`);
    const files = readdirSync(join(dir, "miniflare-D1DatabaseObject")).filter((n) => n.endsWith(".sqlite") && n !== "metadata.sqlite");
    if (files.length !== 1) throw new Error(`expected one database file, found ${files.join(", ")}`);
    // The file with its write-ahead log, where the latest commits may still be.
    const db = join(dir, "copy.sqlite");
    for (const suffix of ["", "-wal"]) {
      const from = join(dir, "miniflare-D1DatabaseObject", files[0] + suffix);
      if (existsSync(from)) copyFileSync(from, db + suffix);
    }
    writeFileSync(join(dir, "declaration.json"), JSON.stringify(declaration));
    const run = (...args) => spawnSync(program, ["--journal", db, "--conversation", "trip", "--declaration", join(dir, "declaration.json"), ...args], { encoding: "utf8" });
    const verify = run("verify");
    if (verify.status !== 0) throw new Error(`foldline verify exited ${verify.status}: ${verify.stdout}${verify.stderr}`);
    if (!verify.stdout.includes(`intact: ${sent.boundaries} boundaries`)) throw new Error(`foldline verify: ${verify.stdout} (the worker wrote ${sent.boundaries} boundaries, compacted ${sent.compactions} times)`);
    const context = run("context", "--format", "openai", "--messages");
    if (context.status !== 0) throw new Error(`foldline context exited ${context.status}: ${context.stderr}`);
    const x = JSON.stringify(JSON.parse(context.stdout)), y = JSON.stringify(sent.messages);
    if (x !== y) throw new Error(`the program's context differs from the worker's\n  program: ${x.slice(0, 400)}\n  worker:  ${y.slice(0, 400)}`);
    // The program writes the worker's database too: a turn the worker
    // wrote, delivered again, is taken (the claims are one text); the same
    // turn id with other content is refused, nothing written.
    const redeliver = (event) => {
      writeFileSync(join(dir, "again.jsonl"), JSON.stringify(event) + "\n");
      return run("import", "--no-compact", join(dir, "again.jsonl"));
    };
    const again = redeliver(sent.first);
    if (again.status !== 0) throw new Error(`the program refused a redelivery of ${sent.first.turnId}: ${again.stderr}`);
    const { contentHash: _, ...said } = sent.first;
    const other = redeliver({ ...said, parts: [{ type: "text", text: "not what was said" }] });
    if (other.status !== 2 || !other.stderr.includes("conflicting_turn")) throw new Error(`other content under ${sent.first.turnId}: exit ${other.status}: ${other.stderr}`);
  } finally {
    if (process.env.FOLDLINE_KEEP_D1) console.log(`# kept ${dir}`); else rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The `foldline serve` scenario against `createHandler` running in workerd:
 * every request goes over miniflare's HTTP into the worker; the worker keeps
 * the journal between requests and answers three test-only control routes.
 */
async function runHandlerScenario(stores) {
  const { scenario } = await import("../handler-scenario.mjs");
  const handlerWorker = `
import * as f from "./dist/browser.js";
import wasmModule from "./pkg/foldline_bg.wasm";
import { world } from "./test/handler-scenario.mjs";
let w;
export default {
  async fetch(req, env, ctx) {
    if (!w) {
      await f.init(wasmModule);
      w = await world(f, env.DB ? { journal: await f.D1Journal.open(env.DB), owners: await f.D1Owners.open(env.DB), compressionStore: await f.D1Compression.open(env.DB) } : {});
    }
    const url = new URL(req.url);
    if (url.pathname === "/__test/journal") return Response.json(await w.journal.readEvents(url.searchParams.get("c")));
    if (url.pathname === "/__test/mode") { w.setMode(url.searchParams.get("m")); return new Response("ok"); }
    if (url.pathname === "/__test/crash") { w.crash(); return new Response("ok"); }
    return w.fetch(req, ctx);
  },
};`;
  const hmods = [
    { type: "ESModule", path: "/w/worker.mjs", contents: handlerWorker },
    ...modules.filter((m) => m.path !== "/w/worker.mjs"),
    { type: "ESModule", path: "/w/test/handler-scenario.mjs", contents: await readFile(new URL("test/handler-scenario.mjs", root), "utf8") },
  ];
  const hmf = new Miniflare({ modules: hmods, modulesRoot: "/w", compatibilityDate: "2025-01-01", ...(stores === "d1" ? { d1Databases: ["DB"] } : {}) });
  try {
    const base = "http://localhost";
    const control = async (p) => { const r = await hmf.dispatchFetch(`${base}${p}`); return r.json().catch(() => null); };
    await scenario({
      call: (method, path, token, body, headers = {}) => hmf.dispatchFetch(`${base}${path}`, {
        method, body, headers: { ...headers, ...(token ? { authorization: `Bearer ${token}` } : {}) },
      }),
      journal: (c) => control(`/__test/journal?c=${encodeURIComponent(c)}`),
      setMode: (m) => control(`/__test/mode?m=${m}`),
      crash: () => control("/__test/crash"),
    });
    // The chat client's local copy, its handler in workerd, the client and
    // its projection (the same .wasm) here.
    const { clientScenario } = await import("../handler-scenario.mjs");
    const client = await import("../../dist/client.js");
    const node = await import("../../dist/node.js");
    await node.init();
    await clientScenario({
      client,
      project: (events, accepted, retired, page) => node.timeline(events, accepted, retired, page),
      fetch: (input, init) => hmf.dispatchFetch(String(input).replace("http://local", base), init),
      journal: async (c) => ((await control(`/__test/journal?c=${encodeURIComponent(c)}`)) ?? []),
      setMode: (m) => control(`/__test/mode?m=${m}`),
    });
    console.log(`ok - workerd: the chat client keeps a local copy and projects the timeline with the core (${stores})`);
  } finally {
    await hmf.dispose();
  }
}
