/**
 * A stateful stub of SPEC section 3's conversation endpoints, on the stub server's
 * node:http listener: turns (with `replace`, `regenerate`, `multitask`), the context
 * list and summary, the transcript with `msg-` ids, cancel and fork, with SPEC's errors.
 *
 * Its "model" is an echo: a turn with message `m` answers `Echo: m` in two tokens; a
 * regenerated answer is `Echo again (n): m`. A message starting with `wait` holds its
 * run open until it is cancelled, so a test can stop a running turn. Every request is
 * recorded, like the plain stub's.
 */

import type { ServerResponse } from "node:http";

import type { ContextSummary, DoneFrame, RunEvent, StreamFrame, TranscriptMessage } from "../../src/types.js";
import { type SeenRequest, type Stub, startStub, writeJSON } from "./stub-server.js";

interface StoredContext {
  id: string;
  createdAt: string;
  updatedAt: string;
  messages: TranscriptMessage[];
  running: { runId: string; cancel: () => void } | undefined;
}

export interface ConversationStub extends Stub {
  /** The stored contexts, by id (tests may seed or inspect them). */
  contexts: Map<string, StoredContext>;
}

export interface ConversationStubOptions {
  /** `server.transcript: false`: the messages endpoint answers 404 and titles are empty. */
  transcript?: boolean;
}

const AGENT_PATH = /^\/agents\/([^/]+)(\/.*)?$/;

export async function startConversationStub(options: ConversationStubOptions = {}): Promise<ConversationStub> {
  const contexts = new Map<string, StoredContext>();
  let clock = Date.UTC(2026, 11, 1, 8, 0, 0);
  let counter = 0;
  let regenerations = 0;
  const now = () => new Date((clock += 1000)).toISOString().replace(".000Z", "Z");
  const mint = (prefix: string, digits: number) => `${prefix}-${(++counter).toString(16).padStart(digits, "0")}`;

  const error = (response: ServerResponse, status: number, code: string, message: string) =>
    writeJSON(response, status, { error: { code, message } });

  const summary = (context: StoredContext): ContextSummary => {
    const first = context.messages.find((m) => m.role === "user");
    return {
      contextId: context.id,
      title: options.transcript === false ? "" : (first?.text ?? "").slice(0, 80),
      createdAt: context.createdAt,
      updatedAt: context.updatedAt,
      messageCount: context.messages.length,
      status: context.running === undefined ? "idle" : "running",
    };
  };

  async function turn(request: SeenRequest, response: ServerResponse, streaming: boolean): Promise<void> {
    const body = JSON.parse(request.body) as {
      message?: string;
      contextId?: string;
      replace?: string;
      regenerate?: string;
      multitask?: string;
    };
    let context = body.contextId === undefined ? undefined : contexts.get(body.contextId);
    if (context === undefined) {
      if (body.replace !== undefined || body.regenerate !== undefined) {
        return error(response, 404, "context_not_found", "no such context");
      }
      const created = now();
      const id = body.contextId ?? mint("ctx", 36);
      context = { id, createdAt: created, updatedAt: created, messages: [], running: undefined };
      contexts.set(id, context);
    }
    if (context.running !== undefined && body.multitask === "reject") {
      return error(response, 409, "context_busy", "the context is running a turn");
    }
    const cutAt = body.replace ?? body.regenerate;
    let kept = context.messages;
    if (cutAt !== undefined) {
      const role = body.replace !== undefined ? "user" : "assistant";
      const index = context.messages.findIndex((m) => m.id === cutAt && m.role === role);
      if (index === -1) return error(response, 404, "message_not_found", `no ${role} message ${cutAt}`);
      kept = context.messages.slice(0, index);
    }
    const question = body.message ?? [...kept].reverse().find((m) => m.role === "user")?.text ?? "";
    const answer = body.regenerate === undefined ? `Echo: ${question}` : `Echo again (${++regenerations}): ${question}`;
    const runId = mint("run", 24);
    const stored = context;
    const frames: StreamFrame[] = [];
    const frame = (f: { event: RunEvent } | Omit<DoneFrame, "contextId" | "runId">) =>
      frames.push({ contextId: stored.id, runId, ...f } as StreamFrame);
    let cancelled = false;
    let release: () => void = () => undefined;
    const held = question.startsWith("wait") ? new Promise<void>((resolve) => (release = resolve)) : undefined;
    stored.running = { runId, cancel: () => ((cancelled = true), release()) };

    if (streaming) {
      response.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache" });
    }
    let sent = 0;
    const flush = () => {
      if (!streaming) return;
      for (; sent < frames.length; sent += 1) response.write(`id: ${sent + 1}\ndata: ${JSON.stringify(frames[sent])}\n\n`);
    };
    frame({ event: { type: "status", status: "running" } });
    frame({ event: { type: "step", step: 1 } });
    const half = Math.ceil(answer.length / 2);
    frame({ event: { type: "token", text: answer.slice(0, half) } });
    flush();
    if (held !== undefined) await held;
    stored.running = undefined;
    if (cancelled) {
      frame({ done: true, status: "cancelled", text: answer.slice(0, half), toolCalls: [] });
    } else {
      frame({ event: { type: "token", text: answer.slice(half) } });
      // the turn commits (and the cut with it) before its done frame is sent
      const at = now();
      const user: TranscriptMessage[] =
        body.regenerate === undefined ? [{ id: mint("msg", 24), role: "user", text: question, toolCalls: [], runId, createdAt: at }] : [];
      stored.messages = [...kept, ...user, { id: mint("msg", 24), role: "assistant", text: answer, toolCalls: [], runId, createdAt: at }];
      stored.updatedAt = at;
      frame({ done: true, status: "completed", text: answer, toolCalls: [] });
    }
    if (streaming) {
      flush();
      response.end();
    } else {
      const { done: _done, ...result } = frames.at(-1) as StreamFrame & { done: true };
      writeJSON(response, 200, result);
    }
  }

  function page<T>(items: readonly T[], start: number, limit: number) {
    const end = start + limit;
    return { items: items.slice(start, end), next: end < items.length ? end : undefined };
  }

  function parseLimit(value: string | null, max: number, fallback: number): number | undefined {
    if (value === null) return fallback;
    const n = Number(value);
    return Number.isInteger(n) && n >= 1 && n <= max ? n : undefined;
  }

  const stub = await startStub(async (request, response) => {
    const url = new URL(request.path, "http://stub");
    const match = AGENT_PATH.exec(url.pathname);
    if (match === null) return error(response, 404, "not_found", "no such path");
    const rest = match[2] ?? "";
    const method = request.method;
    if (method === "POST" && (rest === "/stream" || rest === "/send")) return turn(request, response, rest === "/stream");
    if (method === "GET" && rest === "/contexts") {
      const limit = parseLimit(url.searchParams.get("limit"), 200, 50);
      const cursor = url.searchParams.get("cursor");
      const start = cursor === null ? 0 : Number(Buffer.from(cursor, "base64url").toString());
      if (limit === undefined || !Number.isInteger(start)) return error(response, 400, "invalid_request", "bad limit or cursor");
      const sorted = [...contexts.values()].sort((a, b) => b.updatedAt.localeCompare(a.updatedAt));
      const { items, next } = page(sorted.map(summary), start, limit);
      const nextCursor = next === undefined ? null : Buffer.from(String(next)).toString("base64url");
      return writeJSON(response, 200, { contexts: items, nextCursor });
    }
    const contextMatch = /^\/contexts\/([^/]+)(\/[a-z]+)?$/.exec(rest);
    const context = contextMatch === null ? undefined : contexts.get(decodeURIComponent(contextMatch[1] ?? ""));
    if (contextMatch === null) return error(response, 404, "not_found", "no such path");
    if (context === undefined) return error(response, 404, "context_not_found", "no such context");
    const action = `${method} ${contextMatch[2] ?? ""}`;
    switch (action) {
      case "GET ":
        return writeJSON(response, 200, summary(context));
      case "DELETE ":
        contexts.delete(context.id);
        response.writeHead(204).end();
        return;
      case "GET /messages": {
        if (options.transcript === false) return error(response, 404, "not_found", "the transcript is turned off");
        const limit = parseLimit(url.searchParams.get("limit"), 500, 100);
        if (limit === undefined) return error(response, 400, "invalid_request", "bad limit");
        const after = url.searchParams.get("after");
        const index = after === null ? -1 : context.messages.findIndex((m) => m.id === after);
        if (after !== null && index === -1) return error(response, 404, "message_not_found", `no message ${after}`);
        const { items, next } = page(context.messages, index + 1, limit);
        return writeJSON(response, 200, { messages: items, nextCursor: next === undefined ? null : String(next) });
      }
      case "POST /cancel": {
        const running = context.running;
        if (running === undefined) return error(response, 409, "no_active_run", "nothing is running on this context");
        running.cancel();
        return writeJSON(response, 202, { runId: running.runId, status: "cancelling" });
      }
      case "POST /fork": {
        const body = JSON.parse(request.body || "{}") as { messageId?: string; contextId?: string };
        let messages = context.messages;
        if (body.messageId !== undefined) {
          const index = messages.findIndex((m) => m.id === body.messageId);
          if (index === -1) return error(response, 404, "message_not_found", `no message ${body.messageId}`);
          messages = messages.slice(0, index + 1);
        }
        if (body.contextId !== undefined && contexts.has(body.contextId)) {
          return error(response, 409, "context_exists", `${body.contextId} exists already`);
        }
        const id = body.contextId ?? mint("ctx", 36);
        const at = now();
        contexts.set(id, { id, createdAt: at, updatedAt: at, messages: [...messages], running: undefined });
        return writeJSON(response, 201, { contextId: id });
      }
      default:
        return error(response, 405, "method_not_allowed", action);
    }
  });
  return { ...stub, contexts };
}
