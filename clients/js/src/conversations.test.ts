import { afterEach, describe, expect, it } from "vitest";

import { type ConversationStub, startConversationStub } from "../tests/support/conversation-server.js";
import { collect, rejection } from "../tests/support/promises.js";
import { AgentClient } from "./client.js";
import { AgentError, ContextExistsError, MessageNotFoundError, NoActiveRunError } from "./errors.js";
import type { StreamFrame } from "./types.js";

let stub: ConversationStub | undefined;

afterEach(async () => {
  await stub?.close();
  stub = undefined;
});

async function serve(options: Parameters<typeof startConversationStub>[0] = {}): Promise<ConversationStub> {
  stub = await startConversationStub(options);
  return stub;
}

function client(server: ConversationStub, contextId?: string): AgentClient {
  return new AgentClient({
    url: server.url,
    agent: "demo",
    retry: { attempts: 1, delayMs: 1 },
    ...(contextId === undefined ? {} : { contextId }),
  });
}

describe("AgentClient conversations", () => {
  it("reads the transcript with stable message ids, a page at a time and all of it", async () => {
    const server = await serve();
    const agent = client(server);
    await agent.send("one");
    await agent.send("two");
    const page = await agent.messages();
    expect(page.messages.map((m) => [m.role, m.text])).toEqual([
      ["user", "one"],
      ["assistant", "Echo: one"],
      ["user", "two"],
      ["assistant", "Echo: two"],
    ]);
    expect(page.nextCursor).toBeUndefined();
    for (const message of page.messages) expect(message.id).toMatch(/^msg-[0-9a-f]{24}$/);

    const first = await agent.messages(agent.contextId, { limit: 3 });
    expect(first.messages).toHaveLength(3);
    expect(first.nextCursor).toBeDefined();
    const after = await agent.messages(agent.contextId, { after: page.messages[1]?.id ?? "", limit: 1 });
    expect(after.messages.map((m) => m.text)).toEqual(["two"]);

    const seen = server.requests.length;
    const all = await collect(agent.allMessages(agent.contextId, { limit: 1 }));
    expect(all).toEqual(page.messages);
    const messageRequests = server.requests.slice(seen).filter((r) => /\/messages\?.*limit=1\b/.test(r.path));
    expect(messageRequests).toHaveLength(4); // one page per message, following the last id
    expect(messageRequests[1]?.path).toContain(`after=${page.messages[0]?.id}`);
  });

  it("lists the caller's conversations, newest first, across pages, and reads one summary", async () => {
    const server = await serve();
    const ids: string[] = [];
    for (const text of ["first question", "second question", "third question"]) {
      const agent = client(server);
      ids.push((await agent.send(text)).contextId);
    }
    const page = await client(server).listContexts({ limit: 2 });
    expect(page.contexts.map((c) => c.contextId)).toEqual([ids[2], ids[1]]);
    expect(page.nextCursor).toEqual(expect.any(String));
    const rest = await client(server).listContexts({ limit: 2, ...(page.nextCursor ? { cursor: page.nextCursor } : {}) });
    expect(rest.contexts.map((c) => c.contextId)).toEqual([ids[0]]);
    expect(rest.nextCursor).toBeUndefined();
    expect((await collect(client(server).allContexts({ limit: 1 }))).map((c) => c.title)).toEqual([
      "third question",
      "second question",
      "first question",
    ]);

    const summary = await client(server).getContext(ids[0]);
    expect(summary).toMatchObject({ contextId: ids[0], title: "first question", messageCount: 2, status: "idle" });
    expect(summary.interrupt).toBeUndefined();
    expect(server.requests.at(-1)?.path).toBe(`/agents/demo/contexts/${ids[0]}`);
  });

  it("turns a bad limit and an unknown context into typed errors", async () => {
    const server = await serve();
    expect(await rejection(client(server).listContexts({ limit: 0 }))).toMatchObject({ code: "invalid_request", status: 400 });
    expect(await rejection(client(server).getContext("ctx-nobody"))).toMatchObject({ code: "context_not_found", status: 404 });
    expect(await rejection(client(server).messages())).toMatchObject({ code: "no_context", status: 0 });
  });

  it("edits a user message with replace: the history is cut before it", async () => {
    const server = await serve();
    const agent = client(server);
    await agent.send("one");
    await agent.send("two");
    const [, , second] = (await agent.messages()).messages;
    const result = await agent.send("deux", { replace: second?.id ?? "" });
    expect(result.text).toBe("Echo: deux");
    expect(JSON.parse(server.requests.at(-1)?.body ?? "")).toEqual({
      message: "deux",
      replace: second?.id,
      contextId: agent.contextId,
    });
    expect((await agent.messages()).messages.map((m) => m.text)).toEqual(["one", "Echo: one", "deux", "Echo: deux"]);
  });

  it("regenerates an assistant message over the stream, with no message in the body", async () => {
    const server = await serve();
    const agent = client(server);
    await agent.send("one");
    const answer = (await agent.messages()).messages[1];
    const frames: StreamFrame[] = await collect(agent.stream(undefined, { regenerate: answer?.id ?? "", multitask: "interrupt" }));
    expect(frames.at(-1)).toMatchObject({ done: true, status: "completed", text: "Echo again (1): one" });
    const body = JSON.parse(server.requests.at(-1)?.body ?? "") as Record<string, unknown>;
    expect(body).toEqual({ regenerate: answer?.id, multitask: "interrupt", contextId: agent.contextId });
    expect((await agent.messages()).messages.map((m) => m.text)).toEqual(["one", "Echo again (1): one"]);
  });

  it("refuses a wrong message id as a MessageNotFoundError, and bad turn options locally", async () => {
    const server = await serve();
    const agent = client(server);
    await agent.send("one");
    const [user, assistant] = (await agent.messages()).messages;
    const wrongRole = await rejection(agent.send(undefined, { regenerate: user?.id ?? "" }));
    expect(wrongRole).toBeInstanceOf(MessageNotFoundError);
    expect(wrongRole).toMatchObject({ code: "message_not_found", status: 404 });
    expect(await rejection(agent.send("x", { replace: assistant?.id ?? "" }))).toBeInstanceOf(MessageNotFoundError);
    const before = server.requests.length;
    expect(await rejection(agent.send("x", { regenerate: "msg-1" }))).toMatchObject({ code: "invalid_request" });
    expect(await rejection(agent.send(undefined))).toMatchObject({ code: "invalid_request" });
    expect(await rejection(client(server).send("x", { replace: "msg-1" }))).toMatchObject({ code: "no_context" });
    expect(server.requests.length).toBe(before); // nothing was sent
    expect((await agent.messages()).messages.map((m) => m.text)).toEqual(["one", "Echo: one"]);
  });

  it("cancels a running run on the server: its stream ends with a cancelled done frame", async () => {
    const server = await serve();
    const agent = client(server);
    await agent.send("hello");
    const frames: StreamFrame[] = [];
    const streaming = (async () => {
      for await (const frame of agent.stream("wait for it")) frames.push(frame);
    })();
    while (frames.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    expect((await agent.getContext()).status).toBe("running");
    const cancelled = await agent.cancel();
    expect(cancelled).toEqual({ runId: frames[0]?.runId, status: "cancelling" });
    await streaming;
    expect(frames.at(-1)).toMatchObject({ done: true, status: "cancelled" });
    const cancel = server.requests.find((r) => r.path.endsWith("/cancel"));
    expect(cancel?.method).toBe("POST");
    expect(cancel?.path).toBe(`/agents/demo/contexts/${agent.contextId}/cancel`);

    const idle = await rejection(agent.cancel());
    expect(idle).toBeInstanceOf(NoActiveRunError);
    expect(idle).toBeInstanceOf(AgentError);
    expect(idle).toMatchObject({ code: "no_active_run", status: 409 });
  });

  it("forks up to a message into a new context, keeps the source, and refuses a taken id", async () => {
    const server = await serve();
    const agent = client(server);
    await agent.send("one");
    await agent.send("two");
    const source = agent.contextId;
    const [, firstAnswer] = (await agent.messages()).messages;
    const fork = await agent.fork(undefined, { messageId: firstAnswer?.id ?? "", contextId: "ctx-fork-1" });
    expect(fork).toEqual({ contextId: "ctx-fork-1" });
    expect(JSON.parse(server.requests.at(-1)?.body ?? "")).toEqual({ messageId: firstAnswer?.id, contextId: "ctx-fork-1" });
    expect(agent.contextId).toBe(source); // the client stays on the source
    expect((await agent.messages("ctx-fork-1")).messages.map((m) => m.text)).toEqual(["one", "Echo: one"]);
    expect((await agent.messages()).messages).toHaveLength(4);

    const whole = await agent.fork();
    expect((await agent.messages(whole.contextId)).messages).toHaveLength(4);

    const taken = await rejection(agent.fork(source, { contextId: "ctx-fork-1" }));
    expect(taken).toBeInstanceOf(ContextExistsError);
    expect(taken).toMatchObject({ code: "context_exists", status: 409 });
    expect(await rejection(agent.fork(source, { messageId: "msg-000000000000000000000000" }))).toBeInstanceOf(
      MessageNotFoundError,
    );
  });

  it("rejects a transcript page that is not SPEC's shape as invalid_response", async () => {
    const server = await serve();
    const agent = client(server);
    await agent.send("one");
    const stored = server.contexts.get(agent.contextId ?? "");
    if (stored !== undefined) stored.messages = [{ ...stored.messages[0], role: "system" } as never];
    expect(await rejection(agent.messages())).toMatchObject({ code: "invalid_response" });
  });
});
