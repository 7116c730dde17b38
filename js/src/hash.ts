// The core's content hash, computed in JS with WebCrypto so a journal can
// hash each turn once, when it enters, and carry the hash with the event.

import type { Part } from "./types.js";

/** The canonical encoding: keys sorted, no whitespace, JSON string escaping. */
export function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  if (v !== null && typeof v === "object") {
    const o = v as Record<string, unknown>;
    const keys = Object.keys(o).filter((k) => o[k] !== undefined).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical(o[k])}`).join(",")}}`;
  }
  return JSON.stringify(v);
}

/** A format's name as the core writes it (`ai-sdk` is read as `aiSdk`). */
const FORMAT_NAMES: Record<string, string> = { "ai-sdk": "aiSdk", "openai-responses": "openaiResponses" };

/** Parts as the core serializes them (defaults filled, flags and empty reasons left out). */
function normalized(parts: Part[]): unknown[] {
  return parts.map((p) => {
    switch (p.type) {
      case "text": return { type: "text", text: p.text };
      case "toolCall":
        return {
          type: "toolCall", callId: p.callId, name: p.name, arguments: p.arguments,
          ...(p.custom ? { custom: true } : {}),
          ...(p.providerOptions != null ? { providerOptions: p.providerOptions } : {}),
        };
      case "toolResult":
        return p.isError
          ? { type: "toolResult", callId: p.callId, name: p.name ?? "", content: p.content, isError: true }
          : { type: "toolResult", callId: p.callId, name: p.name ?? "", content: p.content };
      case "approvalRequest": return { type: "approvalRequest", approvalId: p.approvalId, callId: p.callId };
      case "approvalResponse":
        return p.reason
          ? { type: "approvalResponse", approvalId: p.approvalId, approved: p.approved, reason: p.reason }
          : { type: "approvalResponse", approvalId: p.approvalId, approved: p.approved };
      case "reasoning": return { type: "reasoning", format: FORMAT_NAMES[p.format] ?? p.format, data: p.data };
    }
  });
}

/** `sha256:<hex>` of a turn's parts, equal to the core's content hash. */
export async function contentHash(parts: Part[]): Promise<string> {
  const bytes = new TextEncoder().encode(canonical(normalized(parts)));
  const d = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  return `sha256:${[...d].map((b) => b.toString(16).padStart(2, "0")).join("")}`;
}

/** The event with `contentHash` filled in for messages that lack one. */
export async function withContentHash<E extends { type: string }>(e: E): Promise<E> {
  const m = e as unknown as { type: string; parts?: Part[]; contentHash?: string };
  if ((m.type === "message" || m.type === "lateDelivery") && m.parts && !m.contentHash) {
    return { ...e, contentHash: await contentHash(m.parts) };
  }
  return e;
}

/** A message's metadata (sizes, role, tool links, content hash) without its content. */
export async function turnMeta(m: import("./types.js").Message): Promise<import("./types.js").TurnMeta> {
  return turnMetaWith(m, m.contentHash ?? (await contentHash(m.parts)));
}

/** {@link turnMeta} with the content hash given (a check that measures sizes only). */
export function turnMetaWith(m: import("./types.js").Message, hash: string): import("./types.js").TurnMeta {
  // As the core counts and links parts (core/src/records/turn.rs `Part::chars`, `Part::link`).
  const text = (p: Part): string =>
    p.type === "text" ? p.text : p.type === "toolCall" ? p.name + p.arguments : p.type === "toolResult" ? p.content : p.type === "approvalResponse" ? p.reason ?? "" : "";
  const link = (p: Part): [string, boolean] | undefined =>
    p.type === "toolCall" ? [p.callId, false] : p.type === "toolResult" ? [p.callId, true]
      : p.type === "approvalRequest" ? [p.approvalId, false] : p.type === "approvalResponse" ? [p.approvalId, true] : undefined;
  const chars = m.parts.reduce((n, p) => n + [...text(p)].length, 0);
  const meta: import("./types.js").TurnMeta = {
    conversation: m.conversation, chat: m.chat ?? "", sender: m.sender ?? "", sourceSeq: m.sourceSeq,
    index: m.index ?? 0, turnId: m.turnId, role: m.role, chars, contentHash: hash,
    toolCalls: m.parts.flatMap((p) => { const l = link(p); return l && !l[1] ? [l[0]] : []; }),
    toolResults: m.parts.flatMap((p) => { const l = link(p); return l?.[1] ? [l[0]] : []; }),
  };
  if (m.source) meta.source = m.source;
  if (m.authorAgent) meta.authorAgent = m.authorAgent;
  if (m.tokens !== undefined) meta.tokens = m.tokens;
  if (m.pinned) meta.pinned = true;
  if (m.sensitive) meta.sensitive = true;
  return meta;
}
