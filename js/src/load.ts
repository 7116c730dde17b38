// Loading the WebAssembly core once, from whatever the platform entry found:
// bytes, a URL or Response, or a compiled module.

import initWasm, * as wasm from "../pkg/foldline.js";
import { FoldlineError } from "./error.js";
import { MEMORY_RESET_BYTES } from "./defaults.js";

declare global {
  // So these types compile without the DOM lib (Node's own types lack the
  // WebAssembly namespace); merges with lib.dom's declaration where present.
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace WebAssembly {
    // eslint-disable-next-line @typescript-eslint/no-empty-interface
    interface Module {}
  }
}

/** What `init` accepts: bytes, a URL or Response (or a promise of one), or a compiled module. */
export type WasmSource =
  | ArrayBuffer | ArrayBufferView | WebAssembly.Module | URL | string | Response | Promise<Response>;

/** The ABI major version this package speaks. */
export const ABI_MAJOR = 1;

let ready: Promise<void> | undefined;
let loaded = false;

/** What the package calls of the loaded core. */
export interface Core {
  /** Any entry point: JSON text in, the canonical JSON envelope out. */
  call(entry: string, request: string): string;
  /** Crate, ruleset and ABI versions as JSON text. */
  version(): string;
  /** `call` with what is held under `id` (`count` events, then `update` applied) in front of the request's own. */
  callHeld(id: number, count: number, entry: string, request: string, update: string): string;
  /** Drop what is held under `id`. */
  forget(id: number): void;
}

/** The loaded core, or `not_initialized` before `init()` has finished. */
export function loadedCore(): Core {
  if (!loaded) {
    throw new FoldlineError({ code: "not_initialized", message: "call `await init()` (edge runtimes: `await init(wasmModule)`) before any other foldline call" });
  }
  return wasm;
}

/**
 * Linear memory past which the core is re-instantiated once a call has
 * returned. WebAssembly memory grows and never shrinks: without this, one
 * huge request (a pasted log, a long history in one call) would keep its
 * high-water mark for the life of the page or process. The core's answers
 * depend only on the request (and on events held for it, which a fresh
 * instance has lost: {@link generation} tells the driver to send them again),
 * so a fresh instance answers exactly as the old one.
 */
export { MEMORY_RESET_BYTES };

/** The core's exports as instantiated now (the glue answers them once loaded). */
function exports(): { memory: { buffer: ArrayBuffer } } {
  return wasm.initSync(undefined as never) as unknown as { memory: { buffer: ArrayBuffer } };
}

/** Bytes of the core's linear memory now (for soak tests and diagnostics). */
export function memoryBytes(): number {
  loadedCore();
  return exports().memory.buffer.byteLength;
}

let instances = 0;

/** Which instance of the core is loaded: it changes when one is replaced, and with it everything held in it is gone. */
export function generation(): number {
  return instances;
}

/** After a call: a fresh instance if the last call left the memory past {@link MEMORY_RESET_BYTES}. */
export function release(): void {
  if (exports().memory.buffer.byteLength > MEMORY_RESET_BYTES) {
    wasm.__wbg_reset_state();
    instances++;
  }
}

/**
 * Load the core once: from `source`, or else from what the platform's
 * `fallback` finds. A failed load can be retried.
 */
export function load(source: WasmSource | undefined, fallback: () => Promise<WasmSource>): Promise<void> {
  ready ??= (async () => {
    const input: unknown = source ?? (await fallback());
    if (input instanceof WebAssembly.Module || ArrayBuffer.isView(input) || input instanceof ArrayBuffer) {
      // Bytes or a module: compile (off the main thread) and instantiate
      // directly. The glue's async path probes the global Request/Response,
      // which in Node loads the whole fetch implementation (~20 ms of cold
      // start) for nothing.
      const module = input instanceof WebAssembly.Module ? input : await WebAssembly.compile(input as BufferSource);
      wasm.initSync({ module });
    } else {
      try {
        await initWasm({ module_or_path: input as never });
      } catch (e) {
        // A URL that does not serve the .wasm (a bundle shipped without it,
        // an esbuild browser build with no URL passed) fails inside the glue
        // with an untyped error: say which URL and what to do.
        const where = input instanceof URL || typeof input === "string" ? String(input) : "the given Response";
        throw new FoldlineError({
          code: "not_initialized",
          message: `the .wasm could not be loaded from ${where} (${String(e)}): serve foldline_bg.wasm there, or pass its URL, bytes or a WebAssembly.Module to init()`,
        });
      }
    }
    const v = JSON.parse(wasm.version()) as { abi: { major: number } };
    if (v.abi.major !== ABI_MAJOR) {
      throw new FoldlineError({ code: "unsupported_version", message: `ABI major ${v.abi.major}, expected ${ABI_MAJOR}` });
    }
    loaded = true;
  })();
  ready.catch(() => { ready = undefined; });
  return ready;
}
