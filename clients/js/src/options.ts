/**
 * The options and inputs of AgentClient's methods: what a caller passes, documented once.
 */

import type { HeadersOption } from "./http.js";
import type { JSONValue } from "./types.js";

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

/** What a turn meets when its context is already running one (SPEC section 5). */
export type MultitaskPolicy = "queue" | "reject" | "interrupt" | "rollback";

/** Options of a turn: `send` and `stream`. */
export interface TurnOptions extends CallOptions {
  /** This request's concurrency policy, overriding the server's `server.concurrency`. */
  multitask?: MultitaskPolicy;
  /**
   * Edit: the id of a user message of this context (from the transcript). The history
   * is cut just before it, and the turn runs with the new message in its place.
   */
  replace?: string;
  /**
   * Regenerate: the id of an assistant message of this context. The history is cut
   * just before it and the model answers again; the turn then takes no message.
   */
  regenerate?: string;
}

/** Options of `listContexts`. */
export interface ListContextsOptions extends CallOptions {
  /** Page size, 1–200 (the server's default is 50). */
  limit?: number;
  /** The `nextCursor` of the previous page. */
  cursor?: string;
}

/** Options of `messages` and `allMessages`. */
export interface MessagesOptions extends CallOptions {
  /** Only the messages after this message id. */
  after?: string;
  /** Page size, 1–500 (the server's default is 100). */
  limit?: number;
}

/** Options of `fork`. */
export interface ForkOptions extends CallOptions {
  /** Copy the history up to and including this message; absent: all of it. */
  messageId?: string;
  /** The new context's id; absent: the server mints one. */
  contextId?: string;
}
