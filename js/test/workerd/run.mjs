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
let failed = 0;
try {
  await runHandlerScenario();
  console.log("ok - workerd: the fetch handler passes the foldline serve scenario over HTTP");
} catch (e) {
  failed++;
  console.log(`not ok - workerd: the fetch handler passes the foldline serve scenario over HTTP\n  ${e && e.stack || e}`);
}
try {
  const res = await mf.dispatchFetch("http://localhost/");
  const text = await res.text();
  let results;
  try { results = JSON.parse(text); } catch { throw new Error(`worker answered: ${text.slice(0, 2000)}`); }
  for (const r of results) {
    console.log(`${r.ok ? "ok" : "not ok"} - workerd: ${r.name}${r.ok ? "" : `\n  ${r.error}`}`);
    if (!r.ok) failed++;
  }
  console.log(`workerd: ${results.length - failed} passed, ${failed} failed`);
} finally {
  await mf.dispose();
}
process.exit(failed ? 1 : 0);

/**
 * The `foldline serve` scenario against `createHandler` running in workerd:
 * every request goes over miniflare's HTTP into the worker; the worker keeps
 * the journal between requests and answers three test-only control routes.
 */
async function runHandlerScenario() {
  const { scenario } = await import("../handler-scenario.mjs");
  const handlerWorker = `
import * as f from "./dist/browser.js";
import wasmModule from "./pkg/foldline_bg.wasm";
import { world } from "./test/handler-scenario.mjs";
let w;
export default {
  async fetch(req, env, ctx) {
    if (!w) { await f.init(wasmModule); w = await world(f); }
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
  const hmf = new Miniflare({ modules: hmods, modulesRoot: "/w", compatibilityDate: "2025-01-01" });
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
    console.log("ok - workerd: the chat client keeps a local copy and projects the timeline with the core");
  } finally {
    await hmf.dispose();
  }
}
