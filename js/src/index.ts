// foldline for JavaScript: the same WebAssembly rule set as every other host.
//
//   import { init, plan, select, timeline } from "foldline";
//   await init();                       // Node / browsers: loads the bundled .wasm
//   await init(wasmModule);             // edge runtimes: a precompiled WebAssembly.Module
//
// Every call answers a typed value or throws a FoldlineError with the core's
// stable code; nothing traps.

import initWasm, * as wasm from "../pkg/foldline.js";
import { ARTIFACT_SHA256 } from "../pkg/artifact.js";
import type {
  Code, ErrorValue, PlanRequest, PlanOutcome, ValidateRequest, ValidateResponse, SelectRequest,
  Selection, Timeline, Event, TrimResult, Format, MessagesOf, ToolResultRequest, ToolResultResponse, SettingsRequest,
  SettingsResponse,
} from "./types.js";

export type * from "./types.js";
export { createCompactor } from "./driver.js";
export type { Compactor, CompactorOptions, OnMessageResult, ContextOptions, ManualTask, AppendMessages } from "./driver.js";
export { createHandler, MemoryOwners } from "./handler.js";
export type { Handler, HandlerOptions, Member, Owners, ExecutionContext } from "./handler.js";
export { fromOpenAiMessages, anthropicToOpenAi, aiSdkToOpenAi, aiSdkPrompt } from "./convert.js";
export type { OpenAiChatMessage, AnthropicMessage, AiSdkMessage } from "./convert.js";
export { modelFromFunction } from "./model/function.js";
export { modelFromAiSdk } from "./model/aisdk.js";
export type { AiSdkLanguageModel } from "./model/aisdk.js";
export type { FunctionAnswer } from "./model/function.js";
export type { Journal, StoredEvent, AppendOptions } from "./journal/journal.js";
export { checkAppend } from "./journal/journal.js";
export { MemoryJournal } from "./journal/memory.js";
export { IndexedDbJournal } from "./journal/indexeddb.js";
export type { Model, ModelResult, StreamChunk } from "./model/model.js";
export { ModelError } from "./model/model.js";
export { OpenAiCompatibleModel } from "./model/openai.js";
export { contentHash, withContentHash, turnMeta } from "./hash.js";

/** SHA-256 of the bundled `.wasm`, `sha256:<hex>`; the wasmtime host reports the same. */
export const artifactSha256: string = ARTIFACT_SHA256;

/** A failure with the core's stable code. */
export class FoldlineError extends Error {
  readonly code: Code;
  readonly ids: string[];
  constructor(e: ErrorValue) {
    super(`${e.code}: ${e.message}`);
    this.name = "FoldlineError";
    this.code = e.code;
    this.ids = e.ids ?? [];
  }
}

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

let ready: Promise<void> | undefined;
let loaded = false;

/** The loaded core, or `not_initialized` before `init()` has finished. */
function core(): typeof wasm {
  if (!loaded) {
    throw new FoldlineError({ code: "not_initialized", message: "call `await init()` (edge runtimes: `await init(wasmModule)`) before any other foldline call" });
  }
  return wasm;
}

/**
 * Load the WebAssembly core once. Without an argument it fetches the `.wasm`
 * next to the package (browsers) or reads it from disk (Node). Edge runtimes
 * that refuse to compile bytes at run time pass a `WebAssembly.Module`.
 */
export function init(source?: WasmSource): Promise<void> {
  ready ??= (async () => {
    let input: unknown = source;
    const proc = (globalThis as { process?: { versions?: { node?: string } } }).process;
    if (input === undefined && proc?.versions?.node) {
      // Node cannot fetch file: URLs; read the bundled artifact from disk.
      const fsName = "node:fs/promises";
      const fs = (await import(fsName)) as { readFile(u: URL): Promise<Uint8Array> };
      input = await fs.readFile(new URL("../pkg/foldline_bg.wasm", import.meta.url));
    }
    if (input instanceof WebAssembly.Module || ArrayBuffer.isView(input) || input instanceof ArrayBuffer) {
      // Bytes or a module: compile (off the main thread) and instantiate
      // directly. The glue's async path probes the global Request/Response,
      // which in Node loads the whole fetch implementation (~20 ms of cold
      // start) for nothing.
      const module = input instanceof WebAssembly.Module ? input : await WebAssembly.compile(input as BufferSource);
      wasm.initSync({ module });
    } else {
      await initWasm(input === undefined ? undefined : { module_or_path: input as never });
    }
    const v = JSON.parse(wasm.version()) as { abi: { major: number } };
    if (v.abi.major !== ABI_MAJOR) {
      throw new FoldlineError({ code: "unsupported_version", message: `ABI major ${v.abi.major}, expected ${ABI_MAJOR}` });
    }
    loaded = true;
  })();
  // A failed load can be retried.
  ready.catch(() => { ready = undefined; });
  return ready;
}

/** The ABI major version this package speaks. */
export const ABI_MAJOR = 1;

/** Crate, ruleset and ABI versions of the loaded core. */
export function version(): { crate: string; ruleset: string; abi: { major: number; minor: number } } {
  return JSON.parse(core().version());
}

type Envelope<T> = { ok: T } | { error: ErrorValue };

/**
 * One core call: the request crosses as JSON text and the answer comes back
 * as JSON text, parsed here. The core never calls back into JavaScript
 * during a call — Node 20's V8 crashes (a fatal "unreachable code" in
 * `Deoptimizer::DoComputeBuiltinContinuation`) when optimized code that
 * inlined a call into WebAssembly is deoptimized by objects created while
 * that call runs, which is what parsing the answer inside the call did.
 */
function call<T>(entry: string, request: unknown): T {
  let text: string | undefined;
  try {
    text = JSON.stringify(request);
  } catch (e) {
    throw new FoldlineError({ code: "invalid_request", message: `the request is not JSON: ${(e as Error).message}` });
  }
  if (typeof text !== "string") throw new FoldlineError({ code: "invalid_request", message: "the request is not JSON" });
  const e = JSON.parse(core().call(entry, text)) as Envelope<T>;
  if ("error" in e) throw new FoldlineError(e.error);
  return e.ok;
}

/** `plan`: when to compact and exactly what to freeze. Refusals come back as `outcome: "refuse"`. */
export function plan(request: PlanRequest): PlanOutcome {
  return call<PlanOutcome>("plan", request);
}

/** `validate`: settle, resolve, declarations, stream decisions, failure classification. */
export function validate(request: ValidateRequest): ValidateResponse {
  return call<ValidateResponse>("validate", request);
}

/** `select`: the model-bound context and its manifest. */
export function select<F extends Format = "foldline">(request: SelectRequest & { format?: F }): Selection<MessagesOf[F]> {
  const r = request.format === "ai-sdk" ? { ...request, format: "aiSdk" as const } : request;
  return call<Selection<MessagesOf[F]>>("select", r);
}

/**
 * The chat timeline: messages and dividers, derived only from durable events.
 * With `accepted` (a resolution's `accepted` ids), only those boundaries draw
 * as completed dividers.
 */
export function timeline(events: Event[], accepted?: string[]): Timeline {
  return call<Timeline>("timeline", accepted ? { events, accepted } : { events });
}

/** Prompt trim of the model-bound copy of a member's message. */
export function trimPrompt(text: string): TrimResult {
  return call<TrimResult>("trimPrompt", { text });
}

/** Tool-result compression of the model-bound copy. */
export function compressToolResult(request: ToolResultRequest): ToolResultResponse {
  return call<ToolResultResponse>("compressToolResult", request);
}

/** The settings projection, plain-speak fragment and self-inspection answer. */
export function settingsProjection(request: SettingsRequest): SettingsResponse {
  return call<SettingsResponse>("settings", request);
}

/** Any entry point, JSON string in and canonical JSON string out (the conformance path). */
export function callJson(entry: string, request: string): string {
  return core().call(entry, request);
}
