// The OpenAI Responses API (`POST /v1/responses`) as a summarizer: for the
// models OpenAI serves only there, and any server that speaks it.

import { REASONING_ROOM_TOKENS } from "../defaults.js";
import type { Packet, Usage } from "../types.js";
import { cutShort, dataLines, httpError, ok, post, summaryTokens } from "./http.js";
import { ModelError, type Model, type ModelResult, type StreamChunk } from "./model.js";
import type { OpenAiOptions } from "./openai.js";

/** A response as far as a summary needs it. */
interface Answer {
  model?: string;
  status?: string;
  output?: Array<{ type?: string; content?: Array<{ type?: string; text?: string }> }>;
  usage?: { input_tokens?: number; output_tokens?: number; output_tokens_details?: { reasoning_tokens?: number } | null } | null;
  incomplete_details?: { reason?: string } | null;
  error?: { message?: string } | null;
}

/** A streamed event as far as a summary needs it. */
interface Streamed { type?: string; delta?: string; response?: Answer; message?: string }

/** The finish reason a chat completion would give: `stop`, `length` when the cap ended it, `content_filter` when a filter did; a finish that cut it short otherwise is thrown (`cutShort`). */
function finishOf(r: Answer): string {
  const reason = r.incomplete_details?.reason;
  const finish = r.status === "completed" ? "stop"
    : reason === "max_output_tokens" ? "length"
    : reason === "content_filter" ? "content_filter"
    : (r.status ?? "");
  const cut = cutShort(finish);
  if (cut) throw cut;
  return finish;
}

function usageOf(r: Answer): Usage {
  return { inputTokens: r.usage?.input_tokens ?? 0, outputTokens: summaryTokens(r.usage?.output_tokens, r.usage?.output_tokens_details?.reasoning_tokens) };
}

/**
 * Summaries through the OpenAI Responses API, streamed as server-sent
 * events (`response.output_text.delta`, then `response.completed`). The
 * packet's messages go as `input`, nothing is stored at the provider
 * (`store: false`), and the cap goes as `max_output_tokens`, which holds a
 * reasoning model's reasoning too: by default {@link REASONING_ROOM_TOKENS}
 * more than the summary's limit (`maxTokens` sets it).
 */
export class OpenAiResponsesModel implements Model {
  constructor(private readonly o: OpenAiOptions) {}

  private request(packet: Packet, stream: boolean, signal?: AbortSignal): Promise<Response> {
    const cap = this.o.maxTokens ?? packet.bounds.maxTokens + REASONING_ROOM_TOKENS;
    return post(this.o, "/responses", { model: this.o.model, input: packet.messages, max_output_tokens: cap, store: false, stream }, signal);
  }

  async complete(packet: Packet, signal?: AbortSignal): Promise<ModelResult> {
    const res = await this.request(packet, false, signal);
    if (!res.ok) throw httpError(res.status, (await res.text()).slice(0, 500));
    const r = (await res.json()) as Answer;
    if (r.status === "failed") throw new ModelError("other", `the response failed: ${r.error?.message ?? ""}`);
    const text = (r.output ?? []).filter((o) => o.type === "message")
      .flatMap((o) => o.content ?? []).filter((c) => c.type === "output_text").map((c) => c.text ?? "").join("");
    return { text, modelId: r.model ?? this.o.model, usage: usageOf(r), finishReason: finishOf(r) };
  }

  async *stream(packet: Packet, signal?: AbortSignal): AsyncIterable<StreamChunk> {
    for await (const data of dataLines(await ok(await this.request(packet, true, signal)))) {
      const e = JSON.parse(data) as Streamed;
      if (e.type === "response.output_text.delta" && e.delta) yield { type: "delta", text: e.delta };
      else if ((e.type === "response.completed" || e.type === "response.incomplete") && e.response) {
        yield { type: "done", modelId: e.response.model ?? this.o.model, usage: usageOf(e.response), finishReason: finishOf(e.response) };
        return;
      } else if (e.type === "response.failed" || e.type === "error") {
        throw new ModelError("other", `the response failed: ${e.response?.error?.message ?? e.message ?? ""}`);
      }
    }
    throw new Error("the stream ended without response.completed");
  }
}
