import { afterEach, describe, expect, it } from "vitest";

import { type Stub, startStub, writeJSON } from "../tests/support/stub-server.js";
import { AgentClient } from "./client.js";
import { AgentError } from "./errors.js";

let stub: Stub | undefined;

afterEach(async () => {
  await stub?.close();
  stub = undefined;
});

const ITEM = {
  key: "favourite colour",
  namespace: "memories",
  text: "The user's favourite colour is blue.",
  value: null,
  createdAt: "2026-12-01T08:00:00Z",
  updatedAt: "2026-12-01T08:00:00Z",
  source: { contextId: "ctx-1", agent: "demo" },
};

describe("AgentClient memory methods", () => {
  it("lists, searches and pages the caller's memory", async () => {
    stub = await startStub((request, response) => {
      if (request.path.includes("q=")) writeJSON(response, 200, { items: [{ ...ITEM, score: 0.81 }], nextCursor: null });
      else writeJSON(response, 200, { items: [ITEM], nextCursor: "c2" });
    });
    const client = new AgentClient({ url: stub.url, agent: "demo", headers: { "X-API-Key": "k" } });
    const page = await client.memory({ limit: 1 });
    expect(page.items.map((item) => item.key)).toEqual(["favourite colour"]);
    expect(page.items[0]?.source.contextId).toBe("ctx-1");
    expect(page.nextCursor).toBe("c2");
    const found = await client.memory({ q: "which colour", cursor: "c2" });
    expect(found.items[0]?.score).toBe(0.81);
    expect(stub.requests.map((r) => r.path)).toEqual([
      "/agents/demo/memory?limit=1",
      "/agents/demo/memory?q=which+colour&cursor=c2",
    ]);
    expect(stub.requests[0]?.headers["x-api-key"]).toBe("k");
  });

  it("forgets one item by key, or all, and surfaces the server's error code", async () => {
    stub = await startStub((request, response) => {
      if (request.path.endsWith("/memory")) writeJSON(response, 200, { deleted: 3 });
      else if (request.path.endsWith("/gone")) {
        writeJSON(response, 404, { error: { code: "memory_not_found", message: "nothing is remembered under this key" } });
      } else {
        response.writeHead(204);
        response.end();
      }
    });
    const client = new AgentClient({ url: stub.url, agent: "demo" });
    expect(await client.forgetMemory("favourite colour")).toBe(1);
    expect(await client.forgetMemory()).toBe(3);
    const error = await client.forgetMemory("gone").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AgentError);
    expect((error as AgentError).code).toBe("memory_not_found");
    expect(stub.requests.map((r) => `${r.method} ${r.path}`)).toEqual([
      "DELETE /agents/demo/memory/favourite%20colour",
      "DELETE /agents/demo/memory",
      "DELETE /agents/demo/memory/gone",
    ]);
  });

  it("refuses a malformed listing", async () => {
    stub = await startStub((_request, response) => writeJSON(response, 200, { items: [{ nope: 1 }] }));
    const client = new AgentClient({ url: stub.url, agent: "demo" });
    await expect(client.memory()).rejects.toMatchObject({ code: "invalid_response" });
  });
});
