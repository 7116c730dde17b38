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
  return core;
}

/**
 * The instance's raw exports that a call crosses through: wasm-bindgen's
 * ABI for `call(entry: &str, request: &str) -> String` (each string in as
 * a (pointer, length) the callee owns and frees; the answer out as an owned
 * (pointer, length) the caller frees). It is the ABI of the glue committed
 * beside it (`pkg/`, wasm-bindgen at the crate's pinned version); the
 * crossing test in `test/node.test.mjs` compares every answer with the
 * glue's own `call`, so a glue that crosses differently fails it.
 */
interface Raw {
  memory: { buffer: ArrayBuffer };
  __wbindgen_malloc(size: number, align: number): number;
  __wbindgen_realloc(ptr: number, old: number, size: number, align: number): number;
  __wbindgen_free(ptr: number, size: number, align: number): void;
  call(p0: number, l0: number, p1: number, l1: number): [number, number];
  callHeld(id: number, count: number, p0: number, l0: number, p1: number, l1: number, p2: number, l2: number): [number, number];
  /** The raw ABI's major version (the same number `version()` reports), read without a string crossing. */
  foldline_abi_major(): number;
}

const encoder = new TextEncoder();
let decoder = new TextDecoder("utf-8", { ignoreBOM: true });
/** Bytes `decoder` has decoded: Safari's stops working past 2 GiB in all, so a fresh one takes over before that (as the glue does). */
let decoded = 0;
const DECODER_BYTES = 2_146_435_072;

/**
 * `text` as UTF-8 in the instance's memory, written natively
 * (`encodeInto`): into room for one byte per UTF-16 unit first (all of an
 * ASCII request, no more memory than the text), and only past the first
 * character that did not fit into room for the worst case of the rest
 * (three bytes per unit); what is left over given back. The glue wrote a
 * string one character at a time from JavaScript until its first non-ASCII
 * one: a third of a per-message call on the benchmark's 88 KB requests
 * (BENCHMARKS.md "Session 17").
 */
function put(raw: Raw, text: string): [number, number] {
  let room = text.length;
  let ptr = raw.__wbindgen_malloc(room, 1) >>> 0;
  if (room === 0) return [ptr, 0]; // nothing allocated: nothing to give back
  const { read, written: first } = encoder.encodeInto(text, new Uint8Array(raw.memory.buffer, ptr, room));
  let written = first;
  if (read < text.length) {
    const rest = text.slice(read);
    const more = written + rest.length * 3;
    ptr = raw.__wbindgen_realloc(ptr, room, more, 1) >>> 0;
    room = more;
    written += encoder.encodeInto(rest, new Uint8Array(raw.memory.buffer, ptr + written, room - written)).written;
  }
  return [written === room ? ptr : raw.__wbindgen_realloc(ptr, room, written, 1) >>> 0, written];
}

/** The answer a call left in the instance's memory, read and freed. */
function take(raw: Raw, [ptr, len]: [number, number]): string {
  decoded += len;
  if (decoded >= DECODER_BYTES) {
    decoder = new TextDecoder("utf-8", { ignoreBOM: true });
    decoded = len;
  }
  const text = decoder.decode(new Uint8Array(raw.memory.buffer, ptr >>> 0, len));
  raw.__wbindgen_free(ptr, len, 1);
  return text;
}

/** The core as the package calls it: the glue's, with the two calls every message makes crossing through {@link put}. */
const core: Core = {
  call(entry, request) {
    const raw = exports();
    const [p0, l0] = put(raw, entry);
    const [p1, l1] = put(raw, request);
    return take(raw, raw.call(p0, l0, p1, l1));
  },
  callHeld(id, count, entry, request, update) {
    const raw = exports();
    const [p0, l0] = put(raw, entry);
    const [p1, l1] = put(raw, request);
    const [p2, l2] = put(raw, update);
    return take(raw, raw.callHeld(id, count, p0, l0, p1, l1, p2, l2));
  },
  version: () => wasm.version(),
  forget: (id) => wasm.forget(id),
};

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

/** The core's exports as instantiated now (the glue answers them once loaded; a reset replaces them). */
function exports(): Raw {
  return wasm.initSync(undefined as never) as unknown as Raw;
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
    // The major version as a number from the raw ABI's export: `version()`
    // would format and cross a string, a millisecond of a cold start spent
    // compiling the formatting code on its first call.
    const major = exports().foldline_abi_major();
    if (major !== ABI_MAJOR) {
      throw new FoldlineError({ code: "unsupported_version", message: `ABI major ${major}, expected ${ABI_MAJOR}` });
    }
    loaded = true;
  })();
  ready.catch(() => { ready = undefined; });
  return ready;
}
