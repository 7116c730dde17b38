// Runs the shared suite in headless Chromium (Debian's chromium, driven by
// playwright-core), with the IndexedDB journal, over a loopback static server.
import { serve, launchChromium } from "../static.mjs";

const root = new URL("../..", import.meta.url).pathname; // js/
const server = await serve(root);
const base = server.base;
const browser = await launchChromium();
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
