import { ModelError } from "./model.js";
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
  /** Output token cap sent as `max_tokens` (default: the packet's summary limit). */
  maxTokens?: number;
  /** A fetch implementation (default: the global one). */
  fetch?: typeof fetch;
}

interface Completion {
  model?: string;
  choices?: { message?: { content?: string | null }; delta?: { content?: string | null }; finish_reason?: string | null }[];
  usage?: { prompt_tokens?: number; completion_tokens?: number } | null;
}

function usageOf(u: Completion["usage"]): Usage {
  return { inputTokens: u?.prompt_tokens ?? 0, outputTokens: u?.completion_tokens ?? 0 };
}

/** Chat-completions over `fetch`, with server-sent-event streaming. */
export class OpenAiCompatibleModel implements Model {
  constructor(private readonly o: OpenAiOptions) {}

  private request(packet: Packet, stream: boolean, signal?: AbortSignal): Promise<Response> {
    const f = this.o.fetch ?? fetch;
    const headers: Record<string, string> = { "content-type": "application/json" };
    if (this.o.apiKey) headers.authorization = `Bearer ${this.o.apiKey}`;
    const body: Record<string, unknown> = {
      model: this.o.model,
      messages: packet.messages,
      max_tokens: this.o.maxTokens ?? packet.bounds.maxTokens,
      stream,
    };
    if (stream) body.stream_options = { include_usage: true };
    return f(`${this.o.baseUrl.replace(/\/$/, "")}/chat/completions`, {
      method: "POST",
      headers,
      body: JSON.stringify(body),
      signal,
    });
  }

  async complete(packet: Packet, signal?: AbortSignal): Promise<ModelResult> {
    const res = await this.request(packet, false, signal);
    if (!res.ok) throw httpError(res.status, (await res.text()).slice(0, 500));
    const c = (await res.json()) as Completion;
    const choice = c.choices?.[0];
    return {
      text: choice?.message?.content ?? "",
      modelId: c.model ?? this.o.model,
      usage: usageOf(c.usage),
      finishReason: choice?.finish_reason ?? "",
    };
  }

  async *stream(packet: Packet, signal?: AbortSignal): AsyncIterable<StreamChunk> {
    const res = await this.request(packet, true, signal);
    if (!res.ok || !res.body) throw httpError(res.status, res.ok ? "no body" : (await res.text()).slice(0, 500));
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = "";
    let model = this.o.model;
    let usage: Usage = { inputTokens: 0, outputTokens: 0 };
    let finish = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += value;
      let nl: number;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl).trim();
        buf = buf.slice(nl + 1);
        if (!line.startsWith("data:")) continue;
        const data = line.slice(5).trim();
        if (data === "[DONE]") {
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
    }
    throw new Error("the stream ended without [DONE]");
  }
}

/** A provider's HTTP failure, typed: 402/429 are budget stops, other 4xx refusals, 408/504 timeouts. */
function httpError(status: number, body: string): ModelError {
  const kind = status === 402 || status === 429 ? "budgetStop" : status === 408 || status === 504 ? "timeout" : status >= 400 && status < 500 ? "providerRefusal" : "other";
  return new ModelError(kind, `provider answered HTTP ${status}: ${body}`);
}
