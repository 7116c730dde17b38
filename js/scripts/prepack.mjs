// Before `npm pack` / `npm publish`: build dist/ (tsc, then each entry
// bundled into one module) and put the licenses beside
// the package (the repository keeps one copy of each, at its root).
import { execFileSync } from "node:child_process";
import { copyFileSync, existsSync } from "node:fs";

const here = new URL("..", import.meta.url);
execFileSync(process.execPath, [new URL("node_modules/typescript/bin/tsc", here).pathname, "-p", "tsconfig.json"], { cwd: here, stdio: "inherit" });
// Each entry as one module (scripts/bundle.mjs), as `npm run build` does.
execFileSync(process.execPath, [new URL("scripts/bundle.mjs", here).pathname], { cwd: here, stdio: "inherit" });
// Packed from the repository, the licenses come from its root; packed from
// a copy of js/ alone, the ones already beside the package are used.
for (const f of ["LICENSE-MIT", "LICENSE-APACHE"]) {
  if (existsSync(new URL(`../${f}`, here))) copyFileSync(new URL(`../${f}`, here), new URL(f, here));
  else if (!existsSync(new URL(f, here))) throw new Error(`prepack: ${f} is neither beside the package nor in the repository root above it`);
}
