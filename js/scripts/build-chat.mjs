// Build the reference chat page (js/examples/chat) into the files
// `foldline serve --web` embeds (host-wasmtime/web/): the page and one
// bundled script. `--check` builds into a temporary folder and fails when
// the committed files differ (tests/run runs it).
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const js = new URL("..", import.meta.url).pathname;
const web = join(js, "..", "host-wasmtime", "web");
const check = process.argv.includes("--check");
const out = check ? mkdtempSync(join(tmpdir(), "foldline-web-")) : web;
execFileSync(join(js, "node_modules", ".bin", "esbuild"), [
  join(js, "examples", "chat", "chat.ts"), "--bundle", "--format=esm", "--platform=browser", "--target=es2022",
  "--legal-comments=none", `--outfile=${join(out, "chat.js")}`, "--log-level=warning",
], { stdio: "inherit" });
copyFileSync(join(js, "examples", "chat", "index.html"), join(out, "index.html"));
if (check) {
  const stale = ["chat.js", "index.html"].filter((f) => readFileSync(join(out, f), "utf8") !== readFileSync(join(web, f), "utf8"));
  rmSync(out, { recursive: true, force: true });
  if (stale.length) {
    console.error(`host-wasmtime/web is stale (${stale.join(", ")}): run node js/scripts/build-chat.mjs and commit`);
    process.exit(1);
  }
  console.log("host-wasmtime/web matches js/examples/chat");
}
