/**
 * The chat page's Stop button and approvals, in a real browser against a real server.
 *
 * The server runs a slow copy of the offline demo agent (a chunk every 0.25 s), so a
 * reply is still streaming when Stop is clicked. Stop must stop the run on the server,
 * not only the page's stream: the server's own record of the run (its replayed stream)
 * ends `cancelled`, and nothing else arrives. An approval must show what the tool will
 * do with its input, not just the tool's name.
 *
 * Chromium is Debian's /usr/bin/chromium (or CHROMIUM_PATH), driven by playwright-core;
 * screenshots go to test-output/ (or AGENTKEEL_TEST_OUTPUT).
 */

import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import { type Browser, type Page, chromium } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { decodeSSE } from "../../src/sse.js";
import { type RunningServer, reportSkip, serveUnavailable, startAgentkeel } from "../support/agentkeel-server.js";

const CHROMIUM = process.env["CHROMIUM_PATH"] ?? "/usr/bin/chromium";
const CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync"];
const OUTPUT = resolve(
  process.env["AGENTKEEL_TEST_OUTPUT"] ?? join(dirname(fileURLToPath(import.meta.url)), "..", "..", "test-output"),
);
const SLOW_FACTORY = `from agentkeel.tools.demo import demo_agent


def make(context_id):
    return demo_agent(token_delay=0.25)
`;

function skipReason(): string | undefined {
  if (!existsSync(CHROMIUM)) return `${CHROMIUM} is missing (apt-get install -y chromium)`;
  return serveUnavailable();
}

const skip = skipReason();
reportSkip(skip, "stop-and-approve.test.ts");

let server: RunningServer | undefined;
let modules = "";
let browser: Browser;
let page: Page;

const message = () => page.getByLabel("Message", { exact: true });
const lastAnswer = () => page.locator("li.turn-assistant").last();
const status = () => page.getByRole("status");

async function say(text: string): Promise<void> {
  await message().fill(text);
  await message().press("Enter");
}

/** The data of every frame of the context's latest run, as the server replays them. */
async function replay(contextId: string): Promise<Record<string, unknown>[]> {
  const response = await fetch(`${server?.url}/agents/demo/contexts/${contextId}/stream`, {
    headers: { Accept: "text/event-stream", "Last-Event-ID": "0" },
  });
  expect(response.status).toBe(200);
  const frames: Record<string, unknown>[] = [];
  if (response.body === null) return frames;
  for await (const item of decodeSSE(response.body)) frames.push(JSON.parse(item.data) as Record<string, unknown>);
  return frames;
}

describe.skipIf(skip !== undefined)("Stop and approvals on the chat page", () => {
  beforeAll(async () => {
    mkdirSync(OUTPUT, { recursive: true });
    modules = mkdtempSync(join(tmpdir(), "agentkeel-slow-"));
    writeFileSync(join(modules, "slow_agents.py"), SLOW_FACTORY);
    const framework = join(modules, "framework.json");
    writeFileSync(
      framework,
      JSON.stringify({ agents: { demo: { factory: "slow_agents:make" } }, server: { heartbeatSeconds: 1 } }),
    );
    const previous = { framework: process.env["AGENTKEEL_FRAMEWORK"], path: process.env["PYTHONPATH"] };
    process.env["AGENTKEEL_FRAMEWORK"] = framework;
    process.env["PYTHONPATH"] = [modules, previous.path].filter((part) => part !== undefined).join(":");
    try {
      server = await startAgentkeel({ ui: true });
    } finally {
      if (previous.framework === undefined) delete process.env["AGENTKEEL_FRAMEWORK"];
      else process.env["AGENTKEEL_FRAMEWORK"] = previous.framework;
      if (previous.path === undefined) delete process.env["PYTHONPATH"];
      else process.env["PYTHONPATH"] = previous.path;
    }
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    const context = await browser.newContext({ viewport: { width: 900, height: 800 } });
    page = await context.newPage();
    page.setDefaultTimeout(15_000);
  });

  afterAll(async () => {
    await browser?.close();
    await server?.dispose();
    if (modules !== "") rmSync(modules, { recursive: true, force: true });
  });

  it("Stop during a slow answer cancels the run on the server", async () => {
    await page.goto(`${server?.url}/`);
    await expect.poll(() => status().textContent()).toBe("Ready");
    await say("Tell me everything you can do");
    await expect.poll(() => status().textContent()).toBe("Answering…");
    const text = lastAnswer().locator(".text");
    await expect.poll(async () => (await text.textContent()) ?? "", { timeout: 15_000 }).not.toBe("");
    await page.screenshot({ path: join(OUTPUT, "stop-1-streaming.png") });
    await page.getByRole("button", { name: "Stop" }).click();
    await expect.poll(() => status().textContent(), { timeout: 15_000 }).not.toBe("Answering…");
    await expect.poll(() => lastAnswer().textContent()).toContain("Stopped.");
    // the end of the full answer never came (a cancelled model call leaves no answer:
    // the done frame's text, which the page shows, is what the agent kept)
    const shown = (await lastAnswer().textContent()) ?? "";
    expect(shown).not.toContain("ask me a question");
    const contextId = (await page.getByTestId("context-id").textContent()) ?? "";
    expect(contextId).toMatch(/^ctx-/);
    const frames = await replay(contextId);
    const done = frames.at(-1);
    expect(done?.["done"]).toBe(true);
    expect(done?.["status"]).toBe("cancelled"); // the server's run ended, not only the page's stream
    await new Promise((r) => setTimeout(r, 1000));
    expect((await lastAnswer().textContent()) ?? "").toBe(shown); // nothing more arrived
    const again = await fetch(`${server?.url}/agents/demo/contexts/${contextId}/cancel`, { method: "POST" });
    expect(again.status).toBe(409);
    expect(((await again.json()) as { error: { code: string } }).error.code).toBe("no_active_run");
    await page.screenshot({ path: join(OUTPUT, "stop-2-stopped.png") });
  });

  it("an approval shows the tool's input, and approving runs it", async () => {
    await say("Delete notes.txt");
    const panel = page.getByRole("region", { name: "Approval needed" });
    await panel.waitFor({ timeout: 20_000 });
    expect(await panel.getByTestId("interrupt-prompt").textContent()).toBe("Run delete_file: Delete the file notes.txt");
    await page.screenshot({ path: join(OUTPUT, "approve-1-asked.png") });
    await panel.getByRole("button", { name: "Approve" }).click();
    await expect.poll(() => status().textContent(), { timeout: 20_000 }).toBe("Ready");
    await expect.poll(() => lastAnswer().locator(".text").textContent()).toContain("notes.txt");
    expect(await lastAnswer().getByRole("list", { name: "Tool activity" }).textContent()).toContain(
      "delete_file success",
    );
    await page.screenshot({ path: join(OUTPUT, "approve-2-done.png") });
  });
});
