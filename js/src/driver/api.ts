// What a caller of the driver sees: the compactor, its options and what its
// calls answer. js/src/driver.ts builds it; the modules beside this one carry
// out each job.

import type { Code, Declaration, Event, MessagesOf, Format, Part, PlanOutcome, Resolution, Route, Selection, Timeline, TimelinePage, FailureReport, Boundary, MemberInput, Availability } from "../types.js";
import type { Journal } from "../journal/journal.js";
import type { AiSdkMessage, AnthropicMessage, AnthropicTextBlock, OpenAiChatMessage, OpenAiResponsesInput } from "../convert.js";
import type { Model } from "../model/model.js";

export interface CompactorOptions {
  journal: Journal;
  model: Model;
  declaration: Declaration;
  /** The compactor declaration, checked for agreement on every resolve (default: the target's, under the compactor role). */
  compactorDeclaration?: Declaration;
  /** Route of a conversation (default: `{ conversation: id }`). */
  route?: (conversationId: string) => Route;
  /** Owner of a conversation, for manual requests. */
  owner?: (conversationId: string) => string | undefined;
  /** Writer-lease holder id (renewed while work runs). */
  holder?: string;
  /** The writer lease's time to live, in milliseconds (default 120,000, as the Rust driver's: `LEASE_MS`). */
  leaseMs?: number;
  /**
   * The most text of conversations' events kept between timeline drawings,
   * all conversations together, in UTF-16 units (default 16 Mi:
   * `TIMELINE_TEXT_CHARS`, smaller than the Rust driver's 64 MiB for browser
   * tabs and edge isolates): a drawing after a write reads and
   * encodes only what is new; the least recently drawn are let go first;
   * a conversation larger than it keeps where each event is and its latest
   * messages' text (half of it), and reads the others again when a page
   * reaches them; 0 keeps none (every drawing reads its conversation whole).
   */
  timelineTextChars?: number;
  /**
   * The items of each core call when a whole timeline is drawn (default
   * 5,000: `TIMELINE_PAGE_ITEMS`, as the Rust driver's): it is drawn in
   * pages from the latest back, so no call takes a whole long conversation.
   */
  timelinePageItems?: number;
  /**
   * The most conversations the compactor keeps state for — the verified
   * chain, the live events, a prepared warm candidate (default 256:
   * `CONVERSATIONS_KEPT_JS`): past it the least recently used that no call is
   * using is let go and read from the journal again at its next call, so
   * memory stays bounded however many conversations it serves.
   */
  conversationsKept?: number;
  /** Deadline of one model call (default 120,000 ms); a hanging model cannot hold the lease forever. */
  modelTimeoutMs?: number;
  /** Receives the audit reason of each failure (never member-facing). */
  audit?: (conversationId: string, report: FailureReport) => void;
  /**
   * Warm candidates (seed 002, default on): between the soft and eager
   * thresholds a candidate packet is persisted and summarized off the
   * critical path, under its own lease; when compaction is due and the core
   * finds the candidate still valid, its verified summary is used, so the
   * message that needs compaction does not pay for the model call.
   */
  warmCandidates?: boolean;
  /** Lease of a warm candidate's preparation (default 900,000 ms). */
  warmLeaseMs?: number;
  /**
   * Count a text's tokens (js-tiktoken, gpt-tokenizer, a provider's counter),
   * synchronously, as a whole number: `append` and `correct` record each
   * turn's count, so token budgets use real counts instead of the
   * four-characters-a-token estimate, and `context` counts the summary in
   * force, the amendment and the prompt too, selecting a context they would
   * put over its limit within the limit less their excess.
   */
  countTokens?: (text: string) => number;
  /**
   * Tokens of framing each message costs beside its content (role, message
   * separators) when `countTokens` counts: added to every counted turn
   * (default {@link MESSAGE_OVERHEAD_TOKENS}, the core's own estimate's
   * overhead; OpenAI's chat framing is 3 per message). Set it to your
   * provider's framing.
   */
  messageOverheadTokens?: number;
  /**
   * The deployment's member-compression availability (default: none), as
   * its contexts are asked with it (`context(id, { member })`): every plan
   * keeps room for the largest fragments a member's context carries (the
   * settings projection, plain-speak), so no member's context leaves out a
   * turn no summary covers to make room for them. `createHandler` passes its
   * own `compression`.
   */
  compression?: Availability;
}

/** Per-message framing added to host token counts by default: 4, as the core's estimate adds (generated from the core). */
export { MESSAGE_OVERHEAD_TOKENS } from "../defaults.js";

/**
 * Messages `append` takes: OpenAI chat (default), OpenAI Responses items,
 * Anthropic, or AI SDK `ModelMessage`s. An Anthropic request's `system`
 * becomes a system turn before the messages. A batch's prompt (that system
 * turn, or a leading system or developer message in any format) is written
 * once: appended again with each turn, a prompt the conversation already
 * holds as a turn of its role is not written again (a changed one is).
 */
export type AppendMessages =
  | { format?: "openai"; messages: OpenAiChatMessage | readonly OpenAiChatMessage[] }
  | { format: "anthropic"; messages: AnthropicMessage | readonly AnthropicMessage[]; system?: string | readonly AnthropicTextBlock[] }
  | { format: "ai-sdk"; messages: AiSdkMessage | readonly AiSdkMessage[] }
  | { format: "openai-responses"; messages: OpenAiResponsesInput | readonly OpenAiResponsesInput[] };

/** A context whose messages were rendered (`render` not `false`). */
export type RenderedSelection<M> = Selection<M> & { messages: M };

export type OnMessageResult =
  | { status: "busy" }
  | { status: "skipped" | "paused" | "warm"; outcome: PlanOutcome }
  | { status: "compacted"; boundary: Boundary }
  | { status: "refused"; code: Code; message: string }
  | { status: "failed"; notice: string };

/** A manual compaction task with a caller-chosen id (a server hands the id out before the work ends). */
export interface ManualTask {
  /** Unique within the conversation. */
  id: string;
  /** Who asked. */
  actor: string;
  /** The conversation's owner (only the owner may compact by hand); default the compactor's `owner` option. */
  owner?: string;
  /** Whether an answer owns the session now. */
  sessionBusy?: boolean;
  /** Called with the journal position of the task's durable `requested` event, once written. */
  onAccepted?: (seq: number) => void;
}

/** Options of `context`. */
export interface ContextOptions {
  /** The messages' shape: `foldline` (default), `openai`, `openai-responses` (or `openaiResponses`), `anthropic`, `ai-sdk` (or `aiSdk`). */
  format?: Format;
  /** The member's current prompt, rendered last and reserved first. */
  prompt?: Part[];
  /**
   * Who wrote `prompt`, in a shared room (the member id `append` takes as
   * `sender`): the prompt is sent with the member's label, as a stored turn
   * of theirs would be, once the user turns in view and the prompt come from
   * more than one member.
   */
  promptSender?: string;
  /** A smaller budget than the declaration's for this context, in its unit (characters or tokens). */
  limit?: number;
  /** `false`: the manifest only, no messages rendered (what would be sent, cheaply). */
  render?: boolean;
  /**
   * The member's compression state, captured once when this run started
   * (availability and the member's opt-ins): the model-bound copy is shaped
   * (prompt trim, `run_code` result compression, the plain-speak fragment),
   * the settings projection follows the pinned turns, `manifest.member` has
   * one measurement per pass, and a settings question gets `answer`. The
   * journal is never touched.
   */
  member?: MemberInput;
}

/** Options of `append`. */
export interface AppendMessagesOptions {
  /**
   * An idempotency key (1 to 128 of `A-Z a-z 0-9 . _ : -`), written with the
   * batch in the same atomic append (each message's turn id ends `@<key>`):
   * a retry with the same key and messages writes nothing again and answers
   * as the first time (`replayed`); with other messages it is
   * `idempotency_key_reused`. Recognized for the latest 4,096 keyed appends
   * of a conversation, also across compactors and restarts (it is read back
   * from the journal). A key is its sender's (`sender`, else each message's
   * own): two members of a room may use the same key, each for their own
   * messages.
   */
  idempotencyKey?: string;
  /** Who sent the messages (a room's member; written as each message's `sender`). */
  sender?: string;
}

/** Options of `correct`. */
export interface CorrectOptions {
  /** Correct only a turn this sender sent (a server's member editing their own message): another's is `not_author`, nothing written. */
  sender?: string;
}

/** What `correct` wrote: the journal position and the correction's number among the turn's. */
export interface Corrected {
  seq: number;
  correctionSeq: number;
}

/** What `append` did. */
export interface Appended {
  /** Journal position of the batch's last event. */
  seq: number;
  /** The events written (none when `replayed`). */
  events: Event[];
  /** Messages the append holds (the first append's count when `replayed`). */
  count: number;
  /** A retry under an idempotency key already written: nothing new was written. */
  replayed: boolean;
}


export interface Compactor {
  /**
   * Append messages to the journal as the conversation's next turns
   * (numbered after its last one; checked, nothing written on bad input —
   * `turn_too_large`, and `pinned_too_large` for system or developer
   * messages that would leave the conversation's pinned turns no context room;
   * compare-and-append, so concurrent appends never collide). OpenAI chat
   * messages directly, or `{ format: "openai-responses" | "anthropic" | "ai-sdk", messages }`.
   * Returns the journal position and the events written.
   */
  append(conversationId: string, messages: OpenAiChatMessage | readonly OpenAiChatMessage[] | AppendMessages, options?: AppendMessagesOptions): Promise<Appended>;
  /**
   * Check messages as `append` would, without reading or writing anything:
   * they convert, and each is one a compaction could take under the
   * declaration (else `turn_too_large`, naming it), the last, unless the
   * assistant's, one a context holds whole as its newest beside the
   * batch's pinned turns and the least summary (else `turn_too_large`),
   * and the batch's own pinned turns leave a context room (else
   * `pinned_too_large`; `append` also counts the conversation's pinned
   * turns, read from the journal). Throws the typed error.
   */
  check(conversationId: string, messages: OpenAiChatMessage | readonly OpenAiChatMessage[] | AppendMessages): void;
  /**
   * Correct what turn `turnId` says (an edited message, a late fix from the
   * source): a `correction` of its text (or parts), numbered after the
   * turn's latest, checked before anything is written — the turn it makes
   * must be one a compaction could take (`turn_too_large`) and leave the
   * pinned turns a context room (`pinned_too_large`); a covered turn's
   * correction must keep the covered-history amendment within
   * `amendmentMaxChars` (`amendment_too_large`); a turn the conversation
   * does not hold is `invalid_request` — then written with a
   * compare-and-append. The original's tool calls and results stay. A
   * covered turn's correction reaches the context as the amendment until a
   * compaction absorbs it. Write corrections here, not with the journal's
   * `append`, which checks only their shape. With `sender`, only a turn
   * that sender sent (`not_author` otherwise; a covered turn the driver
   * let go is read from the journal to tell).
   */
  correct(conversationId: string, turnId: string, content: string | readonly Part[], options?: CorrectOptions): Promise<Corrected>;
  /** On a new message: compact if the budget says so. Overlapping calls for one conversation run one after another. */
  onMessage(conversationId: string): Promise<OnMessageResult>;
  /** A member's `/compact`. */
  compactNow(conversationId: string, actor: string, sessionBusy?: boolean): Promise<OnMessageResult>;
  /**
   * A manual task: as `compactNow`, with the task's id chosen by the caller
   * and `onAccepted` called once its `requested` event is durable. A refusal
   * (`not_owner`, `session_busy`, `nothing_to_fold`) writes nothing.
   */
  compactTask(conversationId: string, task: ManualTask): Promise<OnMessageResult>;
  /**
   * End the manual tasks whose run was interrupted (a crash between
   * `requested` and its end) with a durable `failed` event, under the writer
   * lease. `false`: another writer holds the conversation (its task may be running).
   */
  endInterrupted(conversationId: string): Promise<boolean>;
  /** The model-bound context. */
  context<F extends Format = "foldline">(conversationId: string, options?: ContextOptions & { format?: F; render?: true }): Promise<RenderedSelection<MessagesOf[F]>>;
  /** The manifest only when `render` is `false`. */
  context<F extends Format = "foldline">(conversationId: string, options: ContextOptions & { format?: F; render: boolean }): Promise<Selection<MessagesOf[F]>>;
  /**
   * `onMessage`, then `context`, from the check's read of the journal: the
   * context is the journal as the check read it in this call, so it holds
   * every message appended before the call and what the check wrote itself
   * (the driver reads each of its writes back). When another writer held
   * the conversation (`busy`) the context reads again. On a journal a round
   * trip away, a message costs one read fewer.
   */
  onMessageAndContext<F extends Format = "foldline">(conversationId: string, options?: ContextOptions & { format?: F; render?: true }): Promise<{ outcome: OnMessageResult; context: RenderedSelection<MessagesOf[F]> }>;
  /** The manifest only when `render` is `false`. */
  onMessageAndContext<F extends Format = "foldline">(conversationId: string, options: ContextOptions & { format?: F; render: boolean }): Promise<{ outcome: OnMessageResult; context: Selection<MessagesOf[F]> }>;
  /**
   * The chat timeline, or one page of it (`{ limit, before }`: the latest
   * `limit` items below position `before`; walk back with the answer's
   * `earlier`); only boundaries the resolved chain accepts draw as completed.
   */
  timeline(conversationId: string, page?: TimelinePage): Promise<Timeline>;
  /**
   * The journal position a timeline drawn now starts from (what is new is
   * read first): the same position draws the same timeline, so a server
   * answers `304` to a client whose timeline was drawn there.
   */
  position(conversationId: string): Promise<number>;
  /** Conversations this compactor keeps state for now (at most its `conversationsKept`). */
  remembered(): number;
  /** The resolved chain. */
  resolve(conversationId: string): Promise<Resolution>;
}
