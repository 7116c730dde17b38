// Real token counts: the host's tokenizer (`countTokens`) counts each
// message as it is appended or corrected, with its framing, and before a
// context is sent the texts the core measures by its own estimate (the
// summary in force, the amendment, the prompt), so a token budget works
// from the counts the provider will make. host-wasmtime/src/driver/tokens.rs
// is its twin.

import { MESSAGE_OVERHEAD_TOKENS } from "../defaults.js";
import { FoldlineError } from "../error.js";
import type { Amendment, ChainHead, Event, Part } from "../types.js";
import type { Ctx } from "./read.js";

/**
 * The host's counter, its answers checked: a count that is not a whole
 * number of tokens (NaN, a fraction, a negative number, a string) is
 * refused naming the counter, never stored or sent as something else.
 */
function checkedCounter(c: Ctx): ((text: string) => number) | undefined {
  const count = c.o.countTokens;
  if (!count) return undefined;
  return (text) => {
    const n: unknown = count(text);
    if (typeof n !== "number" || !Number.isSafeInteger(n) || n < 0) {
      const what = n instanceof Promise ? "a Promise (it must count synchronously)" : typeof n === "number" ? String(n) : JSON.stringify(n) ?? typeof n;
      throw new FoldlineError({ code: "invalid_request", message: `countTokens must return a whole number of tokens, 0 or more: it returned ${what} for a text of ${text.length} UTF-16 units` });
    }
    return n;
  };
}

/** The tokens of `parts` as `count` counts them (reasoning and approval requests count nothing here). */
function partsTokens(count: (text: string) => number, parts: readonly Part[]): number {
  let tokens = 0;
  for (const p of parts) {
    tokens += p.type === "text" ? count(p.text)
      : p.type === "toolCall" ? count(p.name) + count(p.arguments)
      : p.type === "toolResult" ? count(p.content)
      : p.type === "approvalResponse" ? count(p.reason ?? "")
      : 0;
  }
  return tokens;
}

/** Characters of `parts` as the core measures them (Unicode scalar values). */
function partsChars(parts: readonly Part[]): number {
  let n = 0;
  const chars = (s: string) => {
    for (const _ of s) n++;
  };
  for (const p of parts) {
    if (p.type === "text") chars(p.text);
    else if (p.type === "toolCall") { chars(p.name); chars(p.arguments); }
    else if (p.type === "toolResult") chars(p.content);
    else if (p.type === "approvalResponse") chars(p.reason ?? "");
  }
  return n;
}

/** The tokens `count` gives `parts` beyond the core's estimate of them (`ceil(chars / 4)`, framing aside). */
function beyond(count: (text: string) => number, parts: readonly Part[]): number {
  return Math.max(0, partsTokens(count, parts) - Math.ceil(partsChars(parts) / 4));
}

/**
 * Each message's tokens as the provider counts them: the host's count of
 * its parts plus the per-message framing (`messageOverheadTokens`), so a
 * context never exceeds the window by its framing.
 */
export function counted(c: Ctx, events: Event[]): Event[] {
  const count = checkedCounter(c);
  if (!count) return events;
  const framing = c.o.messageOverheadTokens ?? MESSAGE_OVERHEAD_TOKENS;
  return events.map((e) => (e.type === "message" ? { ...e, tokens: framing + partsTokens(count, e.parts) } : e));
}

/**
 * The tokens the host's counter gives the texts `select` measures by the
 * estimate itself — the summary in force, the amendment's turns and the
 * prompt (stored turns carry their counts) — beyond that estimate
 * (`ceil(chars / 4)`, framing aside). Zero when the host does not count.
 */
export function uncounted(c: Ctx, summary: ChainHead | null | undefined, amendment: Amendment | null | undefined, prompt: readonly Part[] | null | undefined): number {
  const count = checkedCounter(c);
  if (!count) return 0;
  let n = summary ? summaryUncounted(c, count, summary) : 0;
  for (const e of amendment?.entries ?? []) n += beyond(count, e.parts);
  return n + (prompt ? beyond(count, prompt) : 0);
}

/** The tokens counted beyond the estimate of summaries in force, by boundary id, per compactor. */
const summariesCounted = new WeakMap<Ctx, Map<string, number>>();

/** `uncounted` of a chain head's summary, counted once per boundary (the memo is let go whole past 4,096 boundaries). */
function summaryUncounted(c: Ctx, count: (text: string) => number, head: ChainHead): number {
  let memo = summariesCounted.get(c);
  if (!memo) summariesCounted.set(c, (memo = new Map()));
  const known = memo.get(head.boundaryId);
  if (known !== undefined) return known;
  const n = beyond(count, [{ type: "text", text: head.summary }]);
  if (memo.size >= 4096) memo.clear();
  memo.set(head.boundaryId, n);
  return n;
}
