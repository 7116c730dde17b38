// Getting messages in: OpenAI chat messages (`role`, `content`, `name`,
// `tool_calls`, `tool_call_id`) as foldline journal events — the same
// conversion as the `foldline` program's `import` and `foldline serve`.

import { FoldlineError } from "./core.js";
import type { AiSdkRendered, Event, Part, Role } from "./types.js";

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
    if (m.name != null && typeof m.name !== "string") refuse(place, "name must be a string");
    if (role === "tool") {
      if (typeof m.tool_call_id !== "string" || m.tool_call_id === "") refuse(place, "a tool message needs tool_call_id");
      parts.push({ type: "toolResult", callId: m.tool_call_id, name: typeof m.name === "string" ? m.name : "", content: text, isError: false });
    } else {
      if (text) parts.push({ type: "text", text });
      if (m.tool_calls != null && !Array.isArray(m.tool_calls)) refuse(place, "tool_calls must be an array of tool calls");
      for (const [k, c] of (m.tool_calls ?? []).entries()) {
        // The same shape rules as the Rust importer (host-wasmtime/src/import.rs).
        const at = `${place}: tool_calls[${k}]`;
        const f = (c as { function?: unknown } | null)?.function as { name?: unknown; arguments?: unknown } | undefined;
        if (typeof c !== "object" || c === null || typeof c.id !== "string" || c.id === "" || typeof f !== "object" || f === null) {
          throw new FoldlineError({ code: "invalid_request", message: `${at} needs an id and a function {"name", "arguments"}` });
        }
        if (typeof f.name !== "string" || f.name === "") throw new FoldlineError({ code: "invalid_request", message: `${at}: function.name must be a non-empty string` });
        if (f.arguments != null && typeof f.arguments !== "string") throw new FoldlineError({ code: "invalid_request", message: `${at}: arguments must be a string` });
        parts.push({ type: "toolCall", callId: c.id, name: f.name, arguments: f.arguments ?? "{}" });
      }
    }
    seq += 1;
    return {
      type: "message", conversation: o.conversation, sourceSeq: seq, turnId: `${o.conversation}-${seq}`, role, parts,
      ...(role === "assistant" && typeof m.name === "string" ? { authorAgent: m.name } : {}),
    } satisfies Event;
  });
}

/** An Anthropic Messages API message (text, tool use and tool results). */
export interface AnthropicMessage {
  role: "user" | "assistant";
  content:
    | string
    | Array<
        | { type: "text"; text: string }
        | { type: "tool_use"; id: string; name: string; input: unknown }
        | { type: "tool_result"; tool_use_id: string; content?: string | Array<{ type: "text"; text: string }>; is_error?: boolean }
      >;
}

/**
 * Anthropic messages (and the request's separate `system` prompt) as the
 * OpenAI chat shape `fromOpenAiMessages` numbers: text and `tool_use` blocks
 * of a turn stay together; `tool_result` blocks become tool messages.
 */
export function anthropicToOpenAi(messages: readonly AnthropicMessage[], system?: string): OpenAiChatMessage[] {
  const out: OpenAiChatMessage[] = system ? [{ role: "system", content: system }] : [];
  messages.forEach((m, i) => {
    if (typeof m.content === "string") {
      out.push({ role: m.role, content: m.content });
      return;
    }
    if (!Array.isArray(m.content)) refuse(`item ${i + 1}`, "content must be a string or an array of blocks");
    const text: string[] = [];
    const calls: NonNullable<OpenAiChatMessage["tool_calls"]> = [];
    const results: OpenAiChatMessage[] = [];
    for (const b of m.content) {
      if (b.type === "text") text.push(b.text);
      else if (b.type === "tool_use") calls.push({ id: b.id, type: "function", function: { name: b.name, arguments: JSON.stringify(b.input ?? {}) } });
      else if (b.type === "tool_result") {
        const content = typeof b.content === "string" ? b.content : (b.content ?? []).map((c) => c.text).join("\n");
        results.push({ role: "tool", tool_call_id: b.tool_use_id, content: b.is_error ? `[error] ${content}` : content });
      } else refuse(`item ${i + 1}`, `unsupported block ${JSON.stringify((b as { type?: unknown }).type)}`);
    }
    out.push(...results);
    if (text.length || calls.length) {
      out.push({ role: m.role, content: text.length ? text.join("\n") : null, ...(calls.length ? { tool_calls: calls } : {}) });
    }
  });
  return out;
}

/** A Vercel AI SDK `ModelMessage` (text, tool calls and tool results). */
export type AiSdkMessage =
  | { role: "system"; content: string }
  | { role: "user"; content: string | Array<{ type: "text"; text: string } | { type: string }> }
  | { role: "assistant"; content: string | Array<{ type: "text"; text: string } | { type: "tool-call"; toolCallId: string; toolName: string; input: unknown } | { type: string }> }
  | { role: "tool"; content: Array<{ type: "tool-result"; toolCallId: string; toolName: string; output: { type: string; value?: unknown } }> };

/** AI SDK `ModelMessage`s as the OpenAI chat shape `fromOpenAiMessages` numbers. */
export function aiSdkToOpenAi(messages: readonly AiSdkMessage[]): OpenAiChatMessage[] {
  const out: OpenAiChatMessage[] = [];
  messages.forEach((m, i) => {
    const place = `item ${i + 1}`;
    if (m.role === "system") {
      out.push({ role: "system", content: m.content });
    } else if (m.role === "tool") {
      for (const r of m.content) {
        const v = r.output?.value;
        const text = typeof v === "string" ? v : JSON.stringify(v ?? null);
        out.push({ role: "tool", tool_call_id: r.toolCallId, name: r.toolName, content: r.output?.type?.startsWith("error") ? `[error] ${text}` : text });
      }
    } else if (typeof m.content === "string") {
      out.push({ role: m.role, content: m.content });
    } else if (Array.isArray(m.content)) {
      const text: string[] = [];
      const calls: NonNullable<OpenAiChatMessage["tool_calls"]> = [];
      for (const p of m.content) {
        if (p.type === "text" && "text" in p) text.push(p.text);
        else if (p.type === "tool-call" && "toolCallId" in p) calls.push({ id: p.toolCallId, type: "function", function: { name: p.toolName, arguments: JSON.stringify(p.input ?? {}) } });
        else if (p.type === "reasoning") continue; // model-private: not part of the history a summary keeps
        else refuse(place, `unsupported part ${JSON.stringify(p.type)} (text, tool calls and tool results are imported)`);
      }
      out.push({ role: m.role, content: text.length ? text.join("\n") : null, ...(calls.length ? { tool_calls: calls } : {}) });
    } else {
      refuse(place, "content must be a string or an array of parts");
    }
  });
  return out;
}

/**
 * A rendered AI SDK context as the arguments `generateText`/`streamText`
 * take since ai v7, which refuses system messages inside `messages`: the
 * pinned system text as `instructions`, the turns as `messages`.
 */
export function aiSdkPrompt(messages: readonly AiSdkRendered[]): {
  instructions: string;
  messages: Array<Exclude<AiSdkRendered, { role: "system" }>>;
} {
  const system: string[] = [];
  const rest: Array<Exclude<AiSdkRendered, { role: "system" }>> = [];
  for (const m of messages) {
    if (m.role === "system") system.push(m.content);
    else rest.push(m);
  }
  return { instructions: system.join("\n\n"), messages: rest };
}
