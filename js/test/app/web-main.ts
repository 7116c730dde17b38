// A browser page built by vite or webpack: `init()` fetches the .wasm the
// bundler emitted.
import { run } from "./chat.js";

const out = globalThis as { __result?: unknown; __error?: string };
run().then((r) => (out.__result = r), (e: unknown) => (out.__error = String(e)));
