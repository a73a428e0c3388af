// @vitest-environment jsdom
import { act, renderHook, waitFor } from "@testing-library/react";
import { StrictMode } from "react";
import { afterEach, describe, expect, it } from "vitest";

import { type ConversationStub, startConversationStub } from "../../tests/support/conversation-server.js";
import { AgentClient } from "../client.js";
import { useAgent } from "./index.js";

let stub: ConversationStub | undefined;

afterEach(async () => {
  await stub?.close();
  stub = undefined;
});

async function serve(options: Parameters<typeof startConversationStub>[0] = {}): Promise<ConversationStub> {
  stub = await startConversationStub(options);
  return stub;
}

/** A conversation made over the wire before the page "loads". */
async function conversation(server: ConversationStub, ...messages: string[]): Promise<string> {
  const agent = new AgentClient({ url: server.url, agent: "demo" });
  for (const message of messages) await agent.send(message);
  return agent.contextId ?? "";
}

const texts = (turns: readonly { role: string; text: string }[]) => turns.map((t) => [t.role, t.text]);

describe("useAgent with SPEC's conversation endpoints (StrictMode)", () => {
  it("shows the transcript of a given contextId on mount, as after a reload", async () => {
    const server = await serve();
    const contextId = await conversation(server, "one", "two");
    const before = server.requests.length;
    const { result } = renderHook(() => useAgent({ url: server.url, agent: "demo", contextId }), { wrapper: StrictMode });
    await waitFor(() => expect(result.current.turns).toHaveLength(4));
    expect(texts(result.current.turns)).toEqual([
      ["user", "one"],
      ["assistant", "Echo: one"],
      ["user", "two"],
      ["assistant", "Echo: two"],
    ]);
    for (const turn of result.current.turns) expect(turn.messageId).toMatch(/^msg-/);
    // StrictMode runs the effect twice; the transcript is read once
    const reads = server.requests.slice(before).filter((r) => r.path.includes("/messages"));
    expect(reads).toHaveLength(1);
    expect(result.current.status).toBe("idle");
  });

  it("gives the turns it streams their message ids, so edit and regenerate can follow", async () => {
    const server = await serve();
    const { result } = renderHook(() => useAgent({ url: server.url, agent: "demo" }), { wrapper: StrictMode });
    await act(async () => {
      await result.current.send("one");
    });
    await act(async () => {
      await result.current.send("two");
    });
    const [, firstAnswer, second] = result.current.turns;
    expect(second?.messageId).toMatch(/^msg-/);
    // after the first turn, only the messages after the last known id are asked for
    const reads = server.requests.filter((r) => r.path.includes("/messages"));
    expect(reads.map((r) => r.path.includes(`after=${firstAnswer?.messageId}`))).toEqual([false, true]);

    await act(async () => {
      await result.current.edit(second?.messageId ?? "", "deux");
    });
    expect(texts(result.current.turns)).toEqual([
      ["user", "one"],
      ["assistant", "Echo: one"],
      ["user", "deux"],
      ["assistant", "Echo: deux"],
    ]);
    const answer = result.current.turns.at(-1);
    await act(async () => {
      await result.current.regenerate(answer?.messageId ?? "");
    });
    expect(texts(result.current.turns).at(-1)).toEqual(["assistant", "Echo again (1): deux"]);
    expect(result.current.turns).toHaveLength(4);
    // what the server holds is what the page shows
    const stored = server.contexts.get(result.current.contextId ?? "")?.messages.map((m) => m.text);
    expect(stored).toEqual(result.current.turns.map((t) => t.text));
    expect(result.current.turns.map((t) => t.messageId)).toEqual(server.contexts.get(result.current.contextId ?? "")?.messages.map((m) => m.id));
  });

  it("stop cancels the run on the server and the turn ends cancelled", async () => {
    const server = await serve();
    const { result } = renderHook(() => useAgent({ url: server.url, agent: "demo" }), { wrapper: StrictMode });
    let pending: Promise<unknown> = Promise.resolve();
    act(() => {
      pending = result.current.send("wait a moment");
    });
    await waitFor(() => expect(result.current.turns.at(-1)?.text).toContain("Echo"));
    await act(async () => {
      await result.current.stop();
      await pending;
    });
    expect(await pending).toMatchObject({ status: "cancelled" });
    expect(result.current.status).toBe("idle");
    expect(result.current.turns.at(-1)).toMatchObject({ role: "assistant", status: "cancelled" });
    const cancel = server.requests.find((r) => r.path.endsWith("/cancel"));
    expect(cancel).toMatchObject({ method: "POST", path: `/agents/demo/contexts/${result.current.contextId}/cancel` });
    // the context is free again: the next turn runs
    await act(async () => {
      await result.current.send("again");
    });
    expect(result.current.turns.at(-1)).toMatchObject({ text: "Echo: again", status: "completed" });
  });

  it("with the transcript off, a reload shows no history and asks once", async () => {
    const server = await serve({ transcript: false });
    const contextId = await conversation(server, "one");
    const { result } = renderHook(() => useAgent({ url: server.url, agent: "demo", contextId }), { wrapper: StrictMode });
    await act(async () => {
      await result.current.send("two");
    });
    await act(async () => {
      await result.current.send("three");
    });
    expect(texts(result.current.turns)).toEqual([
      ["user", "two"],
      ["assistant", "Echo: two"],
      ["user", "three"],
      ["assistant", "Echo: three"],
    ]);
    expect(result.current.error).toBeUndefined();
    expect(server.requests.filter((r) => r.path.includes("/messages"))).toHaveLength(1);
  });
});
