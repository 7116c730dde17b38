// Getting messages in: OpenAI chat messages (`role`, `content`, `name`,
// `tool_calls`, `tool_call_id`) as foldline journal events — the same
// conversion as the `foldline` program's `import` and `foldline serve`.

import { FoldlineError } from "./index.js";
import type { Event, Part, Role } from "./types.js";

/** An OpenAI chat-completions message (text content; tool calls and results). */
export interface OpenAiChatMessage {
  role: "system" | "developer" | "user" | "assistant" | "tool";
  content?: string | Array<{ type: "text"; text: string }> | null;
  name?: string;
  tool_calls?: Array<{ id: string; type?: "function"; function: { name: string; arguments?: string } }>;
  tool_call_id?: string;
}

const ROLES = new Set<Role>(["system", "developer", "user", "assistant", "tool"]);

function refuse(place: string, why: string): never {
  throw new FoldlineError({ code: "invalid_request", message: `${place}: ${why}` });
}

function textOf(place: string, content: unknown): string {
  if (content === undefined || content === null) return "";
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content.map((p: unknown) => {
      const part = p as { type?: unknown; text?: unknown };
      if (part?.type !== "text" || typeof part.text !== "string") refuse(place, "only text content parts can be imported");
      return part.text;
    }).join("\n");
  }
  return refuse(place, "content must be a string or an array of text parts");
}

/**
 * OpenAI chat messages as journal events of `conversation`, numbered after
 * `afterSeq` (the conversation's last source sequence). Throws
 * `invalid_request` naming the item at fault; nothing is half-converted.
 */
export function fromOpenAiMessages(
  messages: readonly OpenAiChatMessage[] | readonly unknown[],
  o: { conversation: string; afterSeq?: number },
): Event[] {
  let seq = o.afterSeq ?? 0;
  return messages.map((raw, i) => {
    const place = `item ${i + 1}`;
    const m = raw as Partial<OpenAiChatMessage> & Record<string, unknown>;
    if (typeof m !== "object" || m === null || Array.isArray(m)) refuse(place, "a message is an object");
    if ("type" in m) refuse(place, "send OpenAI-style messages; foldline events are written by foldline");
    if (typeof m.role !== "string") refuse(place, "a message needs a role");
    if (!ROLES.has(m.role as Role)) refuse(place, `unknown role ${JSON.stringify(m.role)}`);
    const role = m.role as Role;
    const text = textOf(place, m.content);
    const parts: Part[] = [];
    if (role === "tool") {
      if (typeof m.tool_call_id !== "string") refuse(place, "a tool message needs tool_call_id");
      parts.push({ type: "toolResult", callId: m.tool_call_id, name: typeof m.name === "string" ? m.name : "", content: text, isError: false });
    } else {
      if (text) parts.push({ type: "text", text });
      for (const c of Array.isArray(m.tool_calls) ? m.tool_calls : []) {
        parts.push({ type: "toolCall", callId: c?.id ?? "", name: c?.function?.name ?? "", arguments: c?.function?.arguments ?? "{}" });
      }
    }
    seq += 1;
    return {
      type: "message", conversation: o.conversation, sourceSeq: seq, turnId: `${o.conversation}-${seq}`, role, parts,
      ...(role === "assistant" && typeof m.name === "string" ? { authorAgent: m.name } : {}),
    } satisfies Event;
  });
}
