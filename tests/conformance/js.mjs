// Conformance in the three JS runtimes: Node, headless Chromium, workerd.
import { readFile } from "node:fs/promises";
import { createServer } from "node:http";
import { extname, join, normalize } from "node:path";
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
  const { chromium } = await import(new URL("js/node_modules/playwright-core/index.mjs", repo));
  const root = new URL(".", repo).pathname;
  const types = { ".js": "text/javascript", ".mjs": "text/javascript", ".wasm": "application/wasm", ".json": "application/json", ".html": "text/html" };
  const server = createServer(async (req, res) => {
    const path = normalize(join(root, decodeURIComponent(new URL(req.url, "http://x").pathname)));
    if (!path.startsWith(root)) return res.writeHead(403).end();
    if (path.endsWith("/blank.html")) return res.writeHead(200, { "content-type": "text/html" }).end("<!doctype html><title>conformance</title>");
    let body;
    try {
      body = await readFile(path);
    } catch {
      return res.writeHead(404).end();
    }
    res.writeHead(200, { "content-type": types[extname(path)] ?? "application/octet-stream" }).end(body);
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const base = `http://127.0.0.1:${server.address().port}`;
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium", args: ["--headless", "--no-sandbox", "--disable-gpu"] });
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
  const { Miniflare } = await import(new URL("js/node_modules/miniflare/dist/src/index.js", repo));
  const { readdir } = await import("node:fs/promises");
  const mods = [];
  const walk = async (dir) => {
    for (const e of await readdir(new URL(dir, repo), { withFileTypes: true })) {
      const rel = `${dir}/${e.name}`;
      if (e.isDirectory()) await walk(rel);
      else if (/\.m?js$/.test(e.name)) mods.push({ type: "ESModule", path: `/w/${rel}`, contents: await readFile(new URL(rel, repo), "utf8") });
    }
  };
  await walk("js/dist");
  await walk("js/pkg");
  mods.push({ type: "ESModule", path: "/w/tests/conformance/vectors.mjs", contents: await readFile(new URL("tests/conformance/vectors.mjs", repo), "utf8") });
  mods.push({ type: "Text", path: "/w/vectors.json", contents: JSON.stringify(vectors) });
  mods.push({ type: "CompiledWasm", path: "/w/js/pkg/foldline_bg.wasm", contents: await readFile(new URL("js/pkg/foldline_bg.wasm", repo)) });
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
