// What the browser-side runners share: a loopback static server over a
// folder, and headless Chromium (Debian's, driven by playwright-core).
import { createServer } from "node:http";
import { readFile } from "node:fs/promises";
import { extname, join, normalize } from "node:path";
import { chromium } from "playwright-core";

const TYPES = { ".js": "text/javascript", ".mjs": "text/javascript", ".wasm": "application/wasm", ".json": "application/json", ".html": "text/html" };

/**
 * Serve the files under `root` (a path ending in "/") on 127.0.0.1; `pages`
 * maps extra paths to HTML. Answers the base URL and `close`.
 */
export async function serve(root, pages = {}) {
  const server = createServer(async (req, res) => {
    const url = decodeURIComponent(new URL(req.url, "http://x").pathname);
    if (url in pages) return res.writeHead(200, { "content-type": "text/html" }).end(pages[url]);
    const path = normalize(join(root, url));
    if (!path.startsWith(root)) return res.writeHead(403).end();
    let body;
    try {
      body = await readFile(path);
    } catch {
      return res.writeHead(404).end();
    }
    res.writeHead(200, { "content-type": TYPES[extname(path)] ?? "application/octet-stream" }).end(body);
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return { base: `http://127.0.0.1:${server.address().port}`, close: () => server.close() };
}

/** Headless Chromium (`CHROMIUM` overrides the path). */
export function launchChromium() {
  return chromium.launch({ executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium", args: ["--headless", "--no-sandbox", "--disable-gpu"] });
}

/**
 * The package as workerd modules (miniflare's `modules` list): every `.js`
 * and `.mjs` under `dirs` of `root` (a URL), at `/w/<dir>/…`, and the `.wasm`
 * as a precompiled module, as edge runtimes require.
 */
export async function workerdModules(root, dirs) {
  const { readdir } = await import("node:fs/promises");
  const modules = [];
  const walk = async (dir) => {
    for (const e of await readdir(new URL(dir, root), { withFileTypes: true })) {
      const rel = `${dir}/${e.name}`;
      if (e.isDirectory()) await walk(rel);
      else if (/\.m?js$/.test(e.name)) modules.push({ type: "ESModule", path: `/w/${rel}`, contents: await readFile(new URL(rel, root), "utf8") });
      else if (e.name.endsWith(".wasm")) modules.push({ type: "CompiledWasm", path: `/w/${rel}`, contents: await readFile(new URL(rel, root)) });
    }
  };
  for (const d of dirs) await walk(d);
  return modules;
}
