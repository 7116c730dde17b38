// After tsc: each entry of the package (index, node, browser, client) as one
// module, so `import "foldline"` loads one file instead of ~30 — on Node the
// import went from ~12.5 ms to ~3.3 ms of a cold start (BENCHMARKS.md,
// session 14). For the bundlers' entries (index, browser) the generated glue
// and artifact id in ../pkg stay their own modules (bundlers resolve the
// .wasm beside the glue); Node's entry takes them in too (it reads the .wasm
// from disk itself, so nothing resolves a path from the glue's place): one
// module fewer for Node to load (session 18). The type declarations stay
// one per module; the other .js files of dist/ are removed, since nothing
// the package exports reaches them.
import { build } from "esbuild";
import { readdirSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";

const dist = new URL("../dist/", import.meta.url).pathname;
// client last: the other entries import parts of it from dist/ unbundled.
const entries = [["index", "neutral"], ["node", "node"], ["browser", "browser"], ["client", "neutral"]];
const glue = ["../pkg/foldline.js", "../pkg/artifact.js"];
for (const [name, platform] of entries) {
  await build({
    entryPoints: [join(dist, `${name}.js`)],
    outfile: join(dist, `${name}.js`),
    allowOverwrite: true,
    bundle: true,
    format: "esm",
    platform,
    target: "es2022",
    external: ["node:*", ...(name === "node" ? [] : glue)],
    legalComments: "none",
    logLevel: "warning",
  });
}
const keep = new Set(entries.map(([name]) => join(dist, `${name}.js`)));
const sweep = (dir) => {
  for (const f of readdirSync(dir)) {
    const p = join(dir, f);
    if (statSync(p).isDirectory()) sweep(p);
    else if (p.endsWith(".js") && !keep.has(p)) rmSync(p);
  }
};
sweep(dist);
