// @vitest-environment jsdom
import { act, renderHook, waitFor } from "@testing-library/react";
import { StrictMode } from "react";
import { afterEach, describe, expect, it } from "vitest";

import {
  approvalRun,
  approvedRun,
  CONTEXT_ID,
  INTERRUPT_ID,
  timeRun,
} from "../../tests/support/frames.js";
import { type Handler, type Stub, startStub, withoutConversations, writeSSE } from "../../tests/support/stub-server.js";
import type { SendResult } from "../types.js";
import { type UseAgentOptions, type UseAgentResult, useAgent } from "./index.js";

let stub: Stub | undefined;

afterEach(async () => {
  await stub?.close();
  stub = undefined;
});

async function serve(handler: Handler): Promise<Stub> {
  stub = await startStub(withoutConversations(handler));
  return stub;
}

describe("useAgent against a stub server (StrictMode)", () => {
  it("streams a turn into turns, thinking, activity and status, and send resolves with the SendResult", async () => {
    const server = await serve((_request, response) => writeSSE(response, timeRun, { split: true }));
    const contexts: (string | undefined)[] = [];
    const { result } = renderHook(
      () => useAgent({ url: server.url, agent: "demo", onContext: (id) => contexts.push(id) }),
      { wrapper: StrictMode },
    );
    expect(result.current.status).toBe("idle");
    expect(result.current.turns).toEqual([]);

    let sent: SendResult | undefined;
    await act(async () => {
      sent = await result.current.send("What time is it?");
    });
    expect(sent).toMatchObject({ status: "completed", contextId: CONTEXT_ID, toolCalls: ["current_time"] });
    expect(result.current.status).toBe("idle");
    expect(result.current.turns.map((t) => [t.role, t.text])).toEqual([
      ["user", "What time is it?"],
      ["assistant", "It is 14:05 UTC — café ☕ 🙂."],
    ]);
    expect(result.current.thinking).toContain("so I will call current_time.");
    expect(result.current.activity).toEqual([{ id: "call-demo-1", name: "current_time", status: "success" }]);
    expect(result.current.contextId).toBe(CONTEXT_ID);
    expect(result.current.contextRef.current).toBe(CONTEXT_ID);
    expect(contexts).toEqual([CONTEXT_ID]); // once, despite StrictMode's double effects
    expect(server.requests.filter((r) => r.method === "POST")).toHaveLength(1);
  });

  it("suspends on an approval and resumes with a decision", async () => {
    const server = await serve((request, response) =>
      writeSSE(response, request.body.includes('"resume"') ? approvedRun : approvalRun),
    );
    const { result } = renderHook(() => useAgent({ url: server.url, agent: "demo" }), { wrapper: StrictMode });
    await act(async () => {
      await result.current.send("Delete notes.txt");
    });
    expect(result.current.status).toBe("suspended");
    expect(result.current.pendingInterrupt).toMatchObject({ id: INTERRUPT_ID, kind: "approval", tool: "delete_file" });
    await act(async () => {
      await result.current.resume({ approved: true });
    });
    expect(result.current.status).toBe("idle");
    expect(result.current.pendingInterrupt).toBeUndefined();
    expect(result.current.turns.at(-1)?.text).toBe("Done: deleted notes.txt.");
    const posts = server.requests.filter((r) => r.method === "POST");
    expect(JSON.parse(posts[1]?.body ?? "")).toMatchObject({ resume: { interruptId: INTERRUPT_ID } });
  });

  it("stop ends the local stream; after unmount there is no further render", async () => {
    let closed = 0;
    const server = await serve((_request, response) => {
      response.on("close", () => {
        closed += 1;
      });
      response.writeHead(200, { "Content-Type": "text/event-stream" });
      for (const r of timeRun.slice(0, 9)) response.write(`id: ${r.id}\ndata: ${JSON.stringify(r.frame)}\n\n`);
      // never finishes
    });
    let renders = 0;
    const { result, unmount } = renderHook(
      () => {
        renders += 1;
        return useAgent({ url: server.url, agent: "demo" });
      },
      { wrapper: StrictMode },
    );

    let first: Promise<unknown> = Promise.resolve();
    act(() => {
      first = result.current.send("one").catch((error: unknown) => error);
    });
    await waitFor(() => expect(result.current.turns.at(-1)?.text).toBe("It is "));
    await act(() => result.current.stop()); // this server cannot cancel: the local stream stops
    expect(await first).toMatchObject({ name: "AbortError" });
    expect(result.current.status).toBe("idle");
    expect(result.current.turns.at(-1)).toMatchObject({ status: "stopped" });
    await waitFor(() => expect(closed).toBe(1));

    let second: Promise<unknown> = Promise.resolve();
    act(() => {
      second = result.current.send("two").catch((error: unknown) => error);
    });
    await waitFor(() => expect(result.current.turns.at(-1)?.text).toBe("It is "));
    const before = renders;
    unmount();
    expect(await second).toMatchObject({ name: "AbortError" });
    await waitFor(() => expect(closed).toBe(2)); // the unmount aborted the request
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(renders).toBe(before);
  });

  it("follows a new contextId prop and calls the latest onContext", async () => {
    const server = await serve((_request, response) => writeSSE(response, timeRun));
    const calls: string[] = [];
    const { result, rerender } = renderHook<UseAgentResult, UseAgentOptions>((props) => useAgent(props), {
      wrapper: StrictMode,
      initialProps: {
        url: server.url,
        agent: "demo",
        contextId: "ctx-first",
        onContext: () => void calls.push("old"),
      },
    });
    expect(result.current.contextRef.current).toBe("ctx-first");
    rerender({ url: server.url, agent: "demo", contextId: "ctx-second", onContext: (id) => void calls.push(`new ${id}`) });
    await waitFor(() => expect(result.current.contextRef.current).toBe("ctx-second"));
    expect(result.current.contextId).toBe("ctx-second");
    await act(async () => {
      await result.current.send("hi");
    });
    const post = server.requests.find((r) => r.method === "POST");
    expect(JSON.parse(post?.body ?? "")).toEqual({ message: "hi", contextId: "ctx-second" });
    // the frame's id (CONTEXT_ID) replaced ctx-second, reported to the newest callback
    expect(calls).toEqual([`new ctx-second`, `new ${CONTEXT_ID}`]);

    act(() => result.current.reset());
    expect(result.current.turns).toEqual([]);
    expect(result.current.contextRef.current).toBeUndefined();
    expect(calls.at(-1)).toBe("new undefined");
  });
});
