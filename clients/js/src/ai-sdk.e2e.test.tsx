// @vitest-environment jsdom
/**
 * The Vercel AI SDK, unchanged (`ai@6`'s DefaultChatTransport and `@ai-sdk/react@3`'s
 * useChat), against a real `agentkeel serve` on its `/agents/{name}/ai-sdk` binding.
 */
import { useChat } from "@ai-sdk/react";
import { act, renderHook, waitFor } from "@testing-library/react";
import {
  DefaultChatTransport,
  isToolUIPart,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  readUIMessageStream,
  type UIMessage,
  type UIMessageChunk,
} from "ai";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { type RunningServer, reportSkip, serveUnavailable, startAgentkeel } from "../tests/support/agentkeel-server.js";

const skip = serveUnavailable();
reportSkip(skip, "ai-sdk.e2e.test.tsx");

let server: RunningServer;
let chats = 0;

/** A fresh chat id (the context id). */
function chatId(): string {
  chats += 1;
  return `aisdk-${Date.now().toString(36)}-${chats}`;
}

function transport(agent = "demo", lastOnly = false): DefaultChatTransport<UIMessage> {
  return new DefaultChatTransport<UIMessage>({
    api: `${server.url}/agents/${agent}/ai-sdk`,
    ...(lastOnly
      ? {
          // what a page that keeps the history on the server sends: the new message only
          prepareSendMessagesRequest: ({ id, messages, trigger, messageId }) => ({
            body: { id, messages: messages.slice(-1), trigger, messageId },
          }),
        }
      : {}),
  });
}

function userMessage(text: string): UIMessage {
  return { id: `u-${Math.random().toString(36).slice(2)}`, role: "user", parts: [{ type: "text", text }] };
}

/** The assistant message a stream of parts builds, as useChat would build it. */
async function assemble(stream: ReadableStream<UIMessageChunk>): Promise<UIMessage> {
  let last: UIMessage | undefined;
  for await (const message of readUIMessageStream({ stream })) last = message;
  if (last === undefined) throw new Error("the stream built no message");
  return last;
}

function text(message: UIMessage | undefined): string {
  return (message?.parts ?? []).map((part) => (part.type === "text" ? part.text : "")).join("");
}

function toolParts(message: UIMessage | undefined) {
  return (message?.parts ?? []).filter(isToolUIPart);
}

describe.skipIf(skip !== undefined)("the AI SDK against agentkeel serve", () => {
  beforeAll(async () => {
    server = await startAgentkeel({
      edit: (framework, dir) => {
        // a slow copy of the demo agent, so that a test can leave in the middle of a turn
        writeFileSync(
          join(dir, "slow_agent.py"),
          "from agentkeel.tools.demo import demo_agent\n\n\n" +
            "def build(context_id):\n    return demo_agent(token_delay=0.05)\n",
        );
        const agents = framework["agents"] as Record<string, unknown>;
        agents["slow"] = { factory: "slow_agent:build", description: "The demo agent, slowly" };
      },
      env: { PYTHONPATH: "." },
    });
  });

  afterAll(async () => {
    await server?.dispose();
  });

  describe("DefaultChatTransport", () => {
    it("streams a turn as UI message parts: reasoning, the tool, the answer", async () => {
      const id = chatId();
      const stream = await transport().sendMessages({
        chatId: id,
        messages: [userMessage("What time is it?")],
        trigger: "submit-message",
        messageId: undefined,
        abortSignal: undefined,
      });
      const message = await assemble(stream);
      expect(message.role).toBe("assistant");
      expect(message.id).toMatch(/^run-/);
      expect(message.parts.some((part) => part.type === "reasoning")).toBe(true);
      expect(toolParts(message)).toEqual([
        expect.objectContaining({ type: "tool-current_time", state: "output-available" }),
      ]);
      expect(text(message)).toMatch(/^It is /);
      expect(message.metadata).toMatchObject({ status: "completed", usage: { inputTokens: expect.any(Number) } });
    });

    it("remembers the first turn in the second, with only the new message sent", async () => {
      const id = chatId();
      const chat = transport("demo", true);
      const first = userMessage("Remember that my favourite colour is blue");
      await assemble(
        await chat.sendMessages({ chatId: id, messages: [first], trigger: "submit-message", messageId: undefined, abortSignal: undefined }),
      );
      const second = await assemble(
        await chat.sendMessages({
          chatId: id,
          messages: [first, userMessage("What is my favourite colour?")],
          trigger: "submit-message",
          messageId: undefined,
          abortSignal: undefined,
        }),
      );
      expect(text(second)).toBe("You told me your favourite colour is blue.");
    });

    it("answers a resume with 204 when nothing runs", async () => {
      const id = chatId();
      expect(await transport().reconnectToStream({ chatId: id })).toBeNull();
      await assemble(
        await transport().sendMessages({
          chatId: id,
          messages: [userMessage("hello")],
          trigger: "submit-message",
          messageId: undefined,
          abortSignal: undefined,
        }),
      );
      expect(await transport().reconnectToStream({ chatId: id })).toBeNull();
      const response = await fetch(`${server.url}/agents/demo/ai-sdk/${id}/stream`);
      expect(response.status).toBe(204);
    });

    it("refuses a body it cannot take with a JSON error and a code", async () => {
      const response = await fetch(`${server.url}/agents/demo/ai-sdk`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ id: "../x", messages: [userMessage("hi")], trigger: "submit-message" }),
      });
      expect(response.status).toBe(400);
      expect(await response.json()).toEqual({ error: { code: "invalid_context_id", message: expect.any(String) } });
      await expect(
        transport("nobody").sendMessages({
          chatId: chatId(),
          messages: [userMessage("hi")],
          trigger: "submit-message",
          messageId: undefined,
          abortSignal: undefined,
        }),
      ).rejects.toThrow(/agent_not_found/);
    });
  });

  describe("useChat", () => {
    it("runs a turn, and a second one that remembers the first", async () => {
      const id = chatId();
      const { result } = renderHook(() => useChat({ id, transport: transport() }));
      await act(async () => {
        await result.current.sendMessage({ text: "Remember that my favourite colour is green" });
      });
      expect(result.current.status).toBe("ready");
      expect(text(result.current.messages.at(-1))).toBe("I'll remember that your favourite colour is green.");
      await act(async () => {
        await result.current.sendMessage({ text: "What is my favourite colour?" });
      });
      expect(result.current.messages.map((m) => m.role)).toEqual(["user", "assistant", "user", "assistant"]);
      expect(text(result.current.messages.at(-1))).toBe("You told me your favourite colour is green.");
      expect(result.current.error).toBeUndefined();
    });

    it("resumes a running turn after an unmount (resume: true)", async () => {
      const id = chatId();
      const first = renderHook(() => useChat({ id, transport: transport("slow") }));
      act(() => {
        void first.result.current.sendMessage({ text: "Tell me something" });
      });
      await waitFor(() => expect(first.result.current.messages.at(-1)?.role).toBe("assistant"), { timeout: 10_000 });
      first.unmount();

      const second = renderHook(() => useChat({ id: `${id}`, transport: transport("slow"), resume: true }));
      await waitFor(() => expect(second.result.current.messages.at(-1)?.role).toBe("assistant"), { timeout: 10_000 });
      await waitFor(() => expect(second.result.current.status).toBe("ready"), { timeout: 20_000 });
      const answer = second.result.current.messages.at(-1);
      expect(text(answer)).toMatch(/^You said: "Tell me something"\. /);
      expect(answer?.parts.some((part) => part.type === "reasoning")).toBe(true);
      expect(await transport("slow").reconnectToStream({ chatId: id })).toBeNull();
    });

    it("regenerate() answers again from the history cut before the last answer", async () => {
      const id = chatId();
      const { result } = renderHook(() => useChat({ id, transport: transport() }));
      await act(async () => {
        await result.current.sendMessage({ text: "Remember that my favourite colour is red" });
      });
      const first = result.current.messages.at(-1);
      await act(async () => {
        await result.current.regenerate();
      });
      expect(result.current.status).toBe("ready");
      expect(result.current.error).toBeUndefined();
      expect(result.current.messages.map((m) => m.role)).toEqual(["user", "assistant"]);
      const again = result.current.messages.at(-1);
      expect(text(again)).toBe("I'll remember that your favourite colour is red.");
      expect(again?.id).toMatch(/^run-/);
      expect(again?.id).not.toBe(first?.id); // a run of its own
      // the server cut its history: one question and one answer, the regenerated one
      const page = (await (await fetch(`${server.url}/agents/demo/contexts/${id}/messages`)).json()) as {
        messages: { role: string; runId?: string }[];
      };
      expect(page.messages.filter((m) => m.role === "user")).toHaveLength(1);
      expect(new Set(page.messages.filter((m) => m.role === "assistant").map((m) => m.runId))).toEqual(
        new Set([again?.id]),
      );
      await act(async () => {
        await result.current.sendMessage({ text: "What is my favourite colour?" });
      });
      expect(text(result.current.messages.at(-1))).toBe("You told me your favourite colour is red.");
    });

    it("round-trips a tool approval across a server restart, and a rejection", async () => {
      const id = chatId();
      const options = {
        id,
        transport: transport(),
        sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
      };
      const { result } = renderHook(() => useChat(options));
      await act(async () => {
        await result.current.sendMessage({ text: "Delete notes.txt" });
      });
      const pending = toolParts(result.current.messages.at(-1));
      expect(pending).toEqual([expect.objectContaining({ type: "tool-delete_file", state: "approval-requested" })]);
      const approval = pending[0]?.approval;
      expect(approval?.id).toMatch(/^int-/);

      await server.restart(); // the suspended run waits in the checkpointer

      await act(async () => {
        await result.current.addToolApprovalResponse({ id: approval?.id ?? "", approved: true });
      });
      await waitFor(() => expect(result.current.status).toBe("ready"));
      await waitFor(() => expect(text(result.current.messages.at(-1))).toMatch(/^Done: /));
      expect(result.current.messages.map((m) => m.role)).toEqual(["user", "assistant"]);
      expect(toolParts(result.current.messages.at(-1))).toEqual([
        expect.objectContaining({ type: "tool-delete_file", state: "output-available" }),
      ]);

      await act(async () => {
        await result.current.sendMessage({ text: "Delete todo.txt" });
      });
      const second = toolParts(result.current.messages.at(-1))[0]?.approval?.id ?? "";
      await act(async () => {
        await result.current.addToolApprovalResponse({ id: second, approved: false, reason: "not today" });
      });
      await waitFor(() => expect(text(result.current.messages.at(-1))).toContain("not today"));
      expect(toolParts(result.current.messages.at(-1))).toEqual([
        expect.objectContaining({ type: "tool-delete_file", state: "output-denied" }),
      ]);
      expect(result.current.error).toBeUndefined();
    });
  });
});
