/**
 * AgentChat: an AgentClient bound to an AgentStore, for any UI framework.
 *
 * It owns the one thing a chat needs besides the view: the turn in flight. `send` and
 * `resume` stream a turn into the store and resolve with its SendResult; `stop` aborts
 * the local stream (the server's run goes on); `reset` starts over. The React hook is
 * this class bound with `useSyncExternalStore`; Vue, Svelte or plain DOM code can
 * subscribe to it the same way.
 */

import { AgentClient, type AgentClientOptions, type Decision } from "./client.js";
import { AgentError } from "./errors.js";
import { type AgentView, AgentStore, initialView, type StoreAction } from "./store.js";
import { type Interrupt, type SendResult, type StreamFrame, isDoneFrame, toSendResult } from "./types.js";

/** Options of `new AgentChat(...)`: those of the AgentClient it creates. */
export type AgentChatOptions = AgentClientOptions;

/** A chat with one agent: a client, a store and the turn in flight. */
export class AgentChat {
  /** The client that speaks the wire (e.g. for `deleteContext` or your own streams). */
  readonly client: AgentClient;
  /** The view of the conversation. */
  readonly store: AgentStore;
  /** A stable object whose `current` is always the latest context id. */
  readonly contextRef: { readonly current: string | undefined };
  #inFlight: AbortController | undefined;

  constructor(options: AgentChatOptions) {
    this.client = new AgentClient(options);
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

  /** Stop the local stream; the run goes on on the server, and its result stays in the history. */
  stop(): void {
    if (this.abort()) this.store.dispatch({ type: "stop" });
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

  async #turn(
    action: StoreAction | undefined,
    open: (signal: AbortSignal) => AsyncIterable<StreamFrame>,
  ): Promise<SendResult> {
    if (this.#inFlight !== undefined) {
      throw new AgentError("busy", "a turn is already in flight; stop it or wait for it", 0);
    }
    const controller = new AbortController();
    this.#inFlight = controller;
    if (action !== undefined) this.store.dispatch(action);
    try {
      for await (const frame of open(controller.signal)) {
        if (controller.signal.aborted) break;
        this.store.applyFrame(frame);
        if (isDoneFrame(frame)) return toSendResult(frame);
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
      if (this.#inFlight === controller) this.#inFlight = undefined;
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
