/**
 * Recorded runs, frame for frame as SPEC section 4 writes them: per-run ids from 1,
 * `contextId` on every frame, a final `done` frame carrying the SendResult.
 */

import type { DoneFrame, EventFrame, RunEvent, StreamFrame } from "../../src/types.js";

export const CONTEXT_ID = "ctx-3f9a1c2e4b5d6f708192a3b4c5d6e7f80912";
export const RUN_ID = "run-5c8e2a4f6b7d9e0f1a2b3c4d";
export const APPROVAL_RUN_ID = "run-0a1b2c3d4e5f60718293a4b5";
export const INTERRUPT_ID = "int-7e6d5c4b3a2910ffeeddccbbaa998877";

/** A frame with its SSE id, as the server numbers them. */
export interface Recorded {
  id: number;
  frame: StreamFrame;
}

function events(runId: string, firstId: number, list: RunEvent[]): Recorded[] {
  return list.map((event, i) => ({
    id: firstId + i,
    frame: { contextId: CONTEXT_ID, runId, event } satisfies EventFrame,
  }));
}

function done(runId: string, id: number, result: Omit<DoneFrame, "contextId" | "runId" | "done">): Recorded {
  return { id, frame: { contextId: CONTEXT_ID, runId, done: true, ...result } };
}

/** "What time is it?": thinking, a current_time call, tokens, done. */
export const timeRun: Recorded[] = [
  ...events(RUN_ID, 1, [
    { type: "status", status: "running" },
    { type: "step", step: 1 },
    { type: "thinking", text: "The user wants to know the time," },
    { type: "thinking", text: " so I will call current_time." },
    { type: "tool_call", id: "call-demo-1", name: "current_time" },
    { type: "tool_result", id: "call-demo-1", name: "current_time", status: "success" },
    { type: "step", step: 2 },
    { type: "thinking", text: "The current_time tool answered." },
    { type: "token", text: "It is " },
    { type: "token", text: "14:05 " },
    { type: "token", text: "UTC — café ☕ 🙂." },
  ]),
  done(RUN_ID, 12, {
    status: "completed",
    text: "It is 14:05 UTC — café ☕ 🙂.",
    toolCalls: ["current_time"],
  }),
];

/** "Delete notes.txt": the run suspends for an approval of delete_file. */
export const approvalRun: Recorded[] = [
  ...events(APPROVAL_RUN_ID, 1, [
    { type: "status", status: "running" },
    { type: "step", step: 1 },
    { type: "thinking", text: "The user wants notes.txt deleted." },
    { type: "interrupt", id: INTERRUPT_ID, kind: "approval", tool: "delete_file", prompt: "Allow delete_file?" },
  ]),
  done(APPROVAL_RUN_ID, 5, {
    status: "suspended",
    text: "",
    toolCalls: [],
    interrupt: { id: INTERRUPT_ID, kind: "approval", tool: "delete_file", prompt: "Allow delete_file?" },
  }),
];

/** The same run after `{"approved": true}`: the frame ids go on from 6. */
export const approvedRun: Recorded[] = [
  ...events(APPROVAL_RUN_ID, 6, [
    { type: "status", status: "running" },
    { type: "tool_call", id: "call-demo-2", name: "delete_file" },
    { type: "tool_result", id: "call-demo-2", name: "delete_file", status: "success" },
    { type: "step", step: 2 },
    { type: "token", text: "Done: " },
    { type: "token", text: "deleted notes.txt." },
  ]),
  done(APPROVAL_RUN_ID, 12, { status: "completed", text: "Done: deleted notes.txt.", toolCalls: ["delete_file"] }),
];

/** A run whose model call fails. */
export const failedRun: Recorded[] = [
  ...events(RUN_ID, 1, [
    { type: "status", status: "running" },
    { type: "step", step: 1 },
    { type: "token", text: "Let me" },
    { type: "error", code: "model_error", message: "the model provider answered 500" },
  ]),
  done(RUN_ID, 5, {
    status: "failed",
    text: "",
    toolCalls: [],
    error: { code: "model_error", message: "the model provider answered 500" },
  }),
];

/** Encode recorded frames exactly as the server writes them. */
export function encode(frames: readonly Recorded[]): string {
  return frames.map(({ id, frame }) => `id: ${id}\ndata: ${JSON.stringify(frame)}\n\n`).join("");
}

/** The frames alone. */
export function framesOf(recorded: readonly Recorded[]): StreamFrame[] {
  return recorded.map((r) => r.frame);
}
