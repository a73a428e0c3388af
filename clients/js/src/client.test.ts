import { afterEach, describe, expect, it } from "vitest";

import {
  APPROVAL_RUN_ID,
  approvalRun,
  approvedRun,
  CONTEXT_ID,
  INTERRUPT_ID,
  RUN_ID,
  framesOf,
  timeRun,
} from "../tests/support/frames.js";
import { type Handler, type Stub, startStub, writeJSON, writeSSE } from "../tests/support/stub-server.js";
import { AgentClient, type AgentClientOptions, listAgents, newIdempotencyKey } from "./client.js";
import { AgentError } from "./errors.js";
import type { StreamFrame } from "./types.js";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

let stub: Stub | undefined;

afterEach(async () => {
  await stub?.close();
  stub = undefined;
});

async function serve(handler: Handler): Promise<Stub> {
  stub = await startStub(handler);
  return stub;
}

function client(server: Stub, options: Partial<AgentClientOptions> = {}): AgentClient {
  return new AgentClient({ url: server.url, agent: "demo", retry: { attempts: 3, delayMs: 5 }, ...options });
}

async function collect(frames: AsyncIterable<StreamFrame>): Promise<StreamFrame[]> {
  const out: StreamFrame[] = [];
  for await (const frame of frames) out.push(frame);
  return out;
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected a rejection");
}

/** Serve the recorded run on POST /stream and replay it after Last-Event-ID on GET. */
function replaying(options: { dropAfter: number; endCleanly?: boolean; overlap?: number }): Handler {
  return async (request, response) => {
    if (request.method === "POST") {
      await writeSSE(response, timeRun, { dropAfter: options.dropAfter, endCleanly: options.endCleanly ?? false });
      return;
    }
    const after = Number(request.headers["last-event-id"]);
    // a server may replay a little more than asked; the client must drop what it has seen
    await writeSSE(response, timeRun.filter((r) => r.id > after - (options.overlap ?? 0)));
  };
}

describe("AgentClient.stream", () => {
  it("yields typed frames, captures the context id from the first frame, and posts it back", async () => {
    const server = await serve((_request, response) => writeSSE(response, timeRun, { split: true }));
    const seen: (string | undefined)[] = [];
    const agent = client(server, { onContext: (id) => seen.push(id) });

    const frames = await collect(agent.stream("What time is it?"));
    expect(frames).toEqual(framesOf(timeRun));
    expect(agent.contextId).toBe(CONTEXT_ID);
    expect(seen).toEqual([CONTEXT_ID]);

    await collect(agent.stream("And now?"));
    const [first, second] = server.requests;
    expect(first?.method).toBe("POST");
    expect(first?.path).toBe("/agents/demo/stream");
    expect(first?.headers["content-type"]).toBe("application/json");
    expect(first?.headers["accept"]).toBe("text/event-stream");
    expect(JSON.parse(first?.body ?? "")).toEqual({ message: "What time is it?" });
    expect(JSON.parse(second?.body ?? "")).toEqual({ message: "And now?", contextId: CONTEXT_ID });
    expect(seen).toEqual([CONTEXT_ID]); // unchanged id: no second call
  });

  it("sends a fresh UUID Idempotency-Key per turn and the configured headers", async () => {
    const server = await serve((_request, response) => writeSSE(response, timeRun));
    let token = 0;
    const agent = client(server, { headers: () => ({ Authorization: `Bearer t${++token}` }) });
    await collect(agent.stream("one"));
    await collect(agent.stream("two"));
    const [a, b] = server.requests;
    expect(a?.headers["idempotency-key"]).toMatch(UUID);
    expect(b?.headers["idempotency-key"]).toMatch(UUID);
    expect(a?.headers["idempotency-key"]).not.toBe(b?.headers["idempotency-key"]);
    expect([a?.headers["authorization"], b?.headers["authorization"]]).toEqual(["Bearer t1", "Bearer t2"]);
  });

  it("reconnects with Last-Event-ID after a dropped connection: no frame lost or repeated", async () => {
    const server = await serve(replaying({ dropAfter: 4, overlap: 2 }));
    const frames = await collect(client(server).stream("What time is it?"));
    expect(frames).toEqual(framesOf(timeRun));
    expect(server.requests.map((r) => `${r.method} ${r.path}`)).toEqual([
      "POST /agents/demo/stream",
      `GET /agents/demo/contexts/${CONTEXT_ID}/stream`,
    ]);
    expect(server.requests[1]?.headers["last-event-id"]).toBe("4");
    expect(server.requests[1]?.headers["accept"]).toBe("text/event-stream");
  });

  it("reconnects when the stream ends cleanly before its done frame", async () => {
    const server = await serve(replaying({ dropAfter: 9, endCleanly: true }));
    const frames = await collect(client(server).stream("What time is it?"));
    expect(frames).toEqual(framesOf(timeRun));
    expect(server.requests[1]?.headers["last-event-id"]).toBe("9");
  });

  it("reconnects again when the replay drops too, resuming from the newest frame", async () => {
    const server = await serve(async (request, response, index) => {
      if (index === 0) return writeSSE(response, timeRun, { dropAfter: 3 });
      const after = Number(request.headers["last-event-id"]);
      const rest = timeRun.filter((r) => r.id > after);
      return writeSSE(response, rest, index === 1 ? { dropAfter: 4 } : {});
    });
    const frames = await collect(client(server).stream("What time is it?"));
    expect(frames).toEqual(framesOf(timeRun));
    expect(server.requests.map((r) => r.headers["last-event-id"])).toEqual([undefined, "3", "7"]);
  });

  it("repeats the POST with the same Idempotency-Key when it drops before any frame", async () => {
    const server = await serve(async (_request, response, index) => {
      if (index === 0) {
        response.socket?.destroy(); // the request never got an answer
        return;
      }
      await writeSSE(response, timeRun);
    });
    const frames = await collect(client(server).stream("What time is it?"));
    expect(frames).toEqual(framesOf(timeRun));
    const keys = server.requests.map((r) => r.headers["idempotency-key"]);
    expect(server.requests.map((r) => r.method)).toEqual(["POST", "POST"]);
    expect(keys[0]).toMatch(UUID);
    expect(keys[1]).toBe(keys[0]);
  });

  it("repeats the POST with the same key when the stream drops after its headers but before any frame", async () => {
    const server = await serve(async (_request, response, index) => {
      await writeSSE(response, timeRun, index === 0 ? { dropAfter: 0 } : {});
    });
    const frames = await collect(client(server).stream("What time is it?"));
    expect(frames).toEqual(framesOf(timeRun));
    expect(server.requests.map((r) => r.method)).toEqual(["POST", "POST"]);
    expect(server.requests[1]?.headers["idempotency-key"]).toBe(server.requests[0]?.headers["idempotency-key"]);
    expect(JSON.parse(server.requests[1]?.body ?? "")).toEqual({ message: "What time is it?" });
  });

  it("gives up with stream_lost when every reconnect drops again", async () => {
    const server = await serve(async (_request, response, index) => {
      await writeSSE(response, index === 0 ? timeRun : [], { dropAfter: index === 0 ? 2 : 0 });
    });
    const error = await rejection(collect(client(server, { retry: { attempts: 2, delayMs: 1 } }).stream("hi")));
    expect(error).toBeInstanceOf(AgentError);
    expect(error).toMatchObject({ code: "stream_lost", status: 0 });
    expect(server.requests).toHaveLength(3); // the POST and two reconnects
  });

  it("reports the server's error when the reconnect is refused", async () => {
    const server = await serve(async (request, response) => {
      if (request.method === "POST") return writeSSE(response, timeRun, { dropAfter: 2 });
      writeJSON(response, 404, { error: { code: "events_expired", message: "the run's events are gone" } });
    });
    const error = await rejection(collect(client(server).stream("hi")));
    expect(error).toMatchObject({ name: "AgentError", code: "events_expired", status: 404 });
  });

  it("refuses a replay that belongs to another run", async () => {
    const server = await serve(async (request, response) => {
      if (request.method === "POST") return writeSSE(response, timeRun, { dropAfter: 2 });
      return writeSSE(response, approvalRun.slice(2));
    });
    const error = await rejection(collect(client(server).stream("hi")));
    expect(error).toMatchObject({ code: "stream_lost" });
  });

  it("throws the server's error body as an AgentError with code and status", async () => {
    const server = await serve((_request, response) =>
      writeJSON(response, 409, { error: { code: "interrupt_pending", message: `answer ${INTERRUPT_ID} first` } }),
    );
    const agent = client(server, { contextId: CONTEXT_ID });
    const error = await rejection(collect(agent.stream("hello")));
    expect(error).toBeInstanceOf(AgentError);
    expect(error).toMatchObject({ code: "interrupt_pending", status: 409, message: `answer ${INTERRUPT_ID} first` });
    expect(server.requests).toHaveLength(1); // a 409 is an answer, not a failure to retry
  });

  it("names an error without a JSON body after its HTTP status", async () => {
    const server = await serve((_request, response) => {
      response.writeHead(500, { "Content-Type": "text/plain" });
      response.end("boom");
    });
    const error = await rejection(collect(client(server).stream("hello")));
    expect(error).toMatchObject({ code: "http_500", status: 500 });
  });

  it("stops on abort without reconnecting, and cancels the response", async () => {
    let closed = false;
    const server = await serve(async (_request, response) => {
      response.on("close", () => {
        closed = true;
      });
      response.writeHead(200, { "Content-Type": "text/event-stream" });
      response.write(`id: 1\ndata: ${JSON.stringify(timeRun[0]?.frame)}\n\n`); // then nothing more
    });
    const controller = new AbortController();
    const frames: StreamFrame[] = [];
    const error = await rejection(
      (async () => {
        for await (const frame of client(server).stream("hi", { signal: controller.signal })) {
          frames.push(frame);
          controller.abort();
        }
      })(),
    );
    expect(frames).toHaveLength(1);
    expect(error).toMatchObject({ name: "AbortError" });
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(closed).toBe(true);
    expect(server.requests).toHaveLength(1);
  });

  it("rejects a frame that is not SPEC-shaped with invalid_response", async () => {
    const server = await serve((_request, response) => {
      response.writeHead(200, { "Content-Type": "text/event-stream" });
      response.end('id: 1\ndata: {"runId":"r","event":{"type":"step","step":1}}\n\n');
    });
    expect(await rejection(collect(client(server).stream("hi")))).toMatchObject({ code: "invalid_response" });
  });
});

describe("AgentClient.send, resume and deleteContext", () => {
  const result = { contextId: CONTEXT_ID, runId: RUN_ID, status: "completed", text: "It is 14:05.", toolCalls: ["current_time"] };

  it("posts to /send and resolves with the SendResult", async () => {
    const server = await serve((_request, response) => writeJSON(response, 200, result));
    const agent = client(server);
    expect(await agent.send("What time is it?")).toEqual(result);
    expect(agent.contextId).toBe(CONTEXT_ID);
    expect(server.requests[0]?.path).toBe("/agents/demo/send");
    expect(server.requests[0]?.headers["accept"]).toBe("application/json");
  });

  it("retries a 503 and a dropped connection with the same Idempotency-Key", async () => {
    const server = await serve((_request, response, index) => {
      if (index === 0) return writeJSON(response, 503, { error: { code: "unavailable", message: "starting" } });
      if (index === 1) return void response.socket?.destroy();
      writeJSON(response, 200, result);
    });
    expect(await client(server).send("hi")).toEqual(result);
    const keys = new Set(server.requests.map((r) => r.headers["idempotency-key"]));
    expect(server.requests).toHaveLength(3);
    expect(keys.size).toBe(1);
  });

  it("fails with network_error when the server cannot be reached", async () => {
    const server = await serve(() => undefined);
    const url = server.url;
    await server.close();
    stub = undefined;
    const agent = new AgentClient({ url, agent: "demo", retry: { attempts: 1, delayMs: 1 } });
    expect(await rejection(agent.send("hi"))).toMatchObject({ code: "network_error", status: 0 });
  });

  it("resumes an interrupt with the SPEC body, streaming the rest of the run", async () => {
    const server = await serve((_request, response) => writeSSE(response, approvedRun));
    const agent = client(server, { contextId: CONTEXT_ID });
    const frames = await collect(agent.resumeStream(INTERRUPT_ID, { approved: true }));
    expect(frames.at(-1)).toMatchObject({ done: true, runId: APPROVAL_RUN_ID, toolCalls: ["delete_file"] });
    expect(JSON.parse(server.requests[0]?.body ?? "")).toEqual({
      resume: { interruptId: INTERRUPT_ID, decision: { approved: true } },
      contextId: CONTEXT_ID,
    });
    expect(server.requests[0]?.headers["idempotency-key"]).toMatch(UUID);
  });

  it("resume (non-streaming) posts a rejection with its reason to /send", async () => {
    const server = await serve((_request, response) => writeJSON(response, 200, { ...result, toolCalls: [] }));
    const agent = client(server, { contextId: CONTEXT_ID });
    await agent.resume(INTERRUPT_ID, { approved: false, reason: "keep it" });
    expect(server.requests[0]?.path).toBe("/agents/demo/send");
    expect(JSON.parse(server.requests[0]?.body ?? "")).toMatchObject({
      resume: { interruptId: INTERRUPT_ID, decision: { approved: false, reason: "keep it" } },
    });
  });

  it("cannot resume without a context", async () => {
    const server = await serve((_request, response) => writeJSON(response, 200, result));
    expect(await rejection(client(server).resume(INTERRUPT_ID, { approved: true }))).toMatchObject({
      code: "no_context",
    });
    expect(server.requests).toHaveLength(0);
  });

  it("deleteContext sends DELETE, drops the id, and treats 404 as already gone", async () => {
    const server = await serve((_request, response, index) => {
      response.statusCode = index === 0 ? 204 : 404;
      response.end();
    });
    const ids: (string | undefined)[] = [];
    const agent = client(server, { contextId: "ctx-a/b", onContext: (id) => ids.push(id) });
    await agent.deleteContext();
    expect(server.requests[0]).toMatchObject({ method: "DELETE", path: "/agents/demo/contexts/ctx-a%2Fb" });
    expect(agent.contextId).toBeUndefined();
    expect(ids).toEqual([undefined]);
    await agent.deleteContext(); // no id: nothing to do
    expect(server.requests).toHaveLength(1);
    agent.reset(CONTEXT_ID);
    await agent.deleteContext(); // 404
    expect(agent.contextId).toBeUndefined();
  });

  it("lists the agents of GET /agents", async () => {
    const server = await serve((_request, response) =>
      writeJSON(response, 200, { agents: [{ name: "assistant", description: "", skills: [], a2a: "/a2a" }] }),
    );
    expect((await listAgents({ url: `${server.url}/` })).map((a) => a.name)).toEqual(["assistant"]);
    expect(server.requests[0]?.path).toBe("/agents");
  });
});

describe("newIdempotencyKey", () => {
  it("is a version 4 UUID, also without crypto.randomUUID", () => {
    expect(newIdempotencyKey()).toMatch(UUID);
    const original = crypto.randomUUID;
    try {
      Object.defineProperty(crypto, "randomUUID", { value: undefined, configurable: true });
      const keys = new Set(Array.from({ length: 50 }, () => newIdempotencyKey()));
      expect(keys.size).toBe(50);
      for (const key of keys) expect(key).toMatch(UUID);
    } finally {
      Object.defineProperty(crypto, "randomUUID", { value: original, configurable: true });
    }
  });
});
