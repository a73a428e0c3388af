/**
 * AgentClient.cancel and the `multitask` field against a real `agentkeel serve`.
 *
 * The server runs a slow copy of the offline demo agent (a chunk every 0.1 s), so a
 * reply is still streaming when the cancel arrives: the stream must end with the
 * server's own `cancelled` done frame, and a second cancel finds nothing to stop.
 */

import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import {
  type RunningServer,
  reportSkip,
  serveUnavailable,
  startAgentkeel,
} from "../tests/support/agentkeel-server.js";
import { AgentClient } from "./client.js";
import { AgentError, NoActiveRunError } from "./errors.js";
import { type StreamFrame, isDoneFrame } from "./types.js";

const skip = serveUnavailable();
reportSkip(skip, "cancel.e2e.test.ts");

const SLOW_FACTORY = `from agentkeel.tools.demo import demo_agent


def make(context_id):
    return demo_agent(token_delay=0.1)
`;

let server: RunningServer | undefined;
let modules = "";

function client(contextId?: string): AgentClient {
  const url = server?.url ?? "";
  const retry = { attempts: 2, delayMs: 50 };
  return new AgentClient({ url, agent: "demo", retry, ...(contextId === undefined ? {} : { contextId }) });
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected a rejection");
}

describe.skipIf(skip !== undefined)("cancel against a real server", () => {
  beforeAll(async () => {
    modules = mkdtempSync(join(tmpdir(), "agentkeel-cancel-"));
    writeFileSync(join(modules, "slow_agents.py"), SLOW_FACTORY);
    const framework = join(modules, "framework.json");
    writeFileSync(framework, JSON.stringify({ agents: { demo: { factory: "slow_agents:make" } } }));
    const previous = { framework: process.env["AGENTKEEL_FRAMEWORK"], path: process.env["PYTHONPATH"] };
    process.env["AGENTKEEL_FRAMEWORK"] = framework;
    process.env["PYTHONPATH"] = [modules, previous.path].filter((part) => part !== undefined).join(":");
    try {
      server = await startAgentkeel();
    } finally {
      if (previous.framework === undefined) delete process.env["AGENTKEEL_FRAMEWORK"];
      else process.env["AGENTKEEL_FRAMEWORK"] = previous.framework;
      if (previous.path === undefined) delete process.env["PYTHONPATH"];
      else process.env["PYTHONPATH"] = previous.path;
    }
  });

  afterAll(async () => {
    await server?.dispose();
    if (modules !== "") rmSync(modules, { recursive: true, force: true });
  });

  it("stops a streaming run on the server; then there is nothing to cancel", async () => {
    const agent = client();
    const frames: StreamFrame[] = [];
    let cancelled: { runId: string; status: string } | undefined;
    for await (const frame of agent.stream("Tell me everything you can do")) {
      frames.push(frame);
      if (cancelled === undefined && "event" in frame && frame.event.type === "token") {
        cancelled = await agent.cancel();
      }
    }
    const done = frames.at(-1);
    expect(done !== undefined && isDoneFrame(done)).toBe(true);
    expect(cancelled?.status).toBe("cancelling");
    expect(cancelled?.runId).toBe(done?.runId);
    if (done === undefined || !isDoneFrame(done)) return;
    expect(done.status).toBe("cancelled");
    const again = await rejection(agent.cancel());
    expect(again).toBeInstanceOf(NoActiveRunError);
    expect((again as AgentError).status).toBe(409);
    const next = await agent.send("What time is it?");
    expect(next.status).toBe("completed");
  });

  it("an unknown context is not found, and multitask interrupt takes a busy context over", async () => {
    const unknown = await rejection(client("ctx-nobody-has-this").cancel());
    expect(unknown).toBeInstanceOf(AgentError);
    expect((unknown as AgentError).code).toBe("context_not_found");
    const first = client();
    const stream = first.stream("Tell me everything you can do");
    const frames: StreamFrame[] = [];
    let taken: Promise<unknown> | undefined;
    for await (const frame of stream) {
      frames.push(frame);
      if (taken === undefined && "event" in frame && frame.event.type === "token" && first.contextId !== undefined) {
        taken = client(first.contextId).send("What time is it?", { multitask: "interrupt" });
      }
    }
    const done = frames.at(-1);
    expect(done !== undefined && isDoneFrame(done) && done.status).toBe("cancelled");
    const result = (await taken) as { status: string; text: string };
    expect(result.status).toBe("completed");
    expect(result.text).toMatch(/^It is /);
  });
});
