// Before `npm pack` / `npm publish`: build dist/ and put the licenses beside
// the package (the repository keeps one copy of each, at its root).
import { execFileSync } from "node:child_process";
import { copyFileSync } from "node:fs";

const here = new URL("..", import.meta.url);
execFileSync(process.execPath, [new URL("node_modules/typescript/bin/tsc", here).pathname, "-p", "tsconfig.json"], { cwd: here, stdio: "inherit" });
for (const f of ["LICENSE-MIT", "LICENSE-APACHE"]) copyFileSync(new URL(`../${f}`, here), new URL(f, here));
