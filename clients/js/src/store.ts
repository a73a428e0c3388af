/**
 * AgentStore: the chat view of a conversation, built from stream frames by a pure reducer.
 *
 * `applyFrame(view, frame)` and `applyAction(view, action)` return a new view and never
 * touch the old one, so they are tested without React and any UI can bind them.
 * `AgentStore` holds the current view with `subscribe`/`getSnapshot`, the pair React's
 * `useSyncExternalStore` expects.
 *
 * The view holds what the wire shows and nothing more: turns, the latest run's thinking
 * and activity, a status, the last error, the context id and the pending interrupt.
 */

import type { ErrorBody, Interrupt, RunStatus, StreamFrame, TranscriptMessage } from "./types.js";
import { isDoneFrame } from "./types.js";
import { applyTranscript, emptyAssistant, lastIdOf } from "./store-transcript.js";

/** What the chat is doing: a turn is `streaming`, a run waits for a human (`suspended`), or it failed (`error`). */
export type ChatStatus = "idle" | "streaming" | "suspended" | "error";

/** A message from the person: a sent message, or the words of a decision (e.g. "Approved"). */
export interface UserTurn {
  readonly id: string;
  readonly role: "user";
  readonly text: string;
  /** Its `msg-` id once the transcript holds it (what `edit` takes); undefined until then. */
  readonly messageId: string | undefined;
}

/** One tool execution of a run: its name and how it is going. */
export interface ActivityLine {
  /** The tool call's id. */
  readonly id: string;
  /** The tool's name. */
  readonly name: string;
  readonly status: "running" | "success" | "error";
}

/** The answer of one run (or of the part of a run after a decision). */
export interface AssistantTurn {
  readonly id: string;
  readonly role: "assistant";
  /** The run this turn shows; undefined until its first frame arrives. */
  readonly runId: string | undefined;
  /** Grows with token deltas; replaced by the `done` frame's authoritative text. */
  readonly text: string;
  /** The model's reasoning, as streamed; each model call after the first starts a new paragraph. */
  readonly thinking: string;
  readonly activity: readonly ActivityLine[];
  /** `streaming` until the run ends; `stopped` when the local stream was stopped or lost. */
  readonly status: "streaming" | "stopped" | RunStatus;
  /** The swarm member that produced the latest frame, if the agent is a swarm. */
  readonly agent: string | undefined;
  /** The names of the tools the run called, from its `done` frame or the transcript. */
  readonly toolCalls: readonly string[];
  /** The `msg-` id of its first transcript message (what `regenerate` takes); undefined until known. */
  readonly messageId: string | undefined;
  /** Every transcript message this turn shows: a run that calls tools writes several. */
  readonly messageIds: readonly string[];
}

/** One entry of the transcript. */
export type Turn = UserTurn | AssistantTurn;

/** Everything a chat UI renders. */
export interface AgentView {
  readonly turns: readonly Turn[];
  /** The latest assistant turn's reasoning. */
  readonly thinking: string;
  /** The latest assistant turn's tool executions. */
  readonly activity: readonly ActivityLine[];
  readonly status: ChatStatus;
  /** The last failure: a failed run, or a request the server refused. Cleared by the next turn. */
  readonly error: ErrorBody | undefined;
  readonly contextId: string | undefined;
  /** The interrupt the run waits on; answer it with a decision to continue. */
  readonly pendingInterrupt: Interrupt | undefined;
}

/** The inputs of the reducer besides frames: what the person (or the network) did. */
export type StoreAction =
  /** A message was sent: a user turn, then an assistant turn waiting for frames. */
  | { type: "send"; text: string }
  /** A decision was sent: a user turn with its words, then an assistant turn for the rest of the run. */
  | { type: "resume"; text: string }
  /** A stream frame arrived. */
  | { type: "frame"; frame: StreamFrame }
  /** The request or the stream failed on this side (the run may go on on the server). */
  | { type: "fail"; error: ErrorBody }
  /** The person stopped the local stream. */
  | { type: "stop" }
  /** Forget the transcript; with `contextId`, continue that conversation. */
  | { type: "reset"; contextId?: string | undefined }
  /**
   * Transcript messages arrived: all of them (`after` absent), or those after the message
   * `after`. A run the view shows keeps its turns as shown (decisions, thinking, tool
   * activity) and adopts their message ids; other runs' turns are built from the messages.
   */
  | { type: "transcript"; messages: readonly TranscriptMessage[]; after?: string | undefined }
  /** An edit was sent: the turns from that user message on are dropped, then a new turn starts. */
  | { type: "edit"; messageId: string; text: string }
  /** A regenerate was sent: the turns from that assistant message on are dropped, then a new answer starts. */
  | { type: "regenerate"; messageId: string };

/** An empty view, optionally of an existing conversation. */
export function initialView(contextId?: string): AgentView {
  return {
    turns: [],
    thinking: "",
    activity: [],
    status: "idle",
    error: undefined,
    contextId,
    pendingInterrupt: undefined,
  };
}

/** The view after one action. Pure: returns a new view, or the same one if nothing changed. */
export function applyAction(view: AgentView, action: StoreAction): AgentView {
  switch (action.type) {
    case "send":
    case "resume":
      return startTurn(view, action.text);
    case "frame":
      return applyFrame(view, action.frame);
    case "fail":
      return endLocally({ ...view, status: "error", error: action.error });
    case "stop":
      return view.status === "streaming" ? endLocally({ ...view, status: "idle" }) : view;
    case "reset":
      return initialView(action.contextId);
    case "transcript":
      return applyTranscript(view, action.messages, action.after);
    case "edit": {
      const index = view.turns.findIndex((t) => t.role === "user" && t.messageId === action.messageId);
      return startTurn(index === -1 ? view : { ...view, turns: view.turns.slice(0, index) }, action.text);
    }
    case "regenerate": {
      const index = view.turns.findIndex((t) => t.role === "assistant" && t.messageId === action.messageId);
      const kept = index === -1 ? view.turns : view.turns.slice(0, index);
      return {
        ...view,
        turns: [...kept, emptyAssistant(`turn-${view.turns.length}`, undefined)],
        thinking: "",
        activity: [],
        status: "streaming",
        error: undefined,
      };
    }
  }
}

/**
 * The id of the last transcript message the view holds, or undefined: what a client asks
 * the transcript for messages `after`, to learn the ids of the turns it streamed.
 */
export function lastMessageId(view: AgentView): string | undefined {
  for (let i = view.turns.length - 1; i >= 0; i -= 1) {
    const id = lastIdOf(view.turns[i]);
    if (id !== undefined) return id;
  }
  return undefined;
}

/** The view after one stream frame. Pure. */
export function applyFrame(view: AgentView, frame: StreamFrame): AgentView {
  const base: AgentView = { ...view, contextId: frame.contextId };
  if (isDoneFrame(frame)) {
    const suspended = frame.status === "suspended";
    const failed = frame.status === "failed";
    return updateAssistant(
      {
        ...base,
        status: suspended ? "suspended" : failed ? "error" : "idle",
        pendingInterrupt: suspended ? (frame.interrupt ?? view.pendingInterrupt) : undefined,
        error: failed ? (frame.error ?? view.error ?? { code: "run_failed", message: "the run failed" }) : view.error,
      },
      frame,
      (turn) => ({ ...turn, text: frame.text, status: frame.status, toolCalls: frame.toolCalls }),
    );
  }
  const event = frame.event;
  switch (event.type) {
    case "status":
      return updateAssistant({ ...base, status: "streaming", pendingInterrupt: undefined }, frame, (t) => t);
    case "step": // a new model call: its reasoning starts a new paragraph
      return updateAssistant(base, frame, (t) =>
        t.thinking === "" || t.thinking.endsWith("\n") ? t : { ...t, thinking: `${t.thinking}\n\n` },
      );
    case "token":
      return updateAssistant(base, frame, (t) => ({ ...t, text: t.text + event.text }));
    case "thinking":
      return updateAssistant(base, frame, (t) => ({ ...t, thinking: t.thinking + event.text }));
    case "tool_call":
      return updateAssistant(base, frame, (t) => ({
        ...t,
        activity: upsert(t.activity, { id: event.id, name: event.name, status: "running" }),
      }));
    case "tool_result":
      return updateAssistant(base, frame, (t) => ({
        ...t,
        activity: upsert(t.activity, { id: event.id, name: event.name, status: event.status }),
      }));
    case "interrupt": {
      const { type: _type, agent: _agent, ...interrupt } = event;
      return updateAssistant({ ...base, pendingInterrupt: interrupt }, frame, (t) => t);
    }
    case "error":
      return updateAssistant({ ...base, error: { code: event.code, message: event.message } }, frame, (t) => t);
  }
}

/** Holds the current view; `subscribe`/`getSnapshot` are bound, so they can be passed around. */
export class AgentStore {
  #view: AgentView;
  readonly #listeners = new Set<() => void>();

  constructor(view: AgentView = initialView()) {
    this.#view = view;
  }

  /** The current view; the same object until something changes. */
  readonly getSnapshot = (): AgentView => this.#view;

  /** Call `listener` after every change; returns the function that unsubscribes it. */
  readonly subscribe = (listener: () => void): (() => void) => {
    this.#listeners.add(listener);
    return () => {
      this.#listeners.delete(listener);
    };
  };

  /** Reduce one action into the view and notify the listeners if it changed. */
  dispatch(action: StoreAction): void {
    const next = applyAction(this.#view, action);
    if (next === this.#view) return;
    this.#view = next;
    for (const listener of [...this.#listeners]) listener();
  }

  /** Reduce one stream frame into the view. */
  applyFrame(frame: StreamFrame): void {
    this.dispatch({ type: "frame", frame });
  }
}

// -- helpers -----------------------------------------------------------------------------

function startTurn(view: AgentView, text: string): AgentView {
  const n = view.turns.length;
  const user: UserTurn = { id: `turn-${n}`, role: "user", text, messageId: undefined };
  return {
    ...view,
    turns: [...view.turns, user, emptyAssistant(`turn-${n + 1}`, undefined)],
    thinking: "",
    activity: [],
    status: "streaming",
    error: undefined,
  };
}

/**
 * Apply `update` to the assistant turn that shows `frame`'s run: the last turn, when it
 * is an assistant turn of the same run (or still waiting for its first frame); otherwise
 * a new assistant turn (e.g. when following a run that this page did not start).
 */
function updateAssistant(
  view: AgentView,
  frame: StreamFrame,
  update: (turn: AssistantTurn) => AssistantTurn,
): AgentView {
  const last = view.turns.at(-1);
  const reuse = last?.role === "assistant" && (last.runId === undefined || last.runId === frame.runId);
  const current = reuse ? last : emptyAssistant(`turn-${view.turns.length}`, frame.runId);
  const turn = update({ ...current, runId: frame.runId, agent: frame.agent ?? current.agent });
  const turns = reuse ? [...view.turns.slice(0, -1), turn] : [...view.turns, turn];
  return { ...view, turns, thinking: turn.thinking, activity: turn.activity };
}

/** End the local stream: mark a streaming turn `stopped`, and drop an assistant turn that never got a frame. */
function endLocally(view: AgentView): AgentView {
  const last = view.turns.at(-1);
  if (last?.role !== "assistant" || last.status !== "streaming") return view;
  if (last.runId === undefined) return { ...view, turns: view.turns.slice(0, -1) };
  return { ...view, turns: [...view.turns.slice(0, -1), { ...last, status: "stopped" }] };
}

function upsert(lines: readonly ActivityLine[], line: ActivityLine): readonly ActivityLine[] {
  const index = lines.findIndex((l) => l.id === line.id);
  if (index === -1) return [...lines, line];
  return lines.map((l, i) => (i === index ? line : l));
}
