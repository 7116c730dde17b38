// Getting messages in: OpenAI chat messages, OpenAI Responses items,
// Anthropic messages and AI SDK model messages as foldline journal events, each part kept as the kind it
// is (text, tool calls of either OpenAI kind, tool results with their error
// status, approvals and their answers). Every format's rules are the
// `foldline` program's and `foldline serve`'s (host-wasmtime/src/import/),
// held to the shared cases in tests/import/.
//
// What has no place in a journal of text (docs/formats.md):
// - reasoning is kept only where a provider wants it back: an assistant's
//   Anthropic `thinking` / `redacted_thinking` block and AI SDK `reasoning`
//   part become a `reasoning` part, sent back in that format while its tool
//   cycle is open (core/src/render/reasoning.rs), and so does a Responses
//   `reasoning` item that carries its `encrypted_content` (less its id);
//   reasoning anywhere else is dropped;
// - files and images are not stored (a journal holds text): each becomes a
//   text part `[file <media type> <name>]` so the model still knows one was
//   there.
// Anything else unknown is refused (`invalid_request`), naming the caller's
// item and part: nothing is half-converted or silently lost.

import { FoldlineError } from "./error.js";
import type { AiSdkRendered, Event, Part, Role } from "./types.js";

/** An OpenAI chat-completions message: text (or text parts), function and custom tool calls, tool results. */
export interface OpenAiChatMessage {
  /** `"function"` (deprecated by OpenAI) is refused with a message saying so. */
  role: "system" | "developer" | "user" | "assistant" | "tool" | "function";
  content?: string | ReadonlyArray<{ type: string; text?: string; refusal?: string; image_url?: unknown; input_audio?: unknown; file?: unknown }> | null;
  name?: string;
  refusal?: string | null;
  /** Carried by the `openai` package's assistant messages; not stored. */
  audio?: unknown;
  /** The deprecated single function call: refused (send `tool_calls`). */
  function_call?: unknown;
  /** Carried by the `openai` package's assistant messages; not stored. */
  annotations?: unknown;
  tool_calls?: ReadonlyArray<
    | { id: string; type?: "function"; function: { name: string; arguments?: string } }
    | { id: string; type: "custom"; custom: { name: string; input?: string } }
  >;
  tool_call_id?: string;
}

/**
 * An Anthropic Messages API message (text, tool use, tool results with their
 * error status), a system message in the conversation (text blocks only), or
 * a `messages.create` response as it is.
 */
export interface AnthropicMessage {
  role: "user" | "assistant" | "system";
  content:
    | string
    | ReadonlyArray<
        | { type: "text"; text: string }
        | { type: "tool_use"; id: string; name: string; input: unknown }
        | { type: "tool_result"; tool_use_id: string; content?: string | ReadonlyArray<{ type: string; text?: string }>; is_error?: boolean }
        | { type: string; source?: unknown; title?: string | null; cache_control?: unknown; citations?: unknown; thinking?: string; signature?: string; data?: string }
      >;
}

/** A text block of an Anthropic system prompt (`TextBlockParam`; `cache_control` and citations are not kept). */
export interface AnthropicTextBlock { type: "text"; text: string }

/** A Vercel AI SDK `ModelMessage` of any major line (5, 6, 7): text, files, reasoning, tool calls, tool results, approvals. */
export type AiSdkMessage =
  | { role: "system"; content: string; providerOptions?: unknown }
  | { role: "user" | "assistant" | "tool"; content: string | ReadonlyArray<AiSdkPart>; providerOptions?: unknown };

/**
 * A part of an AI SDK model message, as every line spells it: `text`,
 * `image`, `file`, `reasoning`, `tool-call`, `tool-result`,
 * `tool-approval-request`, `tool-approval-response`.
 */
export interface AiSdkPart {
  type: string;
  text?: string;
  image?: unknown;
  data?: unknown;
  mediaType?: string;
  filename?: string;
  toolCallId?: string;
  toolName?: string;
  input?: unknown;
  output?: unknown;
  approvalId?: string;
  approved?: boolean;
  reason?: string;
  isAutomatic?: boolean;
  signature?: string;
  providerExecuted?: boolean;
  providerOptions?: unknown;
}

/** A message on its way in: its parts in foldline's form, before numbering. */
interface Draft { role: Role; parts: Part[]; authorAgent?: string; sender?: string }

const ROLES = new Set<Role>(["system", "developer", "user", "assistant", "tool"]);

function refuse(place: string, why: string): never {
  throw new FoldlineError({ code: "invalid_request", message: `${place}: ${why}` });
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

function str(place: string, v: Record<string, unknown>, field: string, required = true): string | undefined {
  const x = v[field];
  if (x === undefined || x === null) return required ? refuse(place, `${field} must be a non-empty string`) : undefined;
  if (typeof x !== "string" || (required && x === "")) refuse(place, `${field} must be ${required ? "a non-empty" : "a"} string`);
  return x;
}

/** The placeholder a file or image leaves in the journal. */
function fileMark(mediaType: unknown, name: unknown): Part {
  const what = [typeof mediaType === "string" && mediaType ? mediaType : "file", typeof name === "string" && name ? name : ""].filter(Boolean).join(" ");
  return { type: "text", text: `[file ${what}]` };
}

/** Tool-call input as JSON text: a string is taken as the JSON text it already is, anything else is encoded. */
function inputText(input: unknown): string {
  return typeof input === "string" ? input : JSON.stringify(input ?? {});
}

/** The turn id of a conversation's `seq`-th message, as every importer numbers it. */
export function turnIdOf(conversation: string, seq: number): string {
  return `${conversation}-${seq}`;
}

/** Number drafts after `afterSeq` as message events of `conversation`. */
function number(drafts: Draft[], o: { conversation: string; afterSeq?: number }): Event[] {
  let seq = o.afterSeq ?? 0;
  return drafts.map((d) => {
    seq += 1;
    return {
      type: "message", conversation: o.conversation, sourceSeq: seq, turnId: turnIdOf(o.conversation, seq), role: d.role, parts: d.parts,
      ...(d.authorAgent === undefined ? {} : { authorAgent: d.authorAgent }),
      ...(d.sender === undefined ? {} : { sender: d.sender }),
    } satisfies Event;
  });
}

// ---- OpenAI chat ----

/** The other formats' part types, named in a refusal: the format the messages were likely meant as. */
const OTHER_FORMATS: Record<string, string> = {
  tool_use: "anthropic", tool_result: "anthropic", thinking: "anthropic", redacted_thinking: "anthropic", document: "anthropic",
  "tool-call": "ai-sdk", "tool-result": "ai-sdk", reasoning: "ai-sdk", "tool-approval-request": "ai-sdk", "tool-approval-response": "ai-sdk",
};
const CHAT_ONLY = new Set(["text", "image_url", "input_audio", "file"]);
const RESPONSES_ONLY = new Set(["input_text", "output_text", "input_image", "input_file"]);

/** ` (a part of the <format> format: …)` for a part type another format has, else nothing. */
function formatHint(type: unknown, api: "chat" | "responses"): string {
  if (typeof type !== "string") return "";
  const other = Object.hasOwn(OTHER_FORMATS, type) ? OTHER_FORMATS[type]
    : api === "chat" && RESPONSES_ONLY.has(type) ? "openai-responses"
    : api === "responses" && CHAT_ONLY.has(type) ? "openai" : undefined;
  return other ? ` (a part of the ${other} format: send such messages as ${other})` : "";
}

/**
 * The text of an OpenAI message's content (a string or content parts), its
 * images, audio and files as marks: in the chat API's vocabulary (`text`,
 * `image_url`, `input_audio`, `file`) or the Responses API's (`input_text`,
 * `output_text`, `input_image`, `input_file`).
 */
function openAiText(place: string, content: unknown, role: Role, api: "chat" | "responses" = "chat"): Part[] {
  if (content === undefined || content === null) return [];
  if (typeof content === "string") return content ? [{ type: "text", text: content }] : [];
  if (!Array.isArray(content)) return refuse(place, "content must be a string or an array of content parts");
  const texts: string[] = [];
  const files: Part[] = [];
  const chat = api === "chat";
  content.forEach((p: unknown, k) => {
    const at = `${place}: content[${k}]`;
    if (!isObject(p)) refuse(at, "a content part is an object");
    if (chat ? p.type === "text" : p.type === "input_text" || p.type === "output_text") texts.push(str(at, p, "text", false) ?? "");
    else if (p.type === "refusal" && role === "assistant") texts.push(str(at, p, "refusal", false) ?? "");
    else if (p.type === (chat ? "image_url" : "input_image")) files.push(fileMark("image", undefined));
    else if (chat && p.type === "input_audio") files.push(fileMark("audio", undefined));
    else if (p.type === (chat ? "file" : "input_file")) files.push(fileMark("file", chat ? (isObject(p.file) ? p.file.filename : undefined) : p.filename));
    else if (p.type != null && typeof p.type !== "string") refuse(at, "a content part's type must be a string");
    else refuse(at, `unsupported content part ${JSON.stringify(p.type ?? null)}${formatHint(p.type, api)}`);
  });
  const text = texts.join("\n");
  return [...(text ? [{ type: "text" as const, text }] : []), ...files];
}

function openAiCalls(place: string, calls: unknown): Part[] {
  if (calls === undefined || calls === null) return [];
  if (!Array.isArray(calls)) refuse(place, "tool_calls must be an array of tool calls");
  return calls.map((c: unknown, k): Part => {
    const at = `${place}: tool_calls[${k}]`;
    const custom = isObject(c) && c.type === "custom";
    const [key, input, fallback] = custom ? ["custom", "input", ""] : ["function", "arguments", "{}"];
    const f = isObject(c) ? c[key] : undefined;
    if (!isObject(c) || typeof c.id !== "string" || c.id === "" || !isObject(f)) return refuse(at, `needs an id and a ${key} {"name", "${input}"}`);
    if (typeof f.name !== "string" || f.name === "") refuse(at, `${key}.name must be a non-empty string`);
    if (f[input] != null && typeof f[input] !== "string") refuse(at, `${key}.${input} must be a string`);
    const args = typeof f[input] === "string" ? (f[input] as string) : fallback;
    return { type: "toolCall", callId: c.id, name: f.name as string, arguments: args, ...(custom ? { custom: true } : {}) };
  });
}

function openAiDrafts(messages: readonly unknown[]): Draft[] {
  return messages.map((raw, i) => {
    const place = `item ${i + 1}`;
    if (!isObject(raw)) refuse(place, "a message is a JSON object");
    const m = raw;
    if ("type" in m) refuse(place, 'raw foldline events are not accepted here; send OpenAI-style messages ({"role", "content"}): the server numbers turns and writes every other event itself');
    if (typeof m.role !== "string") refuse(place, "a message needs a role");
    if (m.role === "function") refuse(place, 'the deprecated "function" role is not imported; send tool calls and "tool" messages');
    if (!ROLES.has(m.role as Role)) refuse(place, `unknown role ${JSON.stringify(m.role)}`);
    const role = m.role as Role;
    if (m.name != null && typeof m.name !== "string") refuse(place, "name must be a string");
    if (m.function_call != null) refuse(place, "the deprecated function_call is not imported; send tool_calls");
    if (role !== "assistant" && m.tool_calls != null) refuse(place, "only an assistant message carries tool_calls");
    if (role === "tool") {
      if (m.tool_call_id != null && typeof m.tool_call_id !== "string") refuse(place, "tool_call_id must be a string");
      const callId = m.tool_call_id;
      if (typeof callId !== "string" || callId === "") return refuse(place, "a tool message needs tool_call_id");
      const content = openAiText(place, m.content, role).map((p) => (p.type === "text" ? p.text : "")).join("\n");
      return { role, parts: [{ type: "toolResult", callId, name: typeof m.name === "string" ? m.name : "", content, isError: false }] };
    }
    const parts = openAiText(place, m.content, role);
    if (role === "assistant") {
      if (m.refusal != null && typeof m.refusal !== "string") refuse(place, "refusal must be a string");
      if (typeof m.refusal === "string" && m.refusal) parts.push({ type: "text", text: m.refusal });
      parts.push(...openAiCalls(place, m.tool_calls));
    }
    // A member's `name` names the participant: who of a room sent it (the
    // handler and the driver's `sender` option write over it).
    return {
      role, parts,
      ...(role === "assistant" && typeof m.name === "string" ? { authorAgent: m.name } : {}),
      ...(role === "user" && typeof m.name === "string" && m.name ? { sender: m.name } : {}),
    };
  });
}

/**
 * OpenAI chat messages as journal events of `conversation`, numbered after
 * `afterSeq` (the conversation's last source sequence). Function and custom
 * tool calls keep their kind. Throws `invalid_request` naming the item (and
 * part) at fault; nothing is half-converted.
 */
export function fromOpenAiMessages(messages: readonly OpenAiChatMessage[] | readonly unknown[], o: { conversation: string; afterSeq?: number }): Event[] {
  return number(openAiDrafts(messages), o);
}

// ---- OpenAI Responses ----

/**
 * An OpenAI Responses API item as `responses.create` takes it in `input` and
 * answers it in `output` (the `openai` package's `ResponseInputItem` and
 * `ResponseOutputItem` are assignable): messages (`content` a string or
 * `input_text` / `output_text` / `refusal` parts; images and files leave a
 * mark), `function_call` and `custom_tool_call`, their `…_output`s, and
 * `reasoning` (stored when it carries its `encrypted_content`, less its id,
 * to go back while its tool cycle is open). Any other item is refused by
 * name.
 */
export interface OpenAiResponsesInput {
  type?: string | null;
  role?: string;
  content?: unknown;
  call_id?: unknown;
  name?: unknown;
  arguments?: unknown;
  input?: unknown;
  output?: unknown;
  id?: unknown;
  status?: unknown;
  phase?: unknown;
  summary?: unknown;
  encrypted_content?: unknown;
}

const RESPONSES_ROLES = new Set(["system", "developer", "user", "assistant"]);

function responsesDrafts(items: readonly unknown[]): Draft[] {
  const out: Draft[] = [];
  // An assistant message is a turn, and the calls after it are its calls
  // (as one response's output holds them); calls after anything else are
  // a turn of their own.
  let answer: Draft | undefined;
  // The last draft, while it holds reasoning alone: the assistant message
  // or calls after it join it; anything else drops it (no output, no turn).
  let thought: Draft | undefined;
  const assistant = (): Part[] => {
    if (!answer) out.push((answer = { role: "assistant", parts: [] }));
    thought = undefined;
    return answer.parts;
  };
  const unthought = (): void => {
    if (thought) out.pop();
    thought = answer = undefined;
  };
  items.forEach((raw, i) => {
    const place = `item ${i + 1}`;
    if (!isObject(raw)) refuse(place, "an item is a JSON object");
    const type = raw.type ?? (raw.role !== undefined ? "message" : undefined);
    if (type !== undefined && typeof type !== "string") refuse(place, "type must be a string");
    if (type === "message") {
      if (typeof raw.role !== "string") refuse(place, "role must be a string");
      if (!RESPONSES_ROLES.has(raw.role)) refuse(place, `unknown role ${JSON.stringify(raw.role)}`);
      const role = raw.role as Role;
      const parts = openAiText(place, raw.content, role, "responses");
      if (role === "assistant" && thought) {
        assistant().push(...parts);
        return;
      }
      unthought();
      out.push({ role, parts });
      answer = role === "assistant" ? out[out.length - 1] : undefined;
    } else if (type === "function_call" || type === "custom_tool_call") {
      const custom = type === "custom_tool_call";
      const [callId, name] = [str(place, raw, "call_id")!, str(place, raw, "name")!];
      const args = str(place, raw, custom ? "input" : "arguments", false) ?? (custom ? "" : "{}");
      assistant().push({ type: "toolCall", callId, name, arguments: args, ...(custom ? { custom: true } : {}) });
    } else if (type === "function_call_output" || type === "custom_tool_call_output") {
      const callId = str(place, raw, "call_id")!;
      const content = typeof raw.output === "string" ? raw.output
        : openAiText(`${place}: output`, raw.output ?? "", "tool", "responses").map((p) => (p.type === "text" ? p.text : "")).join("\n");
      unthought();
      out.push({ role: "tool", parts: [{ type: "toolResult", callId, name: typeof raw.name === "string" ? raw.name : "", content, isError: false }] });
    } else if (type === "reasoning") {
      // Kept only with its encrypted content (store: false), less its id:
      // the API looks an id up in its store (`Item with id 'rs_…' not
      // found` when nothing was stored) and refuses a reference whose
      // following items are missing; without an id it takes the item back.
      // Without encrypted content there is nothing to send back.
      if (typeof raw.encrypted_content !== "string" || raw.encrypted_content === "") return;
      // The summary's texts alone, as the API takes them back.
      const summary = (Array.isArray(raw.summary) ? raw.summary : [])
        .filter((e): e is { text: string } => isObject(e) && typeof e.text === "string")
        .map((e) => ({ text: e.text, type: "summary_text" }));
      const data = { encrypted_content: raw.encrypted_content, summary, type: "reasoning" };
      if (!answer) out.push((answer = thought = { role: "assistant", parts: [] }));
      answer.parts.push({ type: "reasoning", format: "openaiResponses", data });
    } else {
      // Anything else is named, never half-stored.
      refuse(place, type === undefined ? "an item needs a type or a role"
        : `${JSON.stringify(type)} items are not imported: foldline stores messages, function and custom tool calls and their outputs`);
    }
  });
  unthought();
  return out;
}

/**
 * OpenAI Responses API items (a request's `input`, a response's `output`)
 * as journal events of `conversation`, numbered after `afterSeq`: each
 * message a turn, with the calls that follow an assistant message (as one
 * response's output holds them), each output a tool turn; a reasoning item
 * with its `encrypted_content` joins the assistant turn after it. Throws
 * `invalid_request` naming the item (and part) at fault; nothing is
 * half-converted.
 */
export function fromOpenAiResponses(items: readonly OpenAiResponsesInput[] | readonly unknown[], o: { conversation: string; afterSeq?: number }): Event[] {
  return number(responsesDrafts(items), o);
}

// ---- Anthropic ----

function anthropicDrafts(messages: readonly unknown[], system?: string | readonly unknown[]): Draft[] {
  // The request's system prompt (a string, or text blocks as prompt caching
  // writes it): a system message by the same rules, named `system`.
  const prompt = system === undefined || system.length === 0 ? [] : [["system", { role: "system", content: system }] as const];
  const out: Draft[] = [];
  [...prompt, ...messages.map((m, i) => [`item ${i + 1}`, m] as const)].forEach(([place, m]) => {
    if (!isObject(m) || (m.role !== "user" && m.role !== "assistant" && m.role !== "system")) refuse(place, 'a message is {"role": "user" | "assistant" | "system", "content"}');
    const role = m.role as "user" | "assistant" | "system";
    if (typeof m.content === "string") {
      out.push({ role, parts: [{ type: "text", text: m.content }] });
      return;
    }
    if (!Array.isArray(m.content)) refuse(place, "content must be a string or an array of blocks");
    const parts: Part[] = [];
    const results: Part[] = [];
    m.content.forEach((b: unknown, k) => {
      const at = `${place}: content[${k}]`;
      if (!isObject(b)) refuse(at, "a block is an object");
      if (typeof b.type !== "string") refuse(at, "a block's type must be a string");
      if (role === "system" && b.type !== "text") refuse(at, "a system message holds text blocks only");
      if (b.type === "text") parts.push({ type: "text", text: str(at, b, "text", false) ?? "" });
      else if (b.type === "tool_use") parts.push({ type: "toolCall", callId: str(at, b, "id") as string, name: str(at, b, "name") as string, arguments: inputText(b.input) });
      else if (b.type === "tool_result") {
        const content = typeof b.content === "string" ? b.content
          : Array.isArray(b.content) ? b.content.map((c: unknown) => (isObject(c) && c.type === "text" && typeof c.text === "string" ? c.text : `[file ${isObject(c) && typeof c.type === "string" ? c.type : "block"}]`)).join("\n")
          : b.content == null ? "" : refuse(at, "content must be a string or an array of blocks");
        results.push({ type: "toolResult", callId: str(at, b, "tool_use_id") as string, name: "", content, isError: b.is_error === true });
      } else if (b.type === "thinking" || b.type === "redacted_thinking") {
        const reasoning = anthropicReasoning(role, b);
        if (reasoning) parts.push(reasoning);
      } else if (b.type === "image" || b.type === "document") {
        const source = isObject(b.source) ? b.source : {};
        parts.push(fileMark(source.media_type ?? b.type, b.title));
      } else refuse(at, `unsupported block ${JSON.stringify(b.type)}`);
    });
    // Tool results answer the previous assistant turn: they come first, as
    // their own tool turn; the member's text follows.
    if (results.length) out.push({ role: "tool", parts: results });
    if (parts.length || !results.length) out.push({ role, parts });
  });
  return out;
}

/**
 * An assistant's thinking block as the reasoning part that goes back to
 * Anthropic with it (its fields alone, keys in the order the Rust host
 * writes them); a block without them, or in another role, is not stored.
 */
function anthropicReasoning(role: string, b: Record<string, unknown>): Part | undefined {
  if (role !== "assistant") return undefined;
  const data = b.type === "thinking"
    ? typeof b.signature === "string" && typeof b.thinking === "string" ? { signature: b.signature, thinking: b.thinking, type: b.type } : undefined
    : typeof b.data === "string" ? { data: b.data, type: b.type } : undefined;
  return data && { type: "reasoning", format: "anthropic", data };
}

/**
 * Anthropic messages (and the request's separate `system` prompt) as journal
 * events: text and `tool_use` blocks of a turn stay together; `tool_result`
 * blocks (with `is_error`) become a tool turn before the rest of their
 * message; a system message in the conversation (`role: "system"`, text
 * only) is a system turn.
 */
export function fromAnthropicMessages(messages: readonly AnthropicMessage[] | readonly unknown[], o: { conversation: string; afterSeq?: number; system?: string | readonly AnthropicTextBlock[] }): Event[] {
  return number(anthropicDrafts(messages, o.system), o);
}

// ---- AI SDK ----

/** An AI SDK tool-result `output` as content and error status (every line's output kinds). */
function aiSdkOutput(at: string, output: unknown): { content: string; isError: boolean } {
  if (!isObject(output) || typeof output.type !== "string") return refuse(at, 'output must be {"type", "value"}');
  const v = output.value;
  const json = (x: unknown) => (typeof x === "string" ? x : JSON.stringify(x ?? null));
  switch (output.type) {
    case "text": return { content: typeof v === "string" ? v : json(v), isError: false };
    case "json": return { content: json(v), isError: false };
    case "error-text": return { content: typeof v === "string" ? v : json(v), isError: true };
    case "error-json": return { content: json(v), isError: true };
    case "execution-denied":
      return { content: `execution denied${typeof output.reason === "string" && output.reason ? `: ${output.reason}` : ""}`, isError: true };
    case "content":
      if (!Array.isArray(v)) return refuse(at, "a content output's value is an array");
      return {
        content: v.map((c: unknown) => (isObject(c) && c.type === "text" && typeof c.text === "string" ? c.text : `[file ${isObject(c) && typeof c.mediaType === "string" ? c.mediaType : "media"}]`)).join("\n"),
        isError: false,
      };
    default: return refuse(at, `unsupported output ${JSON.stringify(output.type)}`);
  }
}

/** The AI SDK's OpenAI providers' `providerOptions` names (`@ai-sdk/openai`, `@ai-sdk/azure`). */
const OPENAI_OPTIONS = ["openai", "azure"];

/**
 * An assistant part's `providerOptions` as JavaScript writes them, kept for
 * the provider that wrote them (an Anthropic signature, Gemini's
 * `thoughtSignature`, OpenAI's encrypted reasoning), less an OpenAI item
 * id: `@ai-sdk/openai` sends a part with one as a reference to the stored
 * item, which the Responses API refuses without the items around it, whose
 * ids a journal does not keep. A provider's entry left empty is dropped;
 * `undefined` when none is left (or they are not an object).
 */
function providerOptions(p: Record<string, unknown>): Record<string, unknown> | undefined {
  if (!isObject(p.providerOptions)) return undefined;
  const options = JSON.parse(JSON.stringify(p.providerOptions)) as Record<string, unknown>;
  for (const name of OPENAI_OPTIONS) {
    const entry = options[name];
    if (!isObject(entry)) continue;
    delete entry.itemId;
    if (Object.keys(entry).length === 0) delete options[name];
  }
  return Object.keys(options).length ? options : undefined;
}

function aiSdkPart(at: string, role: Role, p: Record<string, unknown>): Part | undefined {
  if (typeof p.type !== "string") refuse(at, "a part's type must be a string");
  switch (p.type) {
    case "text": return { type: "text", text: str(at, p, "text", false) ?? "" };
    case "reasoning": {
      // Kept for the provider that wrote it (a signature or encrypted
      // reasoning in `providerOptions`); a file of reasoning, or reasoning
      // outside an assistant's message, is not stored.
      if (role !== "assistant" || typeof p.text !== "string") return undefined;
      const options = providerOptions(p);
      const data = options ? { providerOptions: options, text: p.text, type: "reasoning" } : { text: p.text, type: "reasoning" };
      return { type: "reasoning", format: "aiSdk", data };
    }
    case "reasoning-file": return undefined;
    case "image": return fileMark(p.mediaType ?? "image", undefined);
    case "file": return fileMark(p.mediaType, p.filename);
    case "tool-call": {
      if (role !== "assistant") refuse(at, "only an assistant message carries tool calls");
      const options = providerOptions(p);
      return { type: "toolCall", callId: str(at, p, "toolCallId") as string, name: str(at, p, "toolName") as string, arguments: inputText(p.input), ...(options ? { providerOptions: options } : {}) };
    }
    case "tool-result": {
      const { content, isError } = aiSdkOutput(at, p.output);
      return { type: "toolResult", callId: str(at, p, "toolCallId") as string, name: str(at, p, "toolName", false) ?? "", content, isError };
    }
    case "tool-approval-request":
      if (role !== "assistant") refuse(at, "only an assistant message asks for an approval");
      return { type: "approvalRequest", approvalId: str(at, p, "approvalId") as string, callId: str(at, p, "toolCallId") as string };
    case "tool-approval-response": {
      if (role !== "tool") refuse(at, "an approval's answer is part of a tool message");
      if (typeof p.approved !== "boolean") refuse(at, "approved must be true or false");
      const reason = str(at, p, "reason", false);
      return { type: "approvalResponse", approvalId: str(at, p, "approvalId") as string, approved: p.approved, ...(reason ? { reason } : {}) };
    }
    default: return refuse(at, `unsupported part ${JSON.stringify(p.type)}`);
  }
}

function aiSdkDrafts(messages: readonly unknown[]): Draft[] {
  return messages.map((m, i) => {
    const place = `item ${i + 1}`;
    if (!isObject(m) || typeof m.role !== "string") refuse(place, "a message needs a role");
    if (!["system", "user", "assistant", "tool"].includes(m.role)) refuse(place, `unknown role ${JSON.stringify(m.role)}`);
    const role = m.role as Role;
    if (typeof m.content === "string") {
      if (role === "tool") refuse(place, "a tool message's content is an array of tool results");
      return { role, parts: [{ type: "text", text: m.content }] };
    }
    if (role === "system" || !Array.isArray(m.content)) return refuse(place, role === "system" ? "a system message's content is a string" : "content must be a string or an array of parts");
    const parts: Part[] = [];
    m.content.forEach((p: unknown, k) => {
      const at = `${place}: content[${k}]`;
      if (!isObject(p)) refuse(at, "a part is an object");
      const part = aiSdkPart(at, role, p);
      if (part) parts.push(part);
    });
    return { role, parts };
  });
}

/**
 * AI SDK `ModelMessage`s (ai 5, 6 and 7 — a `generateText`/`streamText`
 * result's messages as they are: `response.messages` in ai 6,
 * `responseMessages` in ai 7, whose `response.messages` is the last step's
 * alone) as journal events: tool calls with
 * object or JSON-text input, tool results with their error status
 * (`error-text`, `error-json`, `execution-denied`), approval requests and
 * their answers, each kept as its kind.
 */
export function fromAiSdkMessages(messages: readonly AiSdkMessage[] | readonly unknown[], o: { conversation: string; afterSeq?: number }): Event[] {
  return number(aiSdkDrafts(messages), o);
}

/** The formats `append` takes, as events. */
export function eventsOf(
  format: "openai" | "openai-responses" | "anthropic" | "ai-sdk",
  messages: readonly unknown[],
  o: { conversation: string; afterSeq?: number; system?: string | readonly AnthropicTextBlock[] },
): Event[] {
  return format === "anthropic" ? fromAnthropicMessages(messages, o)
    : format === "ai-sdk" ? fromAiSdkMessages(messages, o)
    : format === "openai-responses" ? fromOpenAiResponses(messages, o)
    : fromOpenAiMessages(messages, o);
}

/**
 * A rendered AI SDK context as the arguments `generateText`/`streamText`
 * take on every line: the pinned system text as `system` (ai 5 and 6) and as
 * `instructions` (ai 7, which refuses system messages inside `messages`),
 * the turns as `messages`. Spread it: `streamText({ model, ...aiSdkPrompt(m) })`.
 * Without system text neither is set: the SDK would send `""` as a system
 * message, which Anthropic refuses ("system: text content blocks must be
 * non-empty").
 */
export function aiSdkPrompt(messages: readonly AiSdkRendered[]): {
  system?: string;
  instructions?: string;
  messages: Array<Exclude<AiSdkRendered, { role: "system" }>>;
} {
  const system: string[] = [];
  const rest: Array<Exclude<AiSdkRendered, { role: "system" }>> = [];
  for (const m of messages) {
    if (m.role === "system") system.push(m.content);
    else rest.push(m);
  }
  const text = system.join("\n\n");
  return text.trim() === "" ? { messages: rest } : { system: text, instructions: text, messages: rest };
}
