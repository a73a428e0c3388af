/**
 * AgentChat: an AgentClient bound to an AgentStore, for any UI framework.
 *
 * It owns the one thing a chat needs besides the view: the turn in flight. `send`,
 * `resume`, `edit` and `regenerate` stream a turn into the store and resolve with its
 * SendResult; `stop` cancels the run on the server; `load` shows the transcript of the
 * conversation (after a reload); `reset` starts over. After each turn that ends, the chat
 * reads the transcript's new messages (one page after the last id it holds), so every
 * turn knows the `msg-` ids that `edit` and `regenerate` take. The React hook is
 * this class bound with `useSyncExternalStore`; Vue, Svelte or plain DOM code can
 * subscribe to it the same way.
 */

import { AgentClient, type AgentClientOptions, type Decision } from "./client.js";
import { AgentError } from "./errors.js";
import { type AgentView, AgentStore, initialView, lastMessageId, type StoreAction } from "./store.js";
import { type Interrupt, type SendResult, type StreamFrame, isDoneFrame, toSendResult } from "./types.js";

/** Options of `new AgentChat(...)`: those of the AgentClient it creates. */
export type AgentChatOptions = AgentClientOptions & {
  /**
   * How long `stop` waits, after the server accepted the cancel, for the run's
   * `cancelled` done frame before it ends the local stream anyway. Default 5000 ms.
   */
  stopGraceMs?: number;
};

/** A chat with one agent: a client, a store and the turn in flight. */
export class AgentChat {
  /** The client that speaks the wire (e.g. for `deleteContext` or your own streams). */
  readonly client: AgentClient;
  /** The view of the conversation. */
  readonly store: AgentStore;
  /** A stable object whose `current` is always the latest context id. */
  readonly contextRef: { readonly current: string | undefined };
  #inFlight: AbortController | undefined;
  /** False once the server said it serves no transcript (`server.transcript: false`). */
  #transcript = true;
  /** The transcript being loaded; a turn started meanwhile waits for it. */
  #loading: { contextId: string; done: Promise<void> } | undefined;
  /** True while a turn's frames go into the view. */
  #streaming = false;
  readonly #stopGraceMs: number;

  constructor(options: AgentChatOptions) {
    const { stopGraceMs, ...clientOptions } = options;
    this.client = new AgentClient(clientOptions);
    this.#stopGraceMs = stopGraceMs ?? 5000;
    this.store = new AgentStore(initialView(options.contextId));
    const client = this.client;
    this.contextRef = {
      get current() {
        return client.contextId;
      },
    };
  }

  /** The current view (see AgentStore). */
  readonly getSnapshot = (): AgentView => this.store.getSnapshot();

  /** Be told about every change of the view; returns the unsubscribe function. */
  readonly subscribe = (listener: () => void): (() => void) => this.store.subscribe(listener);

  /**
   * Send a message and stream the run into the view.
   *
   * Resolves with the run's SendResult (also when it failed or suspended). Rejects with
   * an AgentError when the server refuses the turn or the stream is lost (the view's
   * `error` says the same), and with the abort reason after `stop()`.
   */
  send(text: string): Promise<SendResult> {
    return this.#turn({ type: "send", text }, (signal) => this.client.stream(text, { signal }));
  }

  /**
   * Edit a user message: the server cuts the history just before it and runs the turn
   * with `text` instead; the view drops the turns from that message on. Resolves like `send`.
   */
  edit(messageId: string, text: string): Promise<SendResult> {
    return this.#turn({ type: "edit", messageId, text }, (signal) =>
      this.client.stream(text, { replace: messageId, signal }),
    );
  }

  /**
   * Answer again: the server cuts the history just before the assistant message
   * `messageId` and the model answers from there. Resolves like `send`.
   */
  regenerate(messageId: string): Promise<SendResult> {
    return this.#turn({ type: "regenerate", messageId }, (signal) =>
      this.client.stream(undefined, { regenerate: messageId, signal }),
    );
  }

  /**
   * Show the conversation's transcript (every page), e.g. after a page reload. A
   * context the server does not know (yet) leaves the view empty. Rejects when the
   * transcript cannot be read, but leaves no error in the view; it changes nothing
   * while a turn is in flight.
   */
  load(): Promise<void> {
    const contextId = this.client.contextId;
    if (contextId === undefined) return Promise.resolve();
    if (this.#loading?.contextId === contextId) return this.#loading.done;
    const done = this.#load(contextId).finally(() => {
      if (this.#loading?.done === done) this.#loading = undefined;
    });
    this.#loading = { contextId, done };
    return done;
  }

  async #load(contextId: string): Promise<void> {
    const messages = [];
    try {
      for await (const message of this.client.allMessages(contextId)) messages.push(message);
    } catch (error) {
      if (error instanceof AgentError && error.code === "context_not_found") return;
      this.#noteTranscriptError(error);
      throw error;
    }
    if (!this.#streaming && this.client.contextId === contextId) {
      this.store.dispatch({ type: "transcript", messages });
    }
  }

  /** Answer the pending interrupt and stream the rest of the run; resolves like `send`. */
  resume(decision: Decision): Promise<SendResult> {
    const interrupt = this.store.getSnapshot().pendingInterrupt;
    if (interrupt === undefined) {
      return Promise.reject(new AgentError("no_interrupt", "there is no pending interrupt to answer", 0));
    }
    return this.#turn({ type: "resume", text: describeDecision(interrupt, decision) }, (signal) =>
      this.client.resumeStream(interrupt.id, decision, { signal }),
    );
  }

  /**
   * Follow the conversation's latest run from its start, without sending anything: after a
   * page reload, this shows a run that is still going, or the interrupt it waits on.
   * It rejects when there is nothing to follow, but leaves no error in the view.
   */
  attach(): Promise<SendResult> {
    return this.#turn(undefined, (signal) => this.client.attach({ signal }));
  }

  /**
   * Stop the turn in flight: cancel its run on the server, whose stream then ends with a
   * `cancelled` done frame (the history stays valid). When the server cannot cancel
   * (nothing running there, or a server without the endpoint), or the done frame does
   * not come within `stopGraceMs`, only the local stream stops.
   */
  async stop(): Promise<void> {
    const controller = this.#inFlight;
    if (controller === undefined) return;
    const contextId = this.client.contextId;
    if (contextId !== undefined) {
      try {
        await this.client.cancel(contextId, { signal: controller.signal });
        const timer = setTimeout(() => this.#stopLocally(controller), this.#stopGraceMs);
        controller.signal.addEventListener("abort", () => clearTimeout(timer), { once: true });
        this.#ended.get(controller)?.finally(() => clearTimeout(timer));
        return;
      } catch {
        // fall through: stop listening, at least
      }
    }
    this.#stopLocally(controller);
  }

  /** Abort the local stream without changing the view (for teardown); true if one was running. */
  abort(): boolean {
    const controller = this.#inFlight;
    this.#inFlight = undefined;
    controller?.abort(new DOMException("the chat was stopped", "AbortError"));
    return controller !== undefined;
  }

  /** Start a new conversation (the server mints the id), or continue `contextId`. */
  reset(contextId?: string): void {
    this.abort();
    this.client.reset(contextId);
    this.store.dispatch({ type: "reset", contextId });
  }

  /** Forget the conversation on the server, then start a new one. */
  async deleteContext(): Promise<void> {
    this.abort();
    await this.client.deleteContext();
    this.store.dispatch({ type: "reset" });
  }

  readonly #ended = new WeakMap<AbortController, Promise<unknown>>();

  #stopLocally(controller: AbortController): void {
    if (this.#inFlight === controller && this.abort()) this.store.dispatch({ type: "stop" });
  }

  #noteTranscriptError(error: unknown): void {
    // a 404 that is not about the context: this server keeps the transcript off the wire
    if (error instanceof AgentError && error.status === 404 && error.code !== "context_not_found") {
      this.#transcript = false;
    }
  }

  /** Read the transcript's messages after the last one the view holds, to learn the new turns' ids. */
  async #sync(): Promise<void> {
    const contextId = this.client.contextId;
    if (!this.#transcript || contextId === undefined) return;
    const after = lastMessageId(this.store.getSnapshot());
    const messages = [];
    try {
      for await (const message of this.client.allMessages(contextId, after === undefined ? {} : { after })) {
        messages.push(message);
      }
    } catch (error) {
      this.#noteTranscriptError(error);
      return; // the turns keep no ids: edit and regenerate wait for the next sync
    }
    if (!this.#streaming && this.client.contextId === contextId) {
      this.store.dispatch({ type: "transcript", messages, after });
    }
  }

  #turn(action: StoreAction | undefined, open: (signal: AbortSignal) => AsyncIterable<StreamFrame>): Promise<SendResult> {
    if (this.#inFlight !== undefined) {
      return Promise.reject(new AgentError("busy", "a turn is already in flight; stop it or wait for it", 0));
    }
    const controller = new AbortController();
    this.#inFlight = controller;
    const ended = this.#run(controller, action, open);
    this.#ended.set(controller, ended.catch(() => undefined));
    return ended;
  }

  async #run(
    controller: AbortController,
    action: StoreAction | undefined,
    open: (signal: AbortSignal) => AsyncIterable<StreamFrame>,
  ): Promise<SendResult> {
    await this.#loading?.done.catch(() => undefined); // history first, then the turn on top of it
    if (controller.signal.aborted) throw controller.signal.reason;
    this.#streaming = true;
    if (action !== undefined) this.store.dispatch(action);
    try {
      for await (const frame of open(controller.signal)) {
        if (controller.signal.aborted) break;
        this.store.applyFrame(frame);
        if (isDoneFrame(frame)) {
          if (this.#inFlight === controller) this.#inFlight = undefined;
          this.#streaming = false;
          if (frame.status !== "suspended") await this.#sync();
          return toSendResult(frame);
        }
      }
      throw controller.signal.reason ?? new AgentError("stream_lost", "the stream ended before the run did", 0);
    } catch (error) {
      if (controller.signal.aborted) throw error;
      const failure =
        error instanceof AgentError ? error : new AgentError("network_error", String(error), 0, { cause: error });
      this.store.dispatch(
        action === undefined ? { type: "stop" } : { type: "fail", error: { code: failure.code, message: failure.message } },
      );
      throw failure;
    } finally {
      if (this.#inFlight === controller) {
        this.#inFlight = undefined;
        this.#streaming = false;
      }
    }
  }
}

/** The words a decision adds to the transcript, e.g. "Approved delete_file". */
export function describeDecision(interrupt: Interrupt, decision: Decision): string {
  const fields: { readonly [key: string]: unknown } = isObject(decision) ? decision : {};
  if (fields["cancel"] === true) return "Cancelled";
  if (interrupt.kind === "approval") {
    const tool = interrupt.tool === undefined ? "" : ` ${interrupt.tool}`;
    if (fields["approved"] === true) return `Approved${tool}`;
    const reason = fields["reason"];
    return typeof reason === "string" && reason !== "" ? `Rejected${tool}: ${reason}` : `Rejected${tool}`;
  }
  return typeof decision === "string" ? decision : JSON.stringify(decision);
}

function isObject(value: unknown): value is { readonly [key: string]: unknown } {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
