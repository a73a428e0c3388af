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
import { type MemoryPage, type MemoryQuery, memorySearch, parseMemoryPage } from "./memory.js";
import { decodeSSE } from "./sse.js";
import {
  type AgentInfo,
  type JSONValue,
  type SendResult,
  type StreamFrame,
  isDoneFrame,
  parseAgentList,
  parseErrorBody,
  parseSendResult,
  parseStreamFrame,
} from "./types.js";

/** The text of a message, or the A2A-style message object the server also accepts. */
export type MessageInput = string | { role: "user"; parts: { text: string }[] };

/** A decision to a tool approval: run the tool, or do not (the model gets the reason). */
export type ApprovalDecision = { approved: true } | { approved: false; reason?: string };

/**
 * What answers an interrupt: an ApprovalDecision for `approval` interrupts, any JSON
 * (usually the answer text) for `input` interrupts, or `{ cancel: true }` to abandon
 * the suspended run.
 */
export type Decision = ApprovalDecision | { cancel: true } | JSONValue;

/** Headers for every request, or a function that returns them (e.g. a fresh token). */
export type HeadersOption = HeadersInit | (() => HeadersInit | Promise<HeadersInit>);

/** How failed requests and dropped streams are retried. */
export interface RetryOptions {
  /** Attempts after the first one; 0 turns retries off. Default 5. */
  attempts?: number;
  /** The first delay in milliseconds; it doubles on each attempt, up to 5 s. Default 250. */
  delayMs?: number;
}

/** Options of `new AgentClient(...)`. */
export interface AgentClientOptions {
  /** The server's base URL, e.g. `http://127.0.0.1:8000`; `""` means the page's origin. */
  url: string;
  /** The agent's name, as in `framework.json` (and `GET /agents`). */
  agent: string;
  /** Continue this conversation; absent starts a new one (the server mints the id). */
  contextId?: string;
  /** Extra headers (e.g. `Authorization`) for every request. */
  headers?: HeadersOption;
  /** The fetch to use; defaults to the global one. Tests and proxies inject their own. */
  fetch?: typeof fetch;
  /** Called when the context id changes: set by the server, or `undefined` after `reset()`. */
  onContext?: (contextId: string | undefined) => void;
  /** Retries of failed requests and dropped streams. */
  retry?: RetryOptions;
}

/** Per-call options. */
export interface CallOptions {
  /** Aborts the local request or stream; a run already started goes on on the server. */
  signal?: AbortSignal;
}

type Body = { message: MessageInput } | { resume: { interruptId: string; decision: Decision } };

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
  stream(message: MessageInput, options: CallOptions = {}): AsyncGenerator<StreamFrame, void, undefined> {
    return this.#stream({ message }, options.signal);
  }

  /** Run one turn and resolve with its SendResult (`POST /agents/{name}/send`). */
  async send(message: MessageInput, options: CallOptions = {}): Promise<SendResult> {
    return this.#send({ message }, options.signal);
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

  // -- turns -----------------------------------------------------------------------------

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

async function resolveHeaders(option: HeadersOption | undefined): Promise<HeadersInit> {
  if (option === undefined) return {};
  return typeof option === "function" ? option() : option;
}

async function readJSON(response: Response): Promise<unknown> {
  try {
    return (await response.json()) as unknown;
  } catch (error) {
    throw new AgentError("invalid_response", `the server did not answer JSON (${describe(error)})`, 0, {
      cause: error,
    });
  }
}

/** The AgentError of a non-2xx response, from its `{"error": {...}}` body when it has one. */
async function errorFrom(response: Response): Promise<AgentError> {
  let body: unknown;
  try {
    body = JSON.parse(await response.text()) as unknown;
  } catch {
    body = undefined;
  }
  const error = parseErrorBody(body);
  if (error !== undefined) return new AgentError(error.code, error.message, response.status);
  return new AgentError(`http_${response.status}`, `the server answered ${response.status} ${response.statusText}`, response.status);
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** A random UUID (version 4); works where `crypto.randomUUID` does not (plain-HTTP pages). */
export function newIdempotencyKey(): string {
  if (typeof crypto.randomUUID === "function") return crypto.randomUUID();
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  bytes[6] = ((bytes[6] ?? 0) & 0x0f) | 0x40;
  bytes[8] = ((bytes[8] ?? 0) & 0x3f) | 0x80;
  const hex = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
