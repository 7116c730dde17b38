/* tslint:disable */
/* eslint-disable */
export const memory: WebAssembly.Memory;
export const call: (a: number, b: number, c: number, d: number) => [number, number];
export const callHeld: (a: number, b: number, c: number, d: number, e: number, f: number, g: number, h: number) => [number, number];
export const foldline_abi_major: () => number;
export const foldline_abi_minor: () => number;
export const foldline_alloc: (a: number) => number;
export const foldline_call: (a: number, b: number, c: number, d: number) => bigint;
export const foldline_call_held: (a: number, b: number, c: number, d: number, e: number, f: number, g: number, h: number) => bigint;
export const foldline_free: (a: number, b: number) => void;
export const forget: (a: number) => void;
export const version: () => [number, number];
export const foldline_forget: (a: number) => void;
export const __wbindgen_externrefs: WebAssembly.Table;
export const __wbindgen_malloc: (a: number, b: number) => number;
export const __wbindgen_realloc: (a: number, b: number, c: number, d: number) => number;
export const __wbindgen_free: (a: number, b: number, c: number) => void;
export const __wbindgen_start: () => void;
