import { describe, expect, it } from "vitest";

import { CONTEXT_ID, RUN_ID, framesOf, timeRun } from "../tests/support/frames.js";
import { type AgentView, type StoreAction, applyAction, initialView, lastMessageId } from "./store.js";
import type { TranscriptMessage } from "./types.js";

function reduce(view: AgentView, actions: StoreAction[]): AgentView {
  return actions.reduce(applyAction, view);
}

function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null) {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
}

const msg = (n: number) => `msg-${n.toString(16).padStart(24, "0")}`;

/** The transcript of the recorded time run: the question, the tool call, the answer. */
const timeTranscript: TranscriptMessage[] = [
  { id: msg(1), role: "user", text: "What time is it?", toolCalls: [], runId: RUN_ID },
  { id: msg(2), role: "assistant", text: "", toolCalls: ["current_time"], runId: RUN_ID },
  { id: msg(3), role: "assistant", text: "It is 14:05 UTC — café ☕ 🙂.", toolCalls: [], runId: RUN_ID },
];

const earlier: TranscriptMessage[] = [
  { id: msg(10), role: "user", text: "Hello", runId: "run-a" },
  { id: msg(11), role: "assistant", text: "Hi!", runId: "run-a", agent: "triage" },
];

describe("the transcript in the reducer", () => {
  it("hydrates turns from a transcript: one assistant turn per run, with every message id", () => {
    const view = applyAction(deepFreeze(initialView(CONTEXT_ID)), { type: "transcript", messages: [...earlier, ...timeTranscript] });
    expect(view.turns.map((t) => [t.role, t.text, t.messageId])).toEqual([
      ["user", "Hello", msg(10)],
      ["assistant", "Hi!", msg(11)],
      ["user", "What time is it?", msg(1)],
      ["assistant", "It is 14:05 UTC — café ☕ 🙂.", msg(2)],
    ]);
    expect(view.turns[1]).toMatchObject({ agent: "triage", status: "completed", runId: "run-a" });
    expect(view.turns[3]).toMatchObject({ toolCalls: ["current_time"], messageIds: [msg(2), msg(3)], runId: RUN_ID });
    expect(view.status).toBe("idle");
    expect(lastMessageId(view)).toBe(msg(3));
    expect(lastMessageId(initialView())).toBeUndefined();
  });

  it("gives a streamed turn its ids after the last known one, keeping its live thinking and activity", () => {
    const hydrated = applyAction(initialView(CONTEXT_ID), { type: "transcript", messages: earlier });
    const streamed = deepFreeze(
      reduce(hydrated, [
        { type: "send", text: "What time is it?" },
        ...framesOf(timeRun).map((frame): StoreAction => ({ type: "frame", frame })),
      ]),
    );
    expect(streamed.turns.at(-1)?.messageId).toBeUndefined();
    const synced = applyAction(streamed, { type: "transcript", messages: timeTranscript, after: msg(11) });
    expect(synced.turns.slice(0, 2)).toEqual(hydrated.turns); // untouched
    const answer = synced.turns.at(-1);
    expect(answer).toMatchObject({ role: "assistant", messageId: msg(2), messageIds: [msg(2), msg(3)], status: "completed" });
    expect(answer?.role === "assistant" && answer.thinking).toContain("so I will call current_time.");
    expect(answer?.role === "assistant" && answer.activity).toEqual([
      { id: "call-demo-1", name: "current_time", status: "success" },
    ]);
    expect(synced.turns.at(-2)).toMatchObject({ role: "user", messageId: msg(1) });
    expect(synced.thinking).toBe(streamed.thinking);
    // an answer after an id the view no longer holds, or with nothing new, changes nothing
    expect(applyAction(synced, { type: "transcript", messages: timeTranscript, after: "msg-gone" })).toBe(synced);
    expect(applyAction(synced, { type: "transcript", messages: [], after: msg(3) })).toBe(synced);
  });

  it("edit drops the turns from that user message on and starts a turn with the new text", () => {
    const hydrated = deepFreeze(applyAction(initialView(CONTEXT_ID), { type: "transcript", messages: [...earlier, ...timeTranscript] }));
    const edited = applyAction(hydrated, { type: "edit", messageId: msg(1), text: "What day is it?" });
    expect(edited.turns.map((t) => [t.role, t.text])).toEqual([
      ["user", "Hello"],
      ["assistant", "Hi!"],
      ["user", "What day is it?"],
      ["assistant", ""],
    ]);
    expect(edited.status).toBe("streaming");
    expect(edited.turns.at(-1)).toMatchObject({ status: "streaming", messageId: undefined });
    expect(lastMessageId(edited)).toBe(msg(11));
  });

  it("regenerate drops the turns from that assistant message on and waits for a new answer", () => {
    const hydrated = deepFreeze(applyAction(initialView(CONTEXT_ID), { type: "transcript", messages: [...earlier, ...timeTranscript] }));
    const again = applyAction(hydrated, { type: "regenerate", messageId: msg(11) });
    expect(again.turns.map((t) => [t.role, t.text])).toEqual([
      ["user", "Hello"],
      ["assistant", ""],
    ]);
    expect(again).toMatchObject({ status: "streaming", thinking: "", activity: [], error: undefined });
    expect(lastMessageId(again)).toBe(msg(10));
  });

  it("a cancelled done frame ends the turn cancelled and the chat idle", () => {
    const started = applyAction(initialView(), { type: "send", text: "wait" });
    const done = applyAction(started, {
      type: "frame",
      frame: { contextId: CONTEXT_ID, runId: RUN_ID, done: true, status: "cancelled", text: "Part", toolCalls: [] },
    });
    expect(done.status).toBe("idle");
    expect(done.turns.at(-1)).toMatchObject({ status: "cancelled", text: "Part" });
  });

  it("keeps a turn the transcript does not hold (a cancelled run) where it was", () => {
    const cancelled = reduce(initialView(CONTEXT_ID), [
      { type: "send", text: "wait" },
      { type: "frame", frame: { contextId: CONTEXT_ID, runId: "run-x", done: true, status: "cancelled", text: "Par", toolCalls: [] } },
    ]);
    const synced = applyAction(deepFreeze(cancelled), { type: "transcript", messages: [] });
    expect(texts(synced)).toEqual([["user", "wait"], ["assistant", "Par"]]);
    const next = reduce(synced, [
      { type: "send", text: "What time is it?" },
      ...framesOf(timeRun).map((frame): StoreAction => ({ type: "frame", frame })),
      { type: "transcript", messages: timeTranscript },
    ]);
    expect(texts(next)).toEqual([
      ["user", "wait"],
      ["assistant", "Par"],
      ["user", "What time is it?"],
      ["assistant", "It is 14:05 UTC — café ☕ 🙂."],
    ]);
    expect(next.turns.map((t) => t.messageId)).toEqual([undefined, undefined, msg(1), msg(2)]);
  });
  it("keeps a decision the transcript does not hold, giving the run's turns their ids", () => {
    const run = "run-approve";
    const done = (status: "suspended" | "completed", text: string): StoreAction => ({
      type: "frame",
      frame: { contextId: CONTEXT_ID, runId: run, done: true, status, text, toolCalls: ["delete_file"] },
    });
    const live = deepFreeze(
      reduce(initialView(CONTEXT_ID), [
        { type: "send", text: "Delete notes.txt" },
        done("suspended", ""),
        { type: "resume", text: "Approved delete_file" },
        done("completed", "Deleted notes.txt."),
      ]),
    );
    const transcript: TranscriptMessage[] = [
      { id: msg(20), role: "user", text: "Delete notes.txt", runId: run },
      { id: msg(21), role: "assistant", text: "", toolCalls: ["delete_file"], runId: run },
      { id: msg(22), role: "assistant", text: "Deleted notes.txt.", toolCalls: [], runId: run },
    ];
    const synced = applyAction(live, { type: "transcript", messages: transcript });
    expect(texts(synced)).toEqual(texts(live));
    expect(synced.turns.map((t) => t.messageId)).toEqual([msg(20), msg(21), undefined, msg(22)]);
    expect(lastMessageId(synced)).toBe(msg(22));
    // a reload shows what the transcript holds, and no decision
    const reloaded = applyAction(initialView(CONTEXT_ID), { type: "transcript", messages: transcript });
    expect(texts(reloaded)).toEqual([["user", "Delete notes.txt"], ["assistant", "Deleted notes.txt."]]);
  });
});

function texts(view: AgentView): [string, string][] {
  return view.turns.map((t) => [t.role, t.text]);
}
