import { describe, expect, it } from "vitest";

import {
  APPROVAL_RUN_ID,
  approvalRun,
  CONTEXT_ID,
  encode,
  failedRun,
  INTERRUPT_ID,
  RUN_ID,
  timeRun,
} from "../tests/support/frames.js";
import { AgentError } from "./errors.js";
import { SSEDecoder } from "./sse.js";
import {
  RUN_EVENT_TYPES,
  isDoneFrame,
  parseAgentList,
  parseErrorBody,
  parseSendResult,
  parseStreamFrame,
  toSendResult,
} from "./types.js";

function roundTrip(text: string) {
  return new SSEDecoder().push(text).map((f) => parseStreamFrame(f.data));
}

describe("parseStreamFrame", () => {
  it("knows exactly the event types of the SPEC table", () => {
    expect([...RUN_EVENT_TYPES].sort()).toEqual(
      ["status", "step", "token", "thinking", "tool_call", "tool_result", "interrupt", "error"].sort(),
    );
  });

  it("parses every recorded frame back to the value the server sent", () => {
    for (const run of [timeRun, approvalRun, failedRun]) {
      expect(roundTrip(encode(run))).toEqual(run.map((r) => r.frame));
    }
  });

  it("tells done frames apart and turns them into a SendResult", () => {
    const last = parseStreamFrame(JSON.stringify(approvalRun.at(-1)?.frame));
    expect(last && isDoneFrame(last)).toBe(true);
    if (last === undefined || !isDoneFrame(last)) throw new Error("expected a done frame");
    expect(toSendResult(last)).toEqual({
      contextId: CONTEXT_ID,
      runId: APPROVAL_RUN_ID,
      status: "suspended",
      text: "",
      toolCalls: [],
      interrupt: { id: INTERRUPT_ID, kind: "approval", tool: "delete_file", prompt: "Allow delete_file?" },
    });
  });

  it("keeps an exposed tool's input and output, and has neither for other tools", () => {
    const call = { type: "tool_call", id: "call-1", name: "weather", input: { city: "Oslo" } };
    const result = { type: "tool_result", id: "call-1", name: "weather", status: "success", output: { celsius: 4 } };
    for (const event of [call, result]) {
      expect(parseStreamFrame(JSON.stringify({ contextId: CONTEXT_ID, runId: RUN_ID, event }))).toEqual({
        contextId: CONTEXT_ID,
        runId: RUN_ID,
        event,
      });
    }
    const plain = { type: "tool_call", id: "call-2", name: "lookup" };
    const parsed = parseStreamFrame(JSON.stringify({ contextId: CONTEXT_ID, runId: RUN_ID, event: plain }));
    expect(parsed).toEqual({ contextId: CONTEXT_ID, runId: RUN_ID, event: plain });
  });

  it("keeps a swarm member's `agent` and drops fields the SPEC does not name", () => {
    const frame = parseStreamFrame(
      JSON.stringify({
        contextId: CONTEXT_ID,
        runId: RUN_ID,
        agent: "researcher",
        secret: "x",
        event: { type: "token", text: "hi", agent: "researcher", extra: 1 },
      }),
    );
    expect(frame).toEqual({
      contextId: CONTEXT_ID,
      runId: RUN_ID,
      agent: "researcher",
      event: { type: "token", text: "hi", agent: "researcher" },
    });
  });

  it("skips an event type this client does not know", () => {
    const data = JSON.stringify({ contextId: CONTEXT_ID, runId: RUN_ID, event: { type: "usage", tokens: 3 } });
    expect(parseStreamFrame(data)).toBeUndefined();
  });

  it.each([
    ["not JSON", "{"],
    ["no contextId", JSON.stringify({ runId: RUN_ID, event: { type: "step", step: 1 } })],
    ["a bad status", JSON.stringify({ contextId: "c", runId: "r", event: { type: "tool_result", id: "1", name: "t", status: "ok" } })],
    ["a fractional step", JSON.stringify({ contextId: "c", runId: "r", event: { type: "step", step: 1.5 } })],
    ["a done frame without toolCalls", JSON.stringify({ contextId: "c", runId: "r", done: true, status: "completed", text: "" })],
    ["an event that is not an object", JSON.stringify({ contextId: "c", runId: "r", event: "token" })],
  ])("rejects %s with invalid_response", (_name, data) => {
    let caught: unknown;
    try {
      parseStreamFrame(data);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(AgentError);
    expect(caught).toMatchObject({ code: "invalid_response", status: 0 });
  });
});

describe("the other wire bodies", () => {
  it("parses a SendResult and refuses an unknown status", () => {
    const body = { contextId: "c", runId: "r", status: "completed", text: "hi", toolCalls: ["a", "b"] };
    expect(parseSendResult(body)).toEqual(body);
    expect(() => parseSendResult({ ...body, status: "done" })).toThrow(/result.status/);
  });

  it("reads usage, cost and a structured output", () => {
    const usage = { inputTokens: 30, outputTokens: 12, cachedTokens: 8, cost: 0.000195 };
    const output = { city: "Oslo", celsius: 4, tags: ["cold", null] };
    const body = { contextId: "c", runId: "r", status: "completed", text: "{}", toolCalls: [], usage, output };
    expect(parseSendResult(body)).toEqual(body);
    expect(() => parseSendResult({ ...body, usage: { inputTokens: "30", outputTokens: 1 } })).toThrow(
      /result.usage.inputTokens/,
    );
  });

  it("reads error bodies and nothing else", () => {
    expect(parseErrorBody({ error: { code: "interrupt_pending", message: "answer int-1 first" } })).toEqual({
      code: "interrupt_pending",
      message: "answer int-1 first",
    });
    expect(parseErrorBody({ detail: "Not Found" })).toBeUndefined();
    expect(parseErrorBody("oops")).toBeUndefined();
  });

  it("parses the agent list of GET /agents", () => {
    const body = { agents: [{ name: "assistant", description: "Helper", skills: ["current_time"], a2a: "/x" }] };
    expect(parseAgentList(body)).toEqual(body.agents);
    expect(() => parseAgentList({ agents: [{ description: "no name" }] })).toThrow(AgentError);
  });
});
