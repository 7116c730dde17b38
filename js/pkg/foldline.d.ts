/* tslint:disable */
/* eslint-disable */

/**
 * Any entry point with a JSON string; answers the canonical JSON string,
 * byte-identical to every other runtime.
 */
export function call(entry: string, request: string): string;

/**
 * Tool-result compression of the model-bound copy.
 */
export function compressToolResult(request: any): any;

/**
 * `plan`: when to compact and what to freeze. Answers `{ ok }` or `{ error }`.
 */
export function plan(request: any): any;

/**
 * `select`: the model-bound context.
 */
export function select(request: any): any;

/**
 * Settings projection, plain-speak fragment and self-inspection answer.
 */
export function settingsProjection(request: any): any;

/**
 * `timeline`: messages and dividers.
 */
export function timeline(request: any): any;

/**
 * Prompt trim of a member's message.
 */
export function trimPrompt(request: any): any;

/**
 * `validate`: settle, resolve, declarations, stream, failure.
 */
export function validate(request: any): any;

/**
 * Crate, ruleset and ABI versions as a JSON string.
 */
export function version(): string;

export type InitInput = RequestInfo | URL | Response | BufferSource | WebAssembly.Module;

export interface InitOutput {
    readonly memory: WebAssembly.Memory;
    readonly call: (a: number, b: number, c: number, d: number) => [number, number];
    readonly compressToolResult: (a: any) => any;
    readonly foldline_abi_major: () => number;
    readonly foldline_abi_minor: () => number;
    readonly foldline_alloc: (a: number) => number;
    readonly foldline_call: (a: number, b: number, c: number, d: number) => bigint;
    readonly foldline_free: (a: number, b: number) => void;
    readonly plan: (a: any) => any;
    readonly select: (a: any) => any;
    readonly settingsProjection: (a: any) => any;
    readonly timeline: (a: any) => any;
    readonly trimPrompt: (a: any) => any;
    readonly validate: (a: any) => any;
    readonly version: () => [number, number];
    readonly __wbindgen_malloc: (a: number, b: number) => number;
    readonly __wbindgen_realloc: (a: number, b: number, c: number, d: number) => number;
    readonly __wbindgen_free: (a: number, b: number, c: number) => void;
    readonly __wbindgen_exn_store: (a: number) => void;
    readonly __externref_table_alloc: () => number;
    readonly __wbindgen_externrefs: WebAssembly.Table;
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
