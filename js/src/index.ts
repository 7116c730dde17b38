// The entry for runtimes no other `exports` condition names: reads the
// .wasm from disk under Node, fetches it by URL elsewhere. Bundlers and Node
// pick `node.ts` or `browser.ts` instead.

import { load, type WasmSource } from "./load.js";

export * from "./core.js";

/**
 * Load the WebAssembly core once. Without an argument it reads the `.wasm`
 * from disk (Node) or fetches it beside the package; edge runtimes that
 * refuse to compile bytes at run time pass a `WebAssembly.Module`.
 */
export function init(source?: WasmSource): Promise<void> {
  return load(source, async () => {
    const url = new URL("../pkg/foldline_bg.wasm", import.meta.url);
    const proc = (globalThis as { process?: { versions?: { node?: string } } }).process;
    if (!proc?.versions?.node) return url;
    // Node cannot fetch file: URLs. The module name is computed so that
    // browser bundlers do not try to resolve it.
    const fsName = "node:fs/promises";
    const fs = (await import(fsName)) as { readFile(u: URL): Promise<Uint8Array> };
    return fs.readFile(url);
  });
}
