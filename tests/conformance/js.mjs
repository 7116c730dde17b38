// Conformance in the three JS runtimes: Node, headless Chromium, workerd.
import { readFile } from "node:fs/promises";
import { AREAS, runVectors, line } from "./vectors.mjs";

const repo = new URL("../..", import.meta.url);
const vectors = [];
for (const a of AREAS) vectors.push(...JSON.parse(await readFile(new URL(`tests/vectors/${a}.json`, repo), "utf8")));
let bad = 0;
const report = (runtime, r) => {
  console.log(line(runtime, r));
  if (r.failed.length) {
    console.log(`  failing: ${r.failed.slice(0, 20).join(", ")}`);
    bad++;
  }
};

// Node
const f = await import(new URL("js/dist/index.js", repo));
await f.init();
report("node", await runVectors(f, vectors));

// Chromium
{
  const { serve, launchChromium } = await import(new URL("js/test/static.mjs", repo));
  const server = await serve(new URL(".", repo).pathname, { "/blank.html": "<!doctype html><title>conformance</title>" });
  const base = server.base;
  const browser = await launchChromium();
  try {
    const page = await browser.newPage();
    await page.goto(`${base}/blank.html`);
    const r = await page.evaluate(async ({ areas }) => {
      const f = await import("/js/dist/index.js");
      const { runVectors } = await import("/tests/conformance/vectors.mjs");
      await f.init(new URL("/js/pkg/foldline_bg.wasm", location.href));
      const vs = [];
      for (const a of areas) vs.push(...(await (await fetch(`/tests/vectors/${a}.json`)).json()));
      return runVectors(f, vs);
    }, { areas: AREAS });
    report("chromium", r);
  } finally {
    await browser.close();
    server.close();
  }
}

// workerd
{
  const { Miniflare } = await import(new URL("js/test/node_modules/miniflare/dist/src/index.js", repo));
  const { workerdModules } = await import(new URL("js/test/static.mjs", repo));
  const mods = await workerdModules(repo, ["js/dist", "js/pkg"]);
  mods.push({ type: "ESModule", path: "/w/tests/conformance/vectors.mjs", contents: await readFile(new URL("tests/conformance/vectors.mjs", repo), "utf8") });
  mods.push({ type: "Text", path: "/w/vectors.json", contents: JSON.stringify(vectors) });
  mods.unshift({
    type: "ESModule", path: "/w/worker.mjs", contents: `
      import * as f from "./js/dist/index.js";
      import wasm from "./js/pkg/foldline_bg.wasm";
      import vectors from "./vectors.json";
      import { runVectors } from "./tests/conformance/vectors.mjs";
      export default { async fetch() { await f.init(wasm); return Response.json(await runVectors(f, JSON.parse(vectors))); } };`,
  });
  const mf = new Miniflare({ modules: mods, modulesRoot: "/w", compatibilityDate: "2025-01-01" });
  try {
    const res = await mf.dispatchFetch("http://localhost/");
    const text = await res.text();
    let r;
    try { r = JSON.parse(text); } catch { throw new Error(`worker answered: ${text.slice(0, 1000)}`); }
    report("workerd", r);
  } finally {
    await mf.dispose();
  }
}
process.exit(bad ? 1 : 0);
