/**
 * AG-UI's own client, `HttpAgent` from `@ag-ui/client`, against a real `agentkeel serve`:
 * its event verification judges every stream, and its message store shows what a
 * CopilotKit page would show.
 */

import { HttpAgent, type BaseEvent, type Message } from "@ag-ui/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import {
  type RunningServer,
  reportSkip,
  serveUnavailable,
  startAgentkeel,
} from "../tests/support/agentkeel-server.js";

const skip = serveUnavailable();
reportSkip(skip, "ag-ui.e2e.test.ts");

let server: RunningServer;

function agent(threadId: string): HttpAgent {
  return new HttpAgent({ url: `${server.url}/agents/demo/ag-ui`, threadId });
}

function user(content: string): Message {
  return { id: crypto.randomUUID(), role: "user", content };
}

/** Run once, recording every event the client verified and applied. */
async function run(target: HttpAgent, parameters: Parameters<HttpAgent["runAgent"]>[0] = {}): Promise<BaseEvent[]> {
  const events: BaseEvent[] = [];
  await target.runAgent(parameters, { onEvent: ({ event }) => void events.push(event) });
  return events;
}

/** What a chat shows: the user's messages and the assistant's texts (no tool calls, no reasoning). */
function texts(messages: Message[]): [string, string][] {
  return messages
    .filter((m) => (m.role === "user" || m.role === "assistant") && typeof m.content === "string" && m.content !== "")
    .map((m) => [m.role, typeof m.content === "string" ? m.content : ""]);
}

describe.skipIf(skip !== undefined)("HttpAgent against agentkeel", () => {
  beforeAll(async () => {
    server = await startAgentkeel();
  });

  afterAll(async () => {
    await server?.dispose();
  });

  it("runs a turn", async () => {
    const chat = agent(`thread-${crypto.randomUUID()}`);
    chat.addMessage(user("Hello"));
    const events = await run(chat);
    expect(events[0]?.type).toBe("RUN_STARTED");
    expect(events.map((e) => e.type)).toContain("TEXT_MESSAGE_CONTENT");
    expect(events.at(-1)).toMatchObject({ type: "RUN_FINISHED", outcome: { type: "success" } });
    const last = chat.messages.at(-1);
    expect(last?.role).toBe("assistant");
    expect(typeof last?.content === "string" && last.content.length > 0).toBe(true);
  });

  it("sends an HttpAgent that kept its messages no snapshot, and one that fell behind a snapshot", async () => {
    const threadId = `thread-${crypto.randomUUID()}`;
    const chat = agent(threadId);
    chat.addMessage(user("Remember that my favourite colour is green"));
    await run(chat);
    chat.addMessage(user("And my favourite number is seven"));
    const second = await run(chat);
    expect(second.map((e) => e.type)).not.toContain("MESSAGES_SNAPSHOT");
    expect(second.at(-1)).toMatchObject({ type: "RUN_FINISHED", outcome: { type: "success" } });
    const transcript = async (): Promise<[string, string][]> => {
      const response = await fetch(`${server.url}/agents/demo/contexts/${threadId}/messages`);
      const body = (await response.json()) as { messages: { role: string; text: string }[] };
      return body.messages.filter((m) => m.text !== "").map((m) => [m.role, m.text]);
    };
    expect(texts(chat.messages)).toEqual(await transcript());

    // another page on the thread runs a turn: the first one's copy is behind, and its next
    // run starts with the server's snapshot, its new message after the history
    const other = agent(threadId);
    await run(other);
    other.addMessage(user("What is my favourite colour?"));
    await run(other);
    chat.addMessage(user("What is my favourite number?"));
    const behind = await run(chat);
    expect(behind.map((e) => e.type)).toContain("MESSAGES_SNAPSHOT");
    expect(texts(chat.messages)).toEqual(await transcript());
    expect(texts(chat.messages).at(-2)).toEqual(["user", "What is my favourite number?"]);
  });

  it("gives a new HttpAgent on the same thread the history, with no messages of its own", async () => {
    const threadId = `thread-${crypto.randomUUID()}`;
    const first = agent(threadId);
    first.addMessage(user("Remember that my favourite colour is green"));
    await run(first);
    const remembered = texts(first.messages);

    const reloaded = agent(threadId);
    const events = await run(reloaded);
    expect(events.map((e) => e.type)).toEqual(["RUN_STARTED", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]);
    expect(texts(reloaded.messages)).toEqual(remembered);
    expect(remembered).toEqual([
      ["user", "Remember that my favourite colour is green"],
      ["assistant", "I'll remember that your favourite colour is green."],
    ]);
  });

  it("ends a run that needs approval with an interrupt, and resumes it (also when replayed)", async () => {
    const threadId = `thread-${crypto.randomUUID()}`;
    const chat = agent(threadId);
    chat.addMessage(user("Delete notes.txt"));
    const suspended = await run(chat);
    expect(suspended.at(-1)).toMatchObject({ type: "RUN_FINISHED", outcome: { type: "interrupt" } });
    expect(chat.pendingInterrupts).toHaveLength(1);
    const interrupt = chat.pendingInterrupts[0];
    expect(interrupt?.reason).toBe("tool_approval");
    expect(interrupt?.message).toContain("delete_file");

    // a page reloaded meanwhile learns of the pending approval from the server
    const reloaded = agent(threadId);
    await run(reloaded);
    expect(reloaded.pendingInterrupts.map((i) => i.id)).toEqual([interrupt?.id]);
    expect(texts(reloaded.messages)).toEqual([["user", "Delete notes.txt"]]);

    const resume = [{ interruptId: interrupt?.id ?? "", status: "resolved" as const, payload: { approved: true } }];
    const resumed = await run(chat, { resume });
    expect(resumed.at(-1)).toMatchObject({ type: "RUN_FINISHED", outcome: { type: "success" } });
    expect(resumed.map((e) => e.type)).not.toContain("MESSAGES_SNAPSHOT"); // its copy is in step
    expect(resumed).toContainEqual(expect.objectContaining({ type: "TOOL_CALL_START", toolCallName: "delete_file" }));
    expect(chat.pendingInterrupts).toHaveLength(0);
    const answer = chat.messages.at(-1)?.content;

    // the same resume again, as a client that lost the answer would send it: the same run's
    // events, after a snapshot (this client has no messages)
    const replay = agent(threadId);
    const replayed = await run(replay, { resume });
    expect(replayed.at(-1)).toMatchObject({ type: "RUN_FINISHED", outcome: { type: "success" } });
    expect(replayed[1]?.type).toBe("MESSAGES_SNAPSHOT");
    expect(replayed.map((e) => e.type).filter((t) => t !== "MESSAGES_SNAPSHOT")).toEqual(resumed.map((e) => e.type));
    expect(replay.messages.at(-1)?.content).toEqual(answer);
  });
});
