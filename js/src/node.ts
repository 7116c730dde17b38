// The Node entry (`exports` condition "node"): reads the bundled .wasm from
// disk, also from inside a server bundle.
//
//   import { init, createCompactor } from "foldline";
//   await init();

import { FoldlineError } from "./error.js";
import { load, type WasmSource } from "./load.js";

export * from "./core.js";

const FILE = "foldline_bg.wasm";

/** The built-in modules the entry reads the .wasm with. */
interface Builtins {
  fs: Pick<typeof import("node:fs"), "readFileSync">;
  module: Pick<typeof import("node:module"), "createRequire">;
  path: Pick<typeof import("node:path"), "join" | "dirname">;
  url: Pick<typeof import("node:url"), "fileURLToPath">;
}

/**
 * Node's built-ins, taken when `init` runs, not imported by the entry: an
 * `import` builds an ES module of each (`node:fs` ~2.7 ms of a cold start,
 * `node:fs/promises` ~1.3 ms with the streams it loads), where
 * `process.getBuiltinModule` (Node 20.16+, 22.3+) hands over the module
 * Node already holds (~0.1 ms for the four); older Nodes import them.
 */
async function builtins(): Promise<Builtins> {
  if (typeof process.getBuiltinModule === "function") {
    return {
      fs: process.getBuiltinModule("node:fs"),
      module: process.getBuiltinModule("node:module"),
      path: process.getBuiltinModule("node:path"),
      url: process.getBuiltinModule("node:url"),
    };
  }
  const [fs, module, path, url] = await Promise.all([import("node:fs"), import("node:module"), import("node:path"), import("node:url")]);
  return { fs, module, path, url };
}

/**
 * Where the .wasm may be, in order: the package, beside a bundle, the
 * installed package, beside the main script. Lazily: the package's own copy
 * is almost always there, and resolving the installed package
 * (`createRequire`) costs a cold start more than reading the file.
 */
function* candidates({ module, path, url }: Builtins): Generator<string> {
  const here = import.meta.url as string | undefined; // empty in a CommonJS bundle
  if (here) {
    yield url.fileURLToPath(new URL(`../pkg/${FILE}`, here));
    yield url.fileURLToPath(new URL(FILE, here));
    try {
      yield module.createRequire(here).resolve(`foldline/${FILE}`);
    } catch {
      // not installed beside a bundle
    }
  }
  if (process.argv[1]) yield path.join(path.dirname(process.argv[1]), FILE);
  yield path.join(process.cwd(), "node_modules", "foldline", "pkg", FILE);
}

/**
 * The .wasm's bytes. Read synchronously (~0.3 ms for the ~390 KB, once):
 * `fs.promises.readFile` opens a file handle and loads Node's streams for
 * it, ~2 ms of a cold start more.
 */
async function fromDisk(): Promise<Uint8Array> {
  const b = await builtins();
  const tried: string[] = [];
  for (const path of candidates(b)) {
    if (tried.includes(path)) continue;
    tried.push(path);
    try {
      return b.fs.readFileSync(path);
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
