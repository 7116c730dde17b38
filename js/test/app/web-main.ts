// A browser page built by vite or webpack: `init()` fetches the .wasm the
// bundler emitted.
import { run } from "./chat.js";
import { deps } from "./deps.js";

const out = globalThis as { __result?: unknown; __error?: string };
run(deps()).then((r) => (out.__result = r), (e: unknown) => (out.__error = String(e)));
