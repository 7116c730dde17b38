// The one error type every foldline call throws.

import type { Code, ErrorValue } from "./types.js";

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
