import { REASONING_ROOM_TOKENS } from "../defaults.js";
import { cutShort, dataLines, httpError, ok, post, summaryTokens } from "./http.js";
import type { Packet, Usage } from "../types.js";
import type { Model, ModelResult, StreamChunk } from "./model.js";

/** Options of the OpenAI-compatible adapter (OpenAI, Ollama, vLLM, llama.cpp, ...). */
export interface OpenAiOptions {
  /** Base URL up to `/v1`, e.g. `https://api.openai.com/v1` or `http://127.0.0.1:11434/v1`. */
  baseUrl: string;
  /** Model name. */
  model: string;
  /** Bearer key, if the endpoint needs one. */
  apiKey?: string;
  /**
   * Output token cap (default: the packet's summary limit). Sent as
   * `max_tokens`, which every OpenAI-compatible server takes, until the
   * endpoint refuses it for `max_completion_tokens` (OpenAI's reasoning
   * models); from then on as that, by default {@link REASONING_ROOM_TOKENS}
   * more than the summary's limit, since a reasoning model counts its
   * reasoning within it.
   */
  maxTokens?: number;
  /** A fetch implementation (default: the global one). */
  fetch?: typeof fetch;
}

interface Completion {
  model?: string;
  choices?: { message?: { content?: string | null }; delta?: { content?: string | null }; finish_reason?: string | null }[];
  usage?: { prompt_tokens?: number; completion_tokens?: number; completion_tokens_details?: { reasoning_tokens?: number } | null } | null;
}

function usageOf(u: Completion["usage"]): Usage {
  return { inputTokens: u?.prompt_tokens ?? 0, outputTokens: summaryTokens(u?.completion_tokens, u?.completion_tokens_details?.reasoning_tokens) };
}

/** Whether a `400` answer refuses `max_tokens` for `max_completion_tokens` (as the Rust adapter reads it). */
function refusesMaxTokens(text: string): boolean {
  try {
    const e = (JSON.parse(text) as { error?: { param?: unknown; message?: unknown } }).error;
    return e?.param === "max_tokens" || (typeof e?.message === "string" && e.message.includes("max_completion_tokens"));
  } catch {
    return false;
  }
}

/** Chat-completions over `fetch`, with server-sent-event streaming. */
export class OpenAiCompatibleModel implements Model {
  /** The endpoint asked for `max_completion_tokens` (a reasoning model). */
  private completionTokens = false;

  constructor(private readonly o: OpenAiOptions) {}

  private async request(packet: Packet, stream: boolean, signal?: AbortSignal): Promise<Response> {
    for (;;) {
      const completion = this.completionTokens;
      const body: Record<string, unknown> = { model: this.o.model, messages: packet.messages, stream };
      if (completion) body.max_completion_tokens = this.o.maxTokens ?? packet.bounds.maxTokens + REASONING_ROOM_TOKENS;
      else body.max_tokens = this.o.maxTokens ?? packet.bounds.maxTokens;
      if (stream) body.stream_options = { include_usage: true };
      const res = await post(this.o, "/chat/completions", body, signal);
      if (res.status !== 400 || completion) return res;
      const text = await res.text();
      if (!refusesMaxTokens(text)) return new Response(text, { status: 400 });
      this.completionTokens = true;
    }
  }

  async complete(packet: Packet, signal?: AbortSignal): Promise<ModelResult> {
    const res = await this.request(packet, false, signal);
    if (!res.ok) throw httpError(res.status, (await res.text()).slice(0, 500));
    const c = (await res.json()) as Completion;
    const choice = c.choices?.[0];
    const cut = cutShort(choice?.finish_reason ?? "");
    if (cut) throw cut;
    return {
      text: choice?.message?.content ?? "",
      modelId: c.model ?? this.o.model,
      usage: usageOf(c.usage),
      finishReason: choice?.finish_reason ?? "",
    };
  }

  async *stream(packet: Packet, signal?: AbortSignal): AsyncIterable<StreamChunk> {
    let model = this.o.model;
    let usage: Usage = { inputTokens: 0, outputTokens: 0 };
    let finish = "";
    for await (const data of dataLines(await ok(await this.request(packet, true, signal)))) {
      if (data === "[DONE]") {
        const cut = cutShort(finish);
        if (cut) throw cut;
        yield { type: "done", modelId: model, usage, finishReason: finish };
        return;
      }
      const c = JSON.parse(data) as Completion;
      if (c.model) model = c.model;
      if (c.usage) usage = usageOf(c.usage);
      const choice = c.choices?.[0];
      if (choice?.finish_reason) finish = choice.finish_reason;
      const text = choice?.delta?.content;
      if (text) yield { type: "delta", text };
    }
    throw new Error("the stream ended without [DONE]");
  }
}
