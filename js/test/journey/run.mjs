// The journey (journey.mjs) through the real JS driver in three runtimes —
// Node with the memory journal, Chromium with the IndexedDB journal, workerd
// with the memory journal — each asserting the seeds' outcomes after every
// step; then the runtimes must agree byte for byte on the final journal and
// context. With FOLDLINE_JOURNEY_RUST naming the Rust host's journey program
// (host-wasmtime/tools/journey.rs; `tests/run` sets it), the Rust driver on
// SQLite runs the same script and must agree too. Short profile here (600
// turns); FOLDLINE_JOURNEY_TURNS=5000 for a long one.
import { execFileSync } from "node:child_process";
import { readFile } from "node:fs/promises";
import { serve, launchChromium, workerdModules } from "../static.mjs";
import { Miniflare } from "miniflare";
import * as f from "../../dist/node.js";
import { journey } from "./journey.mjs";

const turns = Number(process.env.FOLDLINE_JOURNEY_TURNS ?? 600);
const root = new URL("../..", import.meta.url); // js/
const results = {};
let failed = 0;
async function runtime(name, fn) {
  const t = performance.now();
  try {
    results[name] = await fn();
    console.log(`ok - journey: ${turns} turns in ${name} (${Math.round(performance.now() - t)} ms): ${JSON.stringify(results[name])}`);
  } catch (e) {
    failed++;
    console.log(`not ok - journey: ${turns} turns in ${name}\n  ${String(e && e.stack || e).split("\n").slice(0, 8).join("\n  ")}`);
  }
}

await runtime("Node (memory journal)", async () => {
  await f.init();
  return journey(f, new f.MemoryJournal(), { turns });
});

await runtime("Chromium (IndexedDB journal)", async () => {
  const server = await serve(root.pathname);
  const browser = await launchChromium();
  try {
    const page = await browser.newPage();
    await page.goto(`${server.base}/test/browser/index.html`);
    return await page.evaluate(async (turns) => {
      const f = await import("/dist/browser.js");
      const { journey } = await import("/test/journey/journey.mjs");
      await f.init(new URL("/pkg/foldline_bg.wasm", location.href));
      return journey(f, await f.IndexedDbJournal.open(`journey-${Math.random()}`), { turns });
    }, turns);
  } finally {
    await browser.close();
    server.close();
  }
});

await runtime("workerd (memory journal)", async () => {
  const modules = await workerdModules(root, ["dist", "pkg"]);
  modules.push({ type: "ESModule", path: "/w/test/journey/journey.mjs", contents: await readFile(new URL("test/journey/journey.mjs", root), "utf8") });
  const worker = `
import * as f from "./dist/browser.js";
import wasm from "./pkg/foldline_bg.wasm";
import { journey } from "./test/journey/journey.mjs";
export default {
  async fetch() {
    await f.init(wasm);
    try { return Response.json(await journey(f, new f.MemoryJournal(), { turns: ${turns} })); }
    catch (e) { return new Response(String(e && e.stack || e), { status: 500 }); }
  },
};`;
  const mf = new Miniflare({ modules: [{ type: "ESModule", path: "/w/worker.mjs", contents: worker }, ...modules], modulesRoot: "/w", compatibilityDate: "2025-01-01" });
  try {
    const res = await mf.dispatchFetch("http://localhost/");
    const text = await res.text();
    if (!res.ok) throw new Error(text);
    return JSON.parse(text);
  } finally {
    await mf.dispose();
  }
});

const rust = process.env.FOLDLINE_JOURNEY_RUST;
if (rust) await runtime("the Rust driver (SQLite, wasmtime)", () => JSON.parse(execFileSync(rust, [String(turns)], { encoding: "utf8" })));
else console.log("# journey: FOLDLINE_JOURNEY_RUST not set, the Rust driver is not compared (tests/run sets it)");

const sorted = (r) => JSON.stringify(Object.fromEntries(Object.entries(r).sort(([a], [b]) => (a < b ? -1 : 1))));
const digests = Object.entries(results).map(([name, r]) => [name, sorted(r)]);
const expected = rust ? 4 : 3;
if (digests.length === expected && new Set(digests.map(([, d]) => d)).size === 1) {
  console.log(`ok - journey: ${digests.map(([n]) => n.split(" (")[0]).join(", ")} wrote the same journal and byte-identical contexts`);
} else {
  failed++;
  console.log(`not ok - journey: the runtimes disagree\n  ${digests.map(([n, d]) => `${n}: ${d}`).join("\n  ")}`);
}
process.exit(failed ? 1 : 0);
