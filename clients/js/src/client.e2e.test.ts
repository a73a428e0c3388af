/**
 * AgentClient and AgentChat against a real `agentkeel serve` running the offline demo
 * model: the wire as the Python server writes it, reconnects, idempotent retries,
 * human-in-the-loop and restarts.
 */

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import {
  type RunningServer,
  reportSkip,
  serveUnavailable,
  startAgentkeel,
} from "../tests/support/agentkeel-server.js";
import { AgentChat } from "./agent-chat.js";
import { AgentClient, listAgents } from "./client.js";
import { AgentError } from "./errors.js";
import { decodeSSE } from "./sse.js";
import { type DoneFrame, type StreamFrame, isDoneFrame, parseStreamFrame } from "./types.js";

const skip = serveUnavailable();
reportSkip(skip, "client.e2e.test.ts");

let server: RunningServer;

async function collect(frames: AsyncIterable<StreamFrame>): Promise<StreamFrame[]> {
  const out: StreamFrame[] = [];
  for await (const frame of frames) out.push(frame);
  return out;
}

function done(frames: StreamFrame[]): DoneFrame {
  const last = frames.at(-1);
  if (last === undefined || !isDoneFrame(last)) throw new Error("the stream did not end with a done frame");
  return last;
}

function tokens(frames: StreamFrame[]): string {
  return frames.map((f) => ("event" in f && f.event.type === "token" ? f.event.text : "")).join("");
}

function client(options: { contextId?: string; fetch?: typeof fetch } = {}): AgentClient {
  return new AgentClient({ url: server.url, agent: "demo", retry: { attempts: 3, delayMs: 50 }, ...options });
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected a rejection");
}

/**
 * A fetch that cuts the body of the first `POST .../stream` response after `frames`
 * complete SSE frames, as a dropped connection would; every request is recorded.
 */
function cuttingFetch(frames: number, seen: { method: string; url: string; lastEventId: string | null }[]) {
  let cut = false;
  return async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const url = String(input);
    const headers = new Headers(init?.headers);
    seen.push({ method: init?.method ?? "GET", url, lastEventId: headers.get("last-event-id") });
    const response = await fetch(input, init);
    if (cut || init?.method !== "POST" || !url.endsWith("/stream") || response.body === null) return response;
    cut = true;
    const reader = response.body.getReader();
    let pending = "";
    let count = 0;
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        const { done: finished, value } = await reader.read();
        if (finished) return controller.close();
        const text = new TextDecoder().decode(value);
        pending += text;
        const complete = pending.split("\n\n");
        pending = complete.pop() ?? "";
        const keep = complete.filter((block) => block.includes("data:")).slice(0, frames - count);
        count += keep.length;
        if (keep.length > 0) controller.enqueue(new TextEncoder().encode(keep.map((b) => `${b}\n\n`).join("")));
        if (count >= frames) {
          await reader.cancel();
          controller.error(new TypeError("terminated")); // the connection drops
        }
      },
    });
    return new Response(body, { status: response.status, headers: response.headers });
  };
}

describe.skipIf(skip !== undefined)("against agentkeel serve", () => {
  beforeAll(async () => {
    server = await startAgentkeel();
  });

  afterAll(async () => {
    await server?.dispose();
  });

  it("lists the demo agent", async () => {
    const agents = await listAgents({ url: server.url });
    expect(agents[0]?.name).toBe("demo");
    expect(agents[0]?.skills).toContain("current_time");
  });

  it("writes SPEC frames: ids from 1 without gaps, contextId on every frame, a final done frame", async () => {
    const response = await fetch(`${server.url}/agents/demo/stream`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ message: "What time is it?" }),
    });
    expect(response.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const ids: number[] = [];
    const frames: StreamFrame[] = [];
    for await (const sse of decodeSSE(response.body as ReadableStream<Uint8Array>)) {
      ids.push(Number(sse.id));
      const frame = parseStreamFrame(sse.data);
      if (frame !== undefined) frames.push(frame);
    }
    expect(ids).toEqual(ids.map((_, i) => i + 1));
    expect(frames).toHaveLength(ids.length);
    const contextId = frames[0]?.contextId ?? "";
    expect(contextId).toMatch(/^ctx-[0-9a-f]{36}$/);
    expect(frames.every((f) => f.contextId === contextId)).toBe(true);
    expect(frames[0]).toMatchObject({ event: { type: "status", status: "running" } });
  });

  it("streams a tool call and tokens whose text the done frame confirms", async () => {
    const agent = client();
    const frames = await collect(agent.stream("What time is it?"));
    const types = frames.map((f) => ("event" in f ? f.event.type : "done"));
    expect(types.indexOf("tool_call")).toBeLessThan(types.indexOf("tool_result"));
    expect(types.indexOf("tool_result")).toBeLessThan(types.indexOf("token"));
    expect(frames).toContainEqual(expect.objectContaining({ event: expect.objectContaining({ type: "tool_call", name: "current_time" }) }));
    const last = done(frames);
    expect(last).toMatchObject({ status: "completed", toolCalls: ["current_time"] });
    expect(last.text).toMatch(/^It is /);
    expect(tokens(frames)).toBe(last.text);
    expect(agent.contextId).toBe(last.contextId);
  });

  it("continues the conversation: the server remembers, the client holds only the id", async () => {
    const agent = client();
    const first = await agent.send("Remember that my favourite colour is blue");
    expect(first.toolCalls).toEqual(["write_state"]);
    const second = await agent.send("What is my favourite colour?");
    expect(second.contextId).toBe(first.contextId);
    expect(second.text).toContain("blue");
    // a new client given the id continues the same conversation
    const again = await client({ contextId: first.contextId }).send("What is my favourite colour?");
    expect(again.text).toContain("blue");
    // and a fresh one does not know it
    expect((await client().send("What is my favourite colour?")).text).not.toContain("blue");
  });

  it("reconnects with Last-Event-ID after a drop, losing and repeating nothing", async () => {
    const prompt = "Remember that my favourite colour is blue"; // a deterministic answer
    const reference = await collect(client().stream(prompt));
    const seen: { method: string; url: string; lastEventId: string | null }[] = [];
    const agent = client({ fetch: cuttingFetch(5, seen) });
    const frames = await collect(agent.stream(prompt));
    expect(seen.map((r) => r.method)).toEqual(["POST", "GET"]);
    expect(seen[1]?.url).toBe(`${server.url}/agents/demo/contexts/${agent.contextId}/stream`);
    expect(seen[1]?.lastEventId).toBe("5");
    // the same run, frame for frame, as an uninterrupted stream of the same prompt
    const shape = (list: StreamFrame[]) =>
      list.map((f) => ("event" in f ? `${f.event.type}:${"text" in f.event ? f.event.text : ""}` : "done"));
    expect(shape(frames)).toEqual(shape(reference));
    expect(new Set(frames.map((f) => f.runId)).size).toBe(1);
    expect(tokens(frames)).toBe(done(frames).text);
  });

  it("retries with the same Idempotency-Key and gets the original run back", async () => {
    const agent = client();
    await agent.send("Remember that my pet is a cat");
    let firstRunId: string | undefined;
    let posts = 0;
    const flaky = client({
      contextId: agent.contextId ?? "",
      fetch: async (input, init) => {
        const response = await fetch(input, init);
        posts += 1;
        if (posts === 1) {
          // the server ran the turn, but its answer is lost on the way
          firstRunId = ((await response.json()) as { runId: string }).runId;
          throw new TypeError("fetch failed");
        }
        return response;
      },
    });
    const result = await flaky.send("Remember that my pet is a dog");
    expect(posts).toBe(2);
    expect(result.runId).toBe(firstRunId);
  });

  it("suspends for an approval, refuses other messages meanwhile, and resumes the same run", async () => {
    const agent = client();
    const suspended = done(await collect(agent.stream("Delete notes.txt")));
    expect(suspended).toMatchObject({ status: "suspended", interrupt: { kind: "approval", tool: "delete_file" } });
    const interrupt = suspended.interrupt;
    if (interrupt === undefined) throw new Error("no interrupt");

    const refused = await rejection(agent.send("What time is it?"));
    expect(refused).toBeInstanceOf(AgentError);
    expect(refused).toMatchObject({ code: "interrupt_pending", status: 409 });

    const frames = await collect(agent.resumeStream(interrupt.id, { approved: true }));
    const result = done(frames);
    expect(result).toMatchObject({ status: "completed", runId: suspended.runId, toolCalls: ["delete_file"] });
    expect(frames).toContainEqual(
      expect.objectContaining({ event: { type: "tool_result", id: expect.any(String), name: "delete_file", status: "success" } }),
    );
  });

  it("a rejection reaches the model with its reason; the tool does not run", async () => {
    const agent = client();
    const suspended = await agent.send("Delete notes.txt");
    const id = suspended.interrupt?.id ?? "";
    const result = await agent.resume(id, { approved: false, reason: "I still need it" });
    expect(result.status).toBe("completed");
    expect(result.toolCalls).toEqual([]);
    expect(result.text).toContain("I still need it");
  });

  it("answers an input interrupt", async () => {
    const agent = client();
    const suspended = await agent.send("Ask me about my day");
    expect(suspended.interrupt).toMatchObject({ kind: "input" });
    expect(suspended.interrupt?.prompt).toMatch(/day/);
    const result = await agent.resume(suspended.interrupt?.id ?? "", "Sunny and calm");
    expect(result.status).toBe("completed");
    expect(result.text).toContain("Sunny and calm");
  });

  it("reports wire errors as AgentError with the server's code and status", async () => {
    const unknown = new AgentClient({ url: server.url, agent: "nobody", retry: { attempts: 0 } });
    expect(await rejection(unknown.send("hi"))).toMatchObject({ status: 404 });
    const bad = client({ contextId: "../etc/passwd" });
    expect(await rejection(bad.send("hi"))).toMatchObject({ code: "invalid_context_id", status: 400 });
  });

  it("deleteContext forgets the conversation on the server", async () => {
    const agent = client();
    const first = await agent.send("Remember that my favourite colour is green");
    await agent.deleteContext();
    expect(agent.contextId).toBeUndefined();
    const reused = await client({ contextId: first.contextId }).send("What is my favourite colour?");
    expect(reused.text).not.toContain("green");
  });

  it("AgentChat.attach replays the latest run of a conversation (a page reload)", async () => {
    const agent = client();
    const suspended = await agent.send("Delete notes.txt");
    const chat = new AgentChat({ url: server.url, agent: "demo", contextId: suspended.contextId });
    const replayed = await chat.attach();
    expect(replayed).toMatchObject({ status: "suspended", runId: suspended.runId });
    expect(chat.getSnapshot()).toMatchObject({ status: "suspended", pendingInterrupt: { id: suspended.interrupt?.id } });
    const result = await chat.resume({ approved: true });
    expect(result.toolCalls).toEqual(["delete_file"]);
  });

  it("survives a server restart: history and a suspended run come back from disk", async () => {
    const agent = client();
    await agent.send("Remember that my favourite colour is purple");
    const remembered = new AgentClient({ url: server.url, agent: "demo", contextId: agent.contextId ?? "" });
    const approver = client();
    const suspended = await approver.send("Delete notes.txt");

    await server.restart();

    expect((await remembered.send("What is my favourite colour?")).text).toContain("purple");
    const resumed = await approver.resume(suspended.interrupt?.id ?? "", { approved: true });
    expect(resumed).toMatchObject({ status: "completed", runId: suspended.runId, toolCalls: ["delete_file"] });
  });
});
