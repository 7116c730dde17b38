// `npm test` on a clean checkout: install the pinned dev dependencies first.
import { existsSync } from "node:fs";
import { execSync } from "node:child_process";
const here = new URL("..", import.meta.url).pathname;
if (!existsSync(`${here}node_modules/typescript`) || !existsSync(`${here}node_modules/miniflare`)) {
  execSync("npm install --no-audit --no-fund", { cwd: here, stdio: "inherit" });
}
