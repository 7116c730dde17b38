// A browser page built by esbuild, which does not emit assets named by
// `new URL(…, import.meta.url)`: the .wasm is copied beside the bundle and
// passed by URL.
import { run } from "./chat.js";
import { deps } from "./deps.js";

const out = globalThis as { __result?: unknown; __error?: string };
run(deps(), new URL("./foldline_bg.wasm", import.meta.url)).then((r) => (out.__result = r), (e: unknown) => (out.__error = String(e)));
