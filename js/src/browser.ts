// The browser and edge entry (`exports` conditions "browser", "worker",
// "workerd", "edge-light"): fetches the .wasm beside the package by URL —
// the `new URL(…, import.meta.url)` form that vite and webpack turn into an
// emitted asset. Edge runtimes that refuse to compile bytes at run time pass
// a `WebAssembly.Module`: `init(wasmModule)`.

import { load, type WasmSource } from "./load.js";

export * from "./core.js";

/**
 * Load the WebAssembly core once. Without an argument it fetches the
 * package's `.wasm`; with one, from that URL, Response, bytes or module.
 */
export function init(source?: WasmSource): Promise<void> {
  return load(source, async () => new URL("../pkg/foldline_bg.wasm", import.meta.url));
}
