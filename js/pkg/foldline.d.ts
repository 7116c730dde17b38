/* tslint:disable */
/* eslint-disable */

export function __wbg_reset_state(): void;

/**
 * Any entry point (`plan`, `validate`, `select`, `timeline`, `trimPrompt`,
 * `compressToolResult`, `settings`) with a JSON string; answers the
 * canonical JSON envelope `{ ok }` or `{ error }`, byte-identical to every
 * other runtime.
 */
export function call(entry: string, request: string): string;

/**
 * `call` with what is held under `id` (`update`, a hold request
 * `{reset?, events?, warm?, clearWarm?, view?}` applied first; `""` for
 * none) in front of the request's own (`step`'s view, `select`, `context`):
 * the same answer as the plain call with it written out. `count`: the events
 * held before the update; another number is `invalid_request`.
 */
export function callHeld(id: number, count: number, entry: string, request: string, update: string): string;

/**
 * Drop what is held under `id`.
 */
export function forget(id: number): void;

/**
 * Crate, ruleset and ABI versions as a JSON string.
 */
export function version(): string;

export type InitInput = RequestInfo | URL | Response | BufferSource | WebAssembly.Module;

export interface InitOutput {
    readonly memory: WebAssembly.Memory;
    readonly call: (a: number, b: number, c: number, d: number) => [number, number];
    readonly callHeld: (a: number, b: number, c: number, d: number, e: number, f: number, g: number, h: number) => [number, number];
    readonly foldline_abi_major: () => number;
    readonly foldline_abi_minor: () => number;
    readonly foldline_alloc: (a: number) => number;
    readonly foldline_call: (a: number, b: number, c: number, d: number) => bigint;
    readonly foldline_call_held: (a: number, b: number, c: number, d: number, e: number, f: number, g: number, h: number) => bigint;
    readonly foldline_free: (a: number, b: number) => void;
    readonly forget: (a: number) => void;
    readonly version: () => [number, number];
    readonly foldline_forget: (a: number) => void;
    readonly __wbindgen_externrefs: WebAssembly.Table;
    readonly __wbindgen_malloc: (a: number, b: number) => number;
    readonly __wbindgen_realloc: (a: number, b: number, c: number, d: number) => number;
    readonly __wbindgen_free: (a: number, b: number, c: number) => void;
    readonly __wbindgen_start: () => void;
}

export type SyncInitInput = BufferSource | WebAssembly.Module;

/**
 * Instantiates the given `module`, which can either be bytes or
 * a precompiled `WebAssembly.Module`.
 *
 * @param {{ module: SyncInitInput }} module - Passing `SyncInitInput` directly is deprecated.
 *
 * @returns {InitOutput}
 */
export function initSync(module: { module: SyncInitInput } | SyncInitInput): InitOutput;

/**
 * If `module_or_path` is {RequestInfo} or {URL}, makes a request and
 * for everything else, calls `WebAssembly.instantiate` directly.
 *
 * @param {{ module_or_path: InitInput | Promise<InitInput> }} module_or_path - Passing `InitInput` directly is deprecated.
 *
 * @returns {Promise<InitOutput>}
 */
export default function __wbg_init (module_or_path?: { module_or_path: InitInput | Promise<InitInput> } | InitInput | Promise<InitInput>): Promise<InitOutput>;
