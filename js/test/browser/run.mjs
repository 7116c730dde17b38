// Runs the shared suite in headless Chromium (Debian's chromium, driven by
// playwright-core), with the IndexedDB journal, over a loopback static server.
import { createServer } from "node:http";
import { readFile } from "node:fs/promises";
import { extname, join, normalize } from "node:path";
import { chromium } from "playwright-core";

const root = new URL("../..", import.meta.url).pathname; // js/
const types = { ".js": "text/javascript", ".mjs": "text/javascript", ".wasm": "application/wasm", ".html": "text/html" };
const server = createServer(async (req, res) => {
  const path = normalize(join(root, decodeURIComponent(new URL(req.url, "http://x").pathname)));
  if (!path.startsWith(root)) return res.writeHead(403).end();
  try {
    const body = await readFile(path);
    res.writeHead(200, { "content-type": types[extname(path)] ?? "application/octet-stream" }).end(body);
  } catch {
    res.writeHead(404).end();
  }
});
await new Promise((r) => server.listen(0, "127.0.0.1", r));
const base = `http://127.0.0.1:${server.address().port}`;

const executablePath = process.env.CHROMIUM ?? "/usr/bin/chromium";
const browser = await chromium.launch({ executablePath, args: ["--headless", "--no-sandbox", "--disable-gpu"] });
let failed = 0;
try {
  const page = await browser.newPage();
  page.on("pageerror", (e) => console.error("page error:", e));
  await page.goto(`${base}/test/browser/index.html`);
  const results = await page.evaluate(() => window.__run());
  for (const r of results) {
    console.log(`${r.ok ? "ok" : "not ok"} - chromium: ${r.name}${r.ok ? "" : `\n  ${r.error}`}`);
    if (!r.ok) failed++;
  }
  console.log(`chromium: ${results.length - failed} passed, ${failed} failed`);
} finally {
  await browser.close();
  server.close();
}
process.exit(failed ? 1 : 0);
