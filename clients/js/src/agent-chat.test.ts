import { afterEach, describe, expect, it } from "vitest";

import {
  approvalRun,
  approvedRun,
  CONTEXT_ID,
  INTERRUPT_ID,
  RUN_ID,
  timeRun,
} from "../tests/support/frames.js";
import { type Handler, type Stub, startStub, withoutConversations, writeJSON, writeSSE } from "../tests/support/stub-server.js";
import { AgentChat, describeDecision } from "./agent-chat.js";
import type { Interrupt } from "./types.js";

let stub: Stub | undefined;

afterEach(async () => {
  await stub?.close();
  stub = undefined;
});

async function chatWith(handler: Handler, contextId?: string): Promise<{ chat: AgentChat; server: Stub }> {
  stub = await startStub(withoutConversations(handler));
  const chat = new AgentChat({
    url: stub.url,
    agent: "demo",
    retry: { attempts: 1, delayMs: 1 },
    ...(contextId === undefined ? {} : { contextId }),
  });
  return { chat, server: stub };
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected a rejection");
}

describe("AgentChat", () => {
  it("streams a turn into the view and resolves with the SendResult", async () => {
    const { chat } = await chatWith((_request, response) => writeSSE(response, timeRun));
    const snapshots: string[] = [];
    chat.subscribe(() => snapshots.push(chat.getSnapshot().status));
    const result = await chat.send("What time is it?");
    expect(result).toEqual({
      contextId: CONTEXT_ID,
      runId: RUN_ID,
      status: "completed",
      text: "It is 14:05 UTC — café ☕ 🙂.",
      toolCalls: ["current_time"],
    });
    const view = chat.getSnapshot();
    expect(view.status).toBe("idle");
    expect(view.turns.map((t) => t.text)).toEqual(["What time is it?", result.text]);
    expect(chat.contextRef.current).toBe(CONTEXT_ID);
    expect(snapshots[0]).toBe("streaming");
    expect(snapshots.at(-1)).toBe("idle");
    expect(snapshots.length).toBeGreaterThan(timeRun.length); // one update per frame
  });

  it("refuses a second turn while one is in flight", async () => {
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const { chat } = await chatWith(async (_request, response) => {
      await held;
      await writeSSE(response, timeRun);
    });
    const first = chat.send("one");
    expect(await rejection(chat.send("two"))).toMatchObject({ code: "busy" });
    release();
    await first;
    expect(chat.getSnapshot().turns).toHaveLength(2);
  });

  it("stop aborts the local stream, keeps the partial answer and allows the next turn", async () => {
    const { chat, server } = await chatWith(async (_request, response, index) => {
      if (index === 0) {
        response.writeHead(200, { "Content-Type": "text/event-stream" });
        for (const r of timeRun.slice(0, 9)) response.write(`id: ${r.id}\ndata: ${JSON.stringify(r.frame)}\n\n`);
        return; // the run "goes on" and never finishes here
      }
      await writeSSE(response, timeRun);
    });
    const pending = chat.send("What time is it?");
    await new Promise<void>((resolve) => {
      const off = chat.subscribe(() => {
        if (chat.getSnapshot().turns.at(-1)?.text === "It is ") {
          off();
          resolve();
        }
      });
    });
    await chat.stop(); // this server cannot cancel (404): the local stream stops
    expect(await rejection(pending)).toMatchObject({ name: "AbortError" });
    const view = chat.getSnapshot();
    expect(view.status).toBe("idle");
    expect(view.turns.at(-1)).toMatchObject({ role: "assistant", status: "stopped", text: "It is " });
    expect(view.error).toBeUndefined();
    await chat.send("again");
    expect(server.requests.filter((r) => r.path === "/agents/demo/stream")).toHaveLength(2);
  });

  it("puts a refused turn's error in the view and rejects with it", async () => {
    const { chat } = await chatWith(
      (_request, response) =>
        writeJSON(response, 409, { error: { code: "interrupt_pending", message: `answer ${INTERRUPT_ID}` } }),
      CONTEXT_ID,
    );
    expect(await rejection(chat.send("hello"))).toMatchObject({ code: "interrupt_pending", status: 409 });
    expect(chat.getSnapshot()).toMatchObject({
      status: "error",
      error: { code: "interrupt_pending", message: `answer ${INTERRUPT_ID}` },
    });
  });

  it("resumes the pending interrupt with the decision's words in the transcript", async () => {
    const { chat, server } = await chatWith((request, response) =>
      writeSSE(response, request.body.includes("resume") ? approvedRun : approvalRun),
    );
    const suspended = await chat.send("Delete notes.txt");
    expect(suspended.status).toBe("suspended");
    expect(chat.getSnapshot().pendingInterrupt?.id).toBe(INTERRUPT_ID);
    const done = await chat.resume({ approved: true });
    expect(done.toolCalls).toEqual(["delete_file"]);
    expect(chat.getSnapshot().turns.map((t) => t.text)).toEqual([
      "Delete notes.txt",
      "",
      "Approved delete_file",
      "Done: deleted notes.txt.",
    ]);
    expect(JSON.parse(server.requests[1]?.body ?? "")).toEqual({
      resume: { interruptId: INTERRUPT_ID, decision: { approved: true } },
      contextId: CONTEXT_ID,
    });
    expect(await rejection(chat.resume({ approved: true }))).toMatchObject({ code: "no_interrupt" });
  });

  it("attach follows the latest run; when there is none it leaves no error", async () => {
    const { chat, server } = await chatWith(async (_request, response, index) => {
      if (index === 0) return writeSSE(response, approvalRun);
      writeJSON(response, 404, { error: { code: "context_not_found", message: "no such context" } });
    }, CONTEXT_ID);
    await chat.attach();
    expect(server.requests[0]).toMatchObject({ method: "GET", path: `/agents/demo/contexts/${CONTEXT_ID}/stream` });
    expect(server.requests[0]?.headers["last-event-id"]).toBe("0");
    expect(chat.getSnapshot()).toMatchObject({ status: "suspended", pendingInterrupt: { id: INTERRUPT_ID } });
    chat.reset(CONTEXT_ID);
    expect(await rejection(chat.attach())).toMatchObject({ code: "context_not_found" });
    expect(chat.getSnapshot()).toMatchObject({ status: "idle", error: undefined, turns: [] });
  });

  it("reset starts over locally; deleteContext forgets on the server too", async () => {
    const { chat, server } = await chatWith((_request, response) => {
      response.statusCode = 204;
      response.end();
    }, CONTEXT_ID);
    chat.reset();
    expect(chat.contextRef.current).toBeUndefined();
    expect(server.requests).toHaveLength(0);
    chat.reset(CONTEXT_ID);
    await chat.deleteContext();
    expect(server.requests[0]?.method).toBe("DELETE");
    expect(chat.getSnapshot().contextId).toBeUndefined();
  });
});

describe("describeDecision", () => {
  const approval: Interrupt = { id: "int-1", kind: "approval", tool: "delete_file" };
  const input: Interrupt = { id: "int-2", kind: "input", prompt: "How was your day?" };

  it.each([
    [approval, { approved: true }, "Approved delete_file"],
    [approval, { approved: false }, "Rejected delete_file"],
    [approval, { approved: false, reason: "keep it" }, "Rejected delete_file: keep it"],
    [approval, { cancel: true }, "Cancelled"],
    [input, "Great, thanks", "Great, thanks"],
    [input, { mood: "good" }, '{"mood":"good"}'],
  ] as const)("%# words a decision", (interrupt, decision, words) => {
    expect(describeDecision(interrupt, decision)).toBe(words);
  });
});
