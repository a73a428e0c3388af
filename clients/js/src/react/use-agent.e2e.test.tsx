// @vitest-environment jsdom
/** useAgent against a real `agentkeel serve` running the offline demo model. */
import { act, renderHook } from "@testing-library/react";
import { StrictMode } from "react";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import {
  type RunningServer,
  reportSkip,
  serveUnavailable,
  startAgentkeel,
} from "../../tests/support/agentkeel-server.js";
import { useAgent } from "./index.js";

const skip = serveUnavailable();
reportSkip(skip, "use-agent.e2e.test.tsx");

let server: RunningServer;

function render(onContext?: (id: string | undefined) => void) {
  return renderHook(
    () => useAgent({ url: server.url, agent: "demo", ...(onContext === undefined ? {} : { onContext }) }),
    { wrapper: StrictMode },
  );
}

describe.skipIf(skip !== undefined)("useAgent against agentkeel serve", () => {
  beforeAll(async () => {
    server = await startAgentkeel();
  });

  afterAll(async () => {
    await server?.dispose();
  });

  it("shows a tool call as activity, thinking, and the answer; the context id is captured", async () => {
    const contexts: (string | undefined)[] = [];
    const { result } = render((id) => contexts.push(id));
    let text = "";
    await act(async () => {
      text = (await result.current.send("What time is it?")).text;
    });
    expect(result.current.status).toBe("idle");
    expect(result.current.activity).toEqual([expect.objectContaining({ name: "current_time", status: "success" })]);
    expect(result.current.thinking.length).toBeGreaterThan(0);
    expect(result.current.turns.map((t) => t.role)).toEqual(["user", "assistant"]);
    expect(result.current.turns.at(-1)?.text).toBe(text);
    expect(text).toMatch(/^It is /);
    expect(contexts).toHaveLength(1);
    expect(result.current.contextRef.current).toBe(contexts[0]);
  });

  it("approves one tool, rejects another, and answers a question", async () => {
    const { result } = render();
    await act(async () => {
      await result.current.send("Delete notes.txt");
    });
    expect(result.current.status).toBe("suspended");
    expect(result.current.pendingInterrupt).toMatchObject({ kind: "approval", tool: "delete_file" });
    await act(async () => {
      await result.current.resume({ approved: true });
    });
    expect(result.current.status).toBe("idle");
    expect(result.current.activity).toEqual([expect.objectContaining({ name: "delete_file", status: "success" })]);

    await act(async () => {
      await result.current.send("Delete todo.txt");
    });
    await act(async () => {
      await result.current.resume({ approved: false, reason: "not today" });
    });
    expect(result.current.turns.at(-1)?.text).toContain("not today");

    await act(async () => {
      await result.current.send("Ask me about my day");
    });
    expect(result.current.pendingInterrupt?.kind).toBe("input");
    await act(async () => {
      await result.current.resume("Busy but good");
    });
    expect(result.current.turns.at(-1)?.text).toContain("Busy but good");
    expect(result.current.turns.filter((t) => t.role === "user").map((t) => t.text)).toEqual([
      "Delete notes.txt",
      "Approved delete_file",
      "Delete todo.txt",
      "Rejected delete_file: not today",
      "Ask me about my day",
      "Busy but good",
    ]);
  });
});
