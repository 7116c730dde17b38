// Messages in: converted, checked (each one a compaction could take, with
// real token counts and framing when the host counts), numbered after the
// journal's last turn and written with a compare-and-append, once per
// idempotency key.

import { FoldlineError } from "../error.js";
import { canonical } from "../hash.js";
import { validate } from "../ops.js";
import type { Event } from "../types.js";
import { eventsOf, turnIdOf, type OpenAiChatMessage } from "../convert.js";
import type { AppendMessages, AppendMessagesOptions, Appended } from "./api.js";
import { isPinned, pinnedTurns, scoped, state, sync, using, type Ctx, type State } from "./read.js";
import { checkNewest } from "./newest.js";
import { checkBesidePinned } from "./room.js";
import { counted } from "./tokens.js";

const KEY = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * The messages as journal events (numbered from 1; renumbered when
 * written), checked (they convert, and each is one a compaction could
 * take), with each one's token count (counted once, here) and content hash,
 * and how many of them (0 or 1) are the request's prompt: a leading system
 * or developer message (an Anthropic request's `system` is one).
 */
export function admitted(c: Ctx, id: string, input: OpenAiChatMessage | readonly OpenAiChatMessage[] | AppendMessages): { events: Event[]; hashes: string[]; prompt: number } {
  const spec: AppendMessages = Array.isArray(input) || !("messages" in (input as object))
    ? { messages: input as OpenAiChatMessage | readonly OpenAiChatMessage[] }
    : (input as AppendMessages);
  const list: readonly unknown[] = Array.isArray(spec.messages) ? spec.messages : [spec.messages];
  // Nothing accepted may leave the conversation unable to compact: the
  // core's admission rule, with the real token counts when there are.
  const events = counted(c, eventsOf(spec.format ?? "openai", list, { conversation: id, ...(spec.format === "anthropic" ? { system: spec.system } : {}) }));
  if (events.length === 0) throw new FoldlineError({ code: "invalid_request", message: "no messages to append" });
  const checked = validate({ kind: "events", route: c.routeOf(id), events, declaration: c.o.declaration });
  const first = events[0];
  const prompt = first.type === "message" && (first.role === "system" || first.role === "developer") ? 1 : 0;
  return { events, hashes: checked.kind === "events" ? checked.contentHashes : [], prompt };
}

/**
 * What an append of messages sent by `senders` with `hashes` under `key`
 * wrote before (with its prompt, or without it when `prompt` is 1), if it
 * did. `idempotency_key_reused` when it wrote other messages.
 */
function replayOf(s: State, key: string, senders: readonly string[], hashes: readonly string[], prompt: number): { seq: number; count: number } | undefined {
  try {
    return writtenUnder(s, key, senders, hashes);
  } catch (e) {
    if (prompt !== 1) throw e;
    return writtenUnder(s, key, senders.slice(1), hashes.slice(1));
  }
}

/**
 * What an append of messages sent by `senders` with `hashes` under `key`
 * wrote before, if it did: each sender's messages of the batch are what
 * that sender wrote under the key (`scoped`; the Rust driver's
 * `Keys::written`). `idempotency_key_reused` when a sender wrote it with
 * other messages, or only some of the batch's senders did.
 */
function writtenUnder(s: State, key: string, senders: readonly string[], hashes: readonly string[]): { seq: number; count: number } | undefined {
  const bySender = new Map<string, string[]>();
  senders.forEach((sender, i) => bySender.set(sender, [...(bySender.get(sender) ?? []), hashes[i]]));
  const found: number[] = [];
  for (const [sender, own] of bySender) {
    const done = s.keys.get(scoped(sender, key));
    if (done === undefined) continue;
    if (done.hashes.join(" ") !== own.join(" ")) throw reused();
    found.push(done.seq);
  }
  if (found.length === 0) return undefined;
  if (found.length < bySender.size) throw reused();
  return { seq: Math.max(...found), count: hashes.length };
}

function reused(): FoldlineError {
  return new FoldlineError({ code: "idempotency_key_reused", message: "this idempotency key was used for other messages" });
}

export async function appendMessages(c: Ctx, id: string, input: OpenAiChatMessage | readonly OpenAiChatMessage[] | AppendMessages, options: AppendMessagesOptions = {}): Promise<Appended> {
  const { events: all, hashes: allHashes, prompt } = admitted(c, id, input); // checked before anything is read or written
  const key = options.idempotencyKey;
  if (key !== undefined && !KEY.test(key)) throw new FoldlineError({ code: "invalid_request", message: "an idempotency key is 1 to 128 of A-Z a-z 0-9 . _ : -" });
  // Each message's sender as it is written: a key is its sender's.
  const senders = all.map((e) => options.sender ?? (e.type === "message" ? e.sender : undefined) ?? "");
  const s = state(c, id);
  const next = using(s, s.appending.then(async () => {
    for (;;) {
      await sync(c, id);
      // Either way: with the request's system prompt, or without it when it was written before.
      const done = key === undefined ? undefined : replayOf(s, key, senders, allHashes, prompt);
      if (done) return { ...done, events: [], replayed: true };
      // A request's prompt joins the conversation's pinned turns once: a
      // client posting it with each turn (an Anthropic request's shape, or
      // messages that open with it) does not write it again.
      // Held: a pinned turn of its role and content, as its corrections make it (the Rust driver's `holds`).
      const head = all[0];
      const held = prompt === 1 && head.type === "message" && pinnedTurns(s).some((e) =>
        (e.type === "message" || e.type === "lateDelivery") && e.role === head.role && canonical(e.parts) === canonical(head.parts)) ? 1 : 0;
      const converted = all.slice(held);
      if (converted.length === 0) return { seq: s.seq, events: [], count: 0, replayed: false };
      // Numbered after the journal's last turn, with the counts made once above.
      const events = converted.map((e, i) => {
        if (e.type !== "message") return e;
        const seq = s.sourceSeq + i + 1;
        return {
          ...e, sourceSeq: seq, turnId: `${turnIdOf(id, seq)}${key === undefined ? "" : `@${key}`}`,
          ...(options.sender === undefined ? {} : { sender: options.sender }),
        };
      });
      // A pinned turn is checked beside the conversation's (never folded,
      // together they must leave a context room: else `pinned_too_large`).
      if (events.some(isPinned)) {
        checkBesidePinned(c, id, events, pinnedTurns(s));
      }
      checkNewest(c, id, events, () => pinnedTurns(s), () => s.recent);
      try {
        const seq = await c.o.journal.append(id, events, { expectedSeq: s.seq });
        await sync(c, id);
        return { seq, events, count: events.length, replayed: false };
      } catch (e) {
        // Another writer appended meanwhile: number after it and try again.
        if (!(e instanceof FoldlineError) || e.code !== "conflict") throw e;
      }
    }
  }));
  s.appending = next.catch(() => undefined);
  return next;
}
