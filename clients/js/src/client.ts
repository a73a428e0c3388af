/**
 * AgentClient: the headless client of one agent on an agentkeel server.
 *
 * It holds nothing but the opaque `contextId` (the client owns the wire; the server
 * owns the memory). Every turn carries a fresh `Idempotency-Key`, reused when the
 * request is retried, so a retry never runs a turn twice. A stream that drops before
 * its `done` frame is resumed with `GET /agents/{name}/contexts/{id}/stream` and
 * `Last-Event-ID`, and frames are de-duplicated by their per-run id, so no frame is
 * lost or repeated.
 */

import { AgentError } from "./errors.js";
import {
  type HeadersOption,
  describe,
  errorFrom,
  jsonHeaders,
  newIdempotencyKey,
  readJSON,
  requireContext,
  resolveHeaders,
  searchOf,
  sleep,
} from "./http.js";
import { type MemoryPage, type MemoryQuery, memorySearch, parseMemoryPage } from "./memory.js";
import { decodeSSE } from "./sse.js";
import {
  type AgentInfo,
  type CancelResult,
  type ContextPage,
  type ContextSummary,
  type ForkResult,
  type MessagePage,
  type SendResult,
  type StreamFrame,
  type TranscriptMessage,
  isDoneFrame,
  parseAgentList,
  parseCancelResult,
  parseContextPage,
  parseContextSummary,
  parseForkResult,
  parseMessagePage,
  parseSendResult,
  parseStreamFrame,
} from "./types.js";

import type {
  AgentClientOptions,
  CallOptions,
  Decision,
  ForkOptions,
  ListContextsOptions,
  MessageInput,
  MessagesOptions,
  MultitaskPolicy,
  TurnOptions,
} from "./options.js";

export { newIdempotencyKey } from "./http.js";

export type * from "./options.js";
export type { HeadersOption } from "./http.js";

interface TurnFields {
  message?: MessageInput;
  replace?: string;
  regenerate?: string;
  multitask?: MultitaskPolicy;
}

type Body = TurnFields | { resume: { interruptId: string; decision: Decision } };

const RETRYABLE_STATUS = new Set([502, 503, 504]);
const MAX_DELAY_MS = 5000;

/** The client of one agent; one instance follows one conversation at a time. */
export class AgentClient {
  readonly url: string;
  readonly agent: string;
  #contextId: string | undefined;
  readonly #headers: HeadersOption | undefined;
  readonly #fetch: typeof fetch;
  readonly #onContext: ((contextId: string | undefined) => void) | undefined;
  readonly #attempts: number;
  readonly #delayMs: number;

  constructor(options: AgentClientOptions) {
    this.url = options.url.replace(/\/+$/, "");
    this.agent = options.agent;
    this.#contextId = options.contextId;
    this.#headers = options.headers;
    this.#fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.#onContext = options.onContext;
    this.#attempts = options.retry?.attempts ?? 5;
    this.#delayMs = options.retry?.delayMs ?? 250;
  }

  /** The conversation's id: given, or captured from the server's first frame. */
  get contextId(): string | undefined {
    return this.#contextId;
  }

  /**
   * Run one turn and stream its frames: events, then one `done` frame.
   *
   * The iterator ends after the `done` frame. It throws an AgentError when the server
   * refuses the turn or the stream cannot be resumed, and the abort reason when
   * `signal` aborts.
   */
  stream(message: MessageInput | undefined, options: TurnOptions = {}): AsyncGenerator<StreamFrame, void, undefined> {
    return this.#stream(this.#turnBody(message, options), options.signal);
  }

  /**
   * Run one turn and resolve with its SendResult (`POST /agents/{name}/send`).
   *
   * With `replace` it edits a user message; with `regenerate` (and no message) it answers
   * an assistant message again. Both need the conversation's id, and the server answers
   * `404 message_not_found` (a MessageNotFoundError) for an id it does not hold.
   */
  async send(message: MessageInput | undefined, options: TurnOptions = {}): Promise<SendResult> {
    return this.#send(this.#turnBody(message, options), options.signal);
  }

  /** Answer the pending interrupt `interruptId` and resolve when the run ends or suspends again. */
  async resume(interruptId: string, decision: Decision, options: CallOptions = {}): Promise<SendResult> {
    return this.#send({ resume: { interruptId, decision } }, options.signal);
  }

  /** Answer the pending interrupt `interruptId` and stream the rest of the run. */
  resumeStream(
    interruptId: string,
    decision: Decision,
    options: CallOptions = {},
  ): AsyncGenerator<StreamFrame, void, undefined> {
    return this.#stream({ resume: { interruptId, decision } }, options.signal);
  }

  /**
   * Forget the conversation on the server (its history, runs and checkpoints), then
   * drop the id locally. A context the server does not know counts as forgotten.
   */
  async deleteContext(options: CallOptions = {}): Promise<void> {
    const contextId = this.#contextId;
    if (contextId === undefined) return;
    const response = await this.#request("DELETE", this.#contextPath(contextId), {}, options.signal);
    if (!response.ok && response.status !== 404) throw await errorFrom(response);
    await response.body?.cancel();
    this.reset();
  }

  /**
   * What the agent remembers of this caller across conversations, newest first, or the
   * best matches for `q` (`GET /agents/{name}/memory`). Only the caller's own items.
   */
  async memory(query: MemoryQuery = {}): Promise<MemoryPage> {
    const url = `${this.#agentPath()}/memory${memorySearch(query)}`;
    const response = await this.#request("GET", url, { Accept: "application/json" }, query.signal);
    if (!response.ok) throw await errorFrom(response);
    return parseMemoryPage(await readJSON(response));
  }

  /**
   * Forget one remembered item by `key` (resolves 1), or everything the agent remembers
   * of this caller when `key` is undefined (resolves how many went). An unknown key
   * rejects with the AgentError `memory_not_found`.
   */
  async forgetMemory(key?: string, options: CallOptions = {}): Promise<number> {
    const path = key === undefined ? "" : `/${encodeURIComponent(key)}`;
    const response = await this.#request("DELETE", `${this.#agentPath()}/memory${path}`, {}, options.signal);
    if (!response.ok) throw await errorFrom(response);
    if (key !== undefined) {
      await response.body?.cancel();
      return 1;
    }
    const body = await readJSON(response);
    return typeof body === "object" && body !== null && "deleted" in body && typeof body.deleted === "number"
      ? body.deleted
      : 0;
  }

  /**
   * Drop the context id locally, so the next turn starts a new conversation; or, given
   * an id, continue that conversation instead. Nothing is sent to the server.
   */
  reset(contextId?: string): void {
    this.#setContext(contextId);
  }

  /** Follow this context's latest run from its first frame (e.g. after a page reload). */
  attach(options: CallOptions = {}): AsyncGenerator<StreamFrame, void, undefined> {
    const contextId = this.#contextId;
    if (contextId === undefined) throw new AgentError("no_context", "there is no conversation to attach to", 0);
    return this.#follow(undefined, contextId, options.signal);
  }

  // -- conversations (SPEC section 3) ----------------------------------------------------

  /** One page of the caller's conversations with this agent, most recently updated first. */
  async listContexts(options: ListContextsOptions = {}): Promise<ContextPage> {
    const query = searchOf({ limit: options.limit, cursor: options.cursor });
    const response = await this.#get(`${this.#agentPath()}/contexts${query}`, options.signal);
    return parseContextPage(await readJSON(response));
  }

  /** Every conversation of the caller with this agent, page after page. */
  async *allContexts(options: Omit<ListContextsOptions, "cursor"> = {}): AsyncGenerator<ContextSummary, void, undefined> {
    let cursor: string | undefined;
    do {
      const page = await this.listContexts(cursor === undefined ? options : { ...options, cursor });
      yield* page.contexts;
      cursor = page.nextCursor;
    } while (cursor !== undefined);
  }

  /** The summary of one conversation (this one when `contextId` is absent). */
  async getContext(contextId = this.#contextId, options: CallOptions = {}): Promise<ContextSummary> {
    const path = this.#contextPath(requireContext(contextId, "read"));
    return parseContextSummary(await readJSON(await this.#get(path, options.signal)));
  }

  /** One page of a conversation's transcript, oldest first (this one when `contextId` is absent). */
  async messages(contextId = this.#contextId, options: MessagesOptions = {}): Promise<MessagePage> {
    const query = searchOf({ after: options.after, limit: options.limit });
    const path = `${this.#contextPath(requireContext(contextId, "read"))}/messages${query}`;
    return parseMessagePage(await readJSON(await this.#get(path, options.signal)));
  }

  /** The whole transcript (after `after`, when given), page after page. */
  async *allMessages(
    contextId = this.#contextId,
    options: MessagesOptions = {},
  ): AsyncGenerator<TranscriptMessage, void, undefined> {
    const id = requireContext(contextId, "read");
    let after = options.after;
    for (;;) {
      const page = await this.messages(id, after === undefined ? options : { ...options, after });
      yield* page.messages;
      const last = page.messages.at(-1);
      if (page.nextCursor === undefined || last === undefined) return;
      after = last.id;
    }
  }

  /**
   * Stop the conversation's running run on the server (this one when `contextId` is
   * absent): it ends `cancelled` with a valid history, and its stream gets its `done`
   * frame. A suspended run is abandoned. Nothing running: a NoActiveRunError.
   */
  async cancel(contextId = this.#contextId, options: CallOptions = {}): Promise<CancelResult> {
    const path = `${this.#contextPath(requireContext(contextId, "cancel"))}/cancel`;
    const response = await this.#retrying(() => this.#request("POST", path, jsonHeaders(), options.signal, "{}"), options.signal);
    return parseCancelResult(await readJSON(response));
  }

  /**
   * Copy a conversation (this one when `contextId` is absent) into a new one, up to and
   * including `messageId`, with its AgentState. The source is unchanged, and this client
   * stays on it: `reset(result.contextId)` moves to the copy.
   */
  async fork(contextId = this.#contextId, options: ForkOptions = {}): Promise<ForkResult> {
    const path = `${this.#contextPath(requireContext(contextId, "fork"))}/fork`;
    const body: { messageId?: string; contextId?: string } = {};
    if (options.messageId !== undefined) body.messageId = options.messageId;
    if (options.contextId !== undefined) body.contextId = options.contextId;
    const payload = JSON.stringify(body);
    // not retried: a fork that reached the server and lost its answer would be made twice
    const response = await this.#request("POST", path, jsonHeaders(), options.signal, payload);
    if (!response.ok) throw await errorFrom(response);
    return parseForkResult(await readJSON(response));
  }

  // -- turns -----------------------------------------------------------------------------

  #turnBody(message: MessageInput | undefined, options: TurnOptions): TurnFields {
    const body: TurnFields = {};
    if (options.regenerate !== undefined) {
      if (message !== undefined || options.replace !== undefined) {
        throw new AgentError("invalid_request", "regenerate takes no message and no replace", 0);
      }
      requireContext(this.#contextId, "regenerate in");
      body.regenerate = options.regenerate;
    } else {
      if (message === undefined) throw new AgentError("invalid_request", "a turn needs a message (or regenerate)", 0);
      body.message = message;
      if (options.replace !== undefined) {
        requireContext(this.#contextId, "edit");
        body.replace = options.replace;
      }
    }
    if (options.multitask !== undefined) body.multitask = options.multitask;
    return body;
  }

  async #send(body: Body, signal: AbortSignal | undefined): Promise<SendResult> {
    const response = await this.#post("send", body, newIdempotencyKey(), signal);
    const result = parseSendResult(await readJSON(response));
    this.#setContext(result.contextId);
    return result;
  }

  async *#stream(body: Body, signal: AbortSignal | undefined): AsyncGenerator<StreamFrame, void, undefined> {
    const key = newIdempotencyKey();
    const post = () => this.#post("stream", body, key, signal);
    yield* this.#follow(await post(), this.#contextId, signal, post);
  }

  /**
   * Read frames until the `done` frame, resuming a dropped stream: with `Last-Event-ID`
   * once a frame has arrived, else with `repost` (the same POST, same idempotency key).
   */
  async *#follow(
    first: Response | undefined,
    contextId: string | undefined,
    signal: AbortSignal | undefined,
    repost?: () => Promise<Response>,
  ): AsyncGenerator<StreamFrame, void, undefined> {
    let response = first;
    let lastId: number | undefined;
    let runId: string | undefined;
    let failures = 0;
    for (;;) {
      response ??= await this.#reconnect(contextId, lastId, signal);
      try {
        const stream = response.body;
        if (stream === null) throw new TypeError("the stream response has no body");
        for await (const sse of decodeSSE(stream)) {
          const seq = sse.id === undefined ? undefined : Number(sse.id);
          if (seq !== undefined && lastId !== undefined && seq <= lastId) continue; // already seen
          const frame = parseStreamFrame(sse.data);
          if (seq !== undefined && Number.isFinite(seq)) lastId = seq;
          if (frame === undefined) continue; // an event type this client does not know
          if (runId !== undefined && frame.runId !== runId) {
            throw new AgentError("stream_lost", "the run was replaced by a newer one before it ended", 0);
          }
          runId = frame.runId;
          contextId = frame.contextId;
          this.#setContext(frame.contextId);
          failures = 0;
          yield frame;
          if (isDoneFrame(frame)) return;
        }
      } catch (error) {
        if (signal?.aborted || error instanceof AgentError) throw error;
      }
      failures += 1;
      if (failures > this.#attempts) {
        throw new AgentError("stream_lost", "the stream ended before the run did, and reconnecting failed", 0);
      }
      await this.#pause(failures, signal);
      response = lastId === undefined && repost !== undefined ? await repost() : undefined;
    }
  }

  async #reconnect(contextId: string | undefined, lastId: number | undefined, signal: AbortSignal | undefined) {
    if (contextId === undefined) throw new AgentError("no_context", "there is no conversation to reconnect to", 0);
    const headers = { Accept: "text/event-stream", "Last-Event-ID": String(lastId ?? 0) };
    return this.#retrying(() => this.#request("GET", `${this.#contextPath(contextId)}/stream`, headers, signal), signal);
  }

  // -- HTTP ------------------------------------------------------------------------------

  #agentPath(): string {
    return `${this.url}/agents/${encodeURIComponent(this.agent)}`;
  }

  async #get(url: string, signal: AbortSignal | undefined): Promise<Response> {
    return this.#retrying(() => this.#request("GET", url, { Accept: "application/json" }, signal), signal);
  }

  #contextPath(contextId: string): string {
    return `${this.#agentPath()}/contexts/${encodeURIComponent(contextId)}`;
  }

  async #post(endpoint: "send" | "stream", body: Body, key: string, signal: AbortSignal | undefined) {
    if ("resume" in body && this.#contextId === undefined) {
      throw new AgentError("no_context", "there is no conversation to resume", 0);
    }
    const payload = JSON.stringify(this.#contextId === undefined ? body : { ...body, contextId: this.#contextId });
    const headers: Record<string, string> = {
      "Content-Type": "application/json",
      Accept: endpoint === "stream" ? "text/event-stream" : "application/json",
      "Idempotency-Key": key,
    };
    return this.#retrying(
      () => this.#request("POST", `${this.#agentPath()}/${endpoint}`, headers, signal, payload),
      signal,
    );
  }

  /** Run `attempt` until it answers 2xx; network errors and 502/503/504 are retried. */
  async #retrying(attempt: () => Promise<Response>, signal: AbortSignal | undefined): Promise<Response> {
    for (let failures = 0; ; failures += 1) {
      let response: Response;
      try {
        response = await attempt();
      } catch (error) {
        if (signal?.aborted || error instanceof AgentError) throw error;
        if (failures >= this.#attempts) {
          throw new AgentError("network_error", `the server could not be reached (${describe(error)})`, 0, {
            cause: error,
          });
        }
        await this.#pause(failures + 1, signal);
        continue;
      }
      if (response.ok) return response;
      if (!RETRYABLE_STATUS.has(response.status) || failures >= this.#attempts) throw await errorFrom(response);
      await response.body?.cancel();
      await this.#pause(failures + 1, signal);
    }
  }

  async #request(
    method: string,
    url: string,
    headers: Record<string, string>,
    signal: AbortSignal | undefined,
    body?: string,
  ): Promise<Response> {
    const merged = new Headers(await resolveHeaders(this.#headers));
    for (const [name, value] of Object.entries(headers)) merged.set(name, value);
    const init: RequestInit = { method, headers: merged };
    if (body !== undefined) init.body = body;
    if (signal !== undefined) init.signal = signal;
    return this.#fetch(url, init);
  }

  #pause(failures: number, signal: AbortSignal | undefined): Promise<void> {
    const delay = Math.min(this.#delayMs * 2 ** (failures - 1), MAX_DELAY_MS);
    return sleep(delay, signal);
  }

  #setContext(contextId: string | undefined): void {
    if (contextId === this.#contextId) return;
    this.#contextId = contextId;
    this.#onContext?.(contextId);
  }
}

/** `GET /agents`: the agents a server offers, in `framework.json` order. */
export async function listAgents(options: Pick<AgentClientOptions, "url" | "headers" | "fetch">): Promise<AgentInfo[]> {
  const doFetch = options.fetch ?? globalThis.fetch.bind(globalThis);
  const response = await doFetch(`${options.url.replace(/\/+$/, "")}/agents`, {
    headers: new Headers(await resolveHeaders(options.headers)),
  });
  if (!response.ok) throw await errorFrom(response);
  return parseAgentList(await readJSON(response));
}

