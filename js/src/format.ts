// The output formats by every name they are asked for: `ai-sdk` (the
// README's and the program's spelling) is the core's `aiSdk`. The one place
// the JS package reads a format's name; the Rust server's is its routes.rs.

import type { Format } from "./types.js";

/** A format as the core spells it. */
export type CoreFormat = Exclude<Format, "ai-sdk">;

/** Every accepted name, to the core's spelling. */
export const FORMATS: Readonly<Record<string, CoreFormat>> = { foldline: "foldline", openai: "openai", anthropic: "anthropic", "ai-sdk": "aiSdk", aiSdk: "aiSdk" };

/**
 * The core's spelling of `format` (default `foldline`); a name it does not
 * know goes through as it is, for the core to refuse (`invalid_request`).
 */
export function formatOf(format: Format | undefined): CoreFormat {
  if (format === undefined) return "foldline";
  return Object.hasOwn(FORMATS, format) ? FORMATS[format] : (format as CoreFormat);
}
