import { describe, expect, it } from "vitest";

import {
  APPROVAL_RUN_ID,
  approvalRun,
  approvedRun,
  CONTEXT_ID,
  encode,
  failedRun,
  framesOf,
  INTERRUPT_ID,
  RUN_ID,
  timeRun,
} from "../tests/support/frames.js";
import { SSEDecoder } from "./sse.js";
import {
  type AgentView,
  type AssistantTurn,
  type StoreAction,
  AgentStore,
  applyAction,
  applyFrame,
  initialView,
} from "./store.js";
import { type StreamFrame, parseStreamFrame } from "./types.js";

/** Decode recorded SSE text the way the client does, so the reducer sees real frames. */
function decoded(text: string): StreamFrame[] {
  return new SSEDecoder()
    .push(text)
    .map((f) => parseStreamFrame(f.data))
    .filter((f): f is StreamFrame => f !== undefined);
}

function reduce(view: AgentView, actions: StoreAction[]): AgentView {
  return actions.reduce(applyAction, view);
}

function frames(list: StreamFrame[]): StoreAction[] {
  return list.map((frame) => ({ type: "frame", frame }));
}

function lastAssistant(view: AgentView): AssistantTurn {
  const turn = view.turns.at(-1);
  if (turn?.role !== "assistant") throw new Error("the last turn is not an assistant turn");
  return turn;
}

function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null) {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
}

describe("applyFrame over a recorded run", () => {
  const sent = applyAction(initialView(), { type: "send", text: "What time is it?" });

  it("starts a turn: a user turn, an empty assistant turn, status streaming", () => {
    expect(sent.status).toBe("streaming");
    expect(sent.turns).toEqual([
      { id: "turn-0", role: "user", text: "What time is it?", messageId: undefined },
      {
        id: "turn-1",
        role: "assistant",
        runId: undefined,
        text: "",
        thinking: "",
        activity: [],
        status: "streaming",
        agent: undefined,
        toolCalls: [],
        messageId: undefined,
        messageIds: [],
      },
    ]);
  });

  it("grows text and thinking with deltas, and tracks each tool call on one activity line", () => {
    const list = decoded(encode(timeRun));
    // after the tool call, before its result
    const calling = reduce(sent, frames(list.slice(0, 5)));
    expect(calling.contextId).toBe(CONTEXT_ID);
    expect(calling.thinking).toBe("The user wants to know the time, so I will call current_time.");
    expect(calling.activity).toEqual([{ id: "call-demo-1", name: "current_time", status: "running" }]);
    // two tokens in
    const streaming = reduce(sent, frames(list.slice(0, 10)));
    expect(lastAssistant(streaming).text).toBe("It is 14:05 ");
    expect(streaming.activity).toEqual([{ id: "call-demo-1", name: "current_time", status: "success" }]);
    expect(streaming.status).toBe("streaming");
    expect(lastAssistant(streaming).runId).toBe(RUN_ID);
    // the second model call's reasoning starts a new paragraph
    expect(streaming.thinking).toBe(
      "The user wants to know the time, so I will call current_time.\n\nThe current_time tool answered.",
    );
  });

  it("replaces the streamed text with the done frame's authoritative text", () => {
    const list = decoded(encode(timeRun));
    const tokens = list.slice(0, -1);
    const done = list.at(-1);
    if (done === undefined || !("done" in done)) throw new Error("no done frame");
    const view = reduce(sent, frames([...tokens, { ...done, text: "It is 14:05 UTC." }]));
    expect(lastAssistant(view).text).toBe("It is 14:05 UTC.");
    expect(lastAssistant(view).status).toBe("completed");
    expect(view.status).toBe("idle");
    expect(view.turns).toHaveLength(2);
    expect(view.error).toBeUndefined();
    expect(view.pendingInterrupt).toBeUndefined();
  });

  it("never changes the view it was given", () => {
    const frozen = deepFreeze(sent);
    const before = JSON.stringify(frozen);
    const after = reduce(frozen, frames(decoded(encode(timeRun))));
    expect(JSON.stringify(frozen)).toBe(before);
    expect(after).not.toBe(frozen);
  });
});

describe("human in the loop", () => {
  const suspended = reduce(initialView(), [
    { type: "send", text: "Delete notes.txt" },
    ...frames(framesOf(approvalRun)),
  ]);

  it("suspends with the pending interrupt", () => {
    expect(suspended.status).toBe("suspended");
    expect(suspended.pendingInterrupt).toEqual({
      id: INTERRUPT_ID,
      kind: "approval",
      tool: "delete_file",
      prompt: "Allow delete_file?",
    });
    expect(lastAssistant(suspended).status).toBe("suspended");
  });

  it("shows the decision as a user turn and the rest of the run as a new assistant turn", () => {
    const resumed = applyAction(suspended, { type: "resume", text: "Approved delete_file" });
    expect(resumed.status).toBe("streaming");
    // still pending until the resumed run's first frame: a failed resume keeps it answerable
    expect(resumed.pendingInterrupt?.id).toBe(INTERRUPT_ID);
    const first = approvedRun[0];
    if (first === undefined) throw new Error("empty fixture");
    const running = applyFrame(resumed, first.frame);
    expect(running.pendingInterrupt).toBeUndefined();
    const done = reduce(running, frames(framesOf(approvedRun.slice(1))));
    expect(done.status).toBe("idle");
    expect(done.turns.map((t) => [t.role, t.text])).toEqual([
      ["user", "Delete notes.txt"],
      ["assistant", ""],
      ["user", "Approved delete_file"],
      ["assistant", "Done: deleted notes.txt."],
    ]);
    expect(lastAssistant(done).runId).toBe(APPROVAL_RUN_ID);
    expect(done.activity).toEqual([{ id: "call-demo-2", name: "delete_file", status: "success" }]);
  });

  it("takes the interrupt from the interrupt event even before the done frame", () => {
    const view = reduce(initialView(), [{ type: "send", text: "x" }, ...frames(framesOf(approvalRun.slice(0, 4)))]);
    expect(view.status).toBe("streaming");
    expect(view.pendingInterrupt?.id).toBe(INTERRUPT_ID);
  });
});

describe("failures, stops and resets", () => {
  it("a failed run ends in status error with the run's error", () => {
    const view = reduce(initialView(), [{ type: "send", text: "hi" }, ...frames(framesOf(failedRun))]);
    expect(view.status).toBe("error");
    expect(view.error).toEqual({ code: "model_error", message: "the model provider answered 500" });
    expect(lastAssistant(view).status).toBe("failed");
    // the next turn clears the error
    expect(applyAction(view, { type: "send", text: "again" }).error).toBeUndefined();
  });

  it("a request refused before any frame drops the empty assistant turn", () => {
    const view = reduce(initialView(CONTEXT_ID), [
      { type: "send", text: "hello" },
      { type: "fail", error: { code: "interrupt_pending", message: "answer int-1 first" } },
    ]);
    expect(view.status).toBe("error");
    expect(view.error?.code).toBe("interrupt_pending");
    expect(view.turns.map((t) => t.role)).toEqual(["user"]);
    expect(view.contextId).toBe(CONTEXT_ID);
  });

  it("stop keeps the partial answer, marked stopped; a stop when idle changes nothing", () => {
    const partial = reduce(initialView(), [{ type: "send", text: "time?" }, ...frames(framesOf(timeRun.slice(0, 9)))]);
    const stopped = applyAction(partial, { type: "stop" });
    expect(stopped.status).toBe("idle");
    expect(lastAssistant(stopped)).toMatchObject({ status: "stopped", text: "It is " });
    expect(applyAction(stopped, { type: "stop" })).toBe(stopped);
  });

  it("frames of a run this view did not start get an assistant turn of their own", () => {
    const view = reduce(initialView(CONTEXT_ID), frames(framesOf(timeRun)));
    expect(view.turns).toHaveLength(1);
    expect(lastAssistant(view).text).toBe("It is 14:05 UTC — café ☕ 🙂.");
  });

  it("reset empties the view, keeping a given context id", () => {
    const view = reduce(initialView(), [{ type: "send", text: "time?" }, ...frames(framesOf(timeRun))]);
    expect(applyAction(view, { type: "reset" })).toEqual(initialView());
    expect(applyAction(view, { type: "reset", contextId: "ctx-other" }).contextId).toBe("ctx-other");
  });
});

describe("AgentStore", () => {
  it("notifies subscribers on change only, and stops after unsubscribe", () => {
    const store = new AgentStore();
    let calls = 0;
    const unsubscribe = store.subscribe(() => {
      calls += 1;
    });
    const first = store.getSnapshot();
    store.dispatch({ type: "stop" }); // idle: nothing changes
    expect(calls).toBe(0);
    expect(store.getSnapshot()).toBe(first);
    store.dispatch({ type: "send", text: "hi" });
    store.applyFrame(framesOf(timeRun)[0] as StreamFrame);
    expect(calls).toBe(2);
    expect(store.getSnapshot().contextId).toBe(CONTEXT_ID);
    unsubscribe();
    store.dispatch({ type: "reset" });
    expect(calls).toBe(2);
  });
});
