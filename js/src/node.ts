// The Node entry (`exports` condition "node"): reads the bundled .wasm from
// disk, also from inside a server bundle.
//
//   import { init, createCompactor } from "foldline";
//   await init();

import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { FoldlineError } from "./error.js";
import { load, type WasmSource } from "./load.js";

export * from "./core.js";

const FILE = "foldline_bg.wasm";

/**
 * Where the .wasm may be, in order: the package, beside a bundle, the
 * installed package, beside the main script. Lazily: the package's own copy
 * is almost always there, and resolving the installed package
 * (`createRequire`) costs a cold start more than reading the file.
 */
function* candidates(): Generator<string> {
  const here = import.meta.url as string | undefined; // empty in a CommonJS bundle
  if (here) {
    yield fileURLToPath(new URL(`../pkg/${FILE}`, here));
    yield fileURLToPath(new URL(FILE, here));
    try {
      yield createRequire(here).resolve(`foldline/${FILE}`);
    } catch {
      // not installed beside a bundle
    }
  }
  if (process.argv[1]) yield join(dirname(process.argv[1]), FILE);
  yield join(process.cwd(), "node_modules", "foldline", "pkg", FILE);
}

async function fromDisk(): Promise<Uint8Array> {
  const tried: string[] = [];
  for (const path of candidates()) {
    if (tried.includes(path)) continue;
    tried.push(path);
    try {
      return await readFile(path);
    } catch (e) {
      if ((e as { code?: string }).code !== "ENOENT") throw e;
    }
  }
  throw new FoldlineError({
    code: "not_initialized",
    message: `${FILE} not found (looked in ${tried.join(", ")}): copy node_modules/foldline/pkg/${FILE} beside your bundle, or pass it: init(await readFile(path))`,
  });
}

/**
 * Load the WebAssembly core once. Without an argument it reads the `.wasm`
 * from the package (or, in a server bundle, from beside the bundle or the
 * installed package); with one, from those bytes or that module.
 */
export function init(source?: WasmSource): Promise<void> {
  return load(source, fromDisk);
}
