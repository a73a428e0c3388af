/**
 * Conversations on the chat page, in a real browser against a real `agentkeel serve`:
 * a conversation, a reload that shows it again from the server's transcript, a second
 * conversation in the sidebar and switching back, Regenerate and Edit. Each step is
 * checked on the page and against the server's own transcript.
 *
 * Chromium is Debian's /usr/bin/chromium (or CHROMIUM_PATH), driven by playwright-core;
 * screenshots go to AGENTKEEL_TEST_OUTPUT (default `test-output/`), prefixed `conv-`.
 */

import { existsSync, mkdirSync, readdirSync, rmSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import { type Browser, type Page, chromium } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { type RunningServer, reportSkip, serveUnavailable, startAgentkeel } from "../support/agentkeel-server.js";

const CHROMIUM = process.env["CHROMIUM_PATH"] ?? "/usr/bin/chromium";
const CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"];
const OUTPUT = resolve(
  process.env["AGENTKEEL_TEST_OUTPUT"] ?? join(dirname(fileURLToPath(import.meta.url)), "..", "..", "test-output"),
);
const BLUE = "Remember that my favourite colour is blue";
const GREEN = "Remember that my favourite colour is green";

function skipReason(): string | undefined {
  if (!existsSync(CHROMIUM)) return `${CHROMIUM} is missing (apt-get install -y chromium)`;
  return serveUnavailable();
}

const skip = skipReason();
reportSkip(skip, "conversations.test.ts");

let server: RunningServer;
let browser: Browser;
let page: Page;
let shot = 0;
const consoleErrors: string[] = [];

interface Transcript {
  messages: { id: string; role: "user" | "assistant"; text: string }[];
}

async function screenshot(name: string): Promise<void> {
  shot += 1;
  await page.screenshot({ path: join(OUTPUT, `conv-${String(shot).padStart(2, "0")}-${name}.png`) });
}

/** The transcript as the server has it (the page's own origin, no credentials). */
async function transcript(contextId: string): Promise<Transcript["messages"]> {
  const response = await fetch(`${server.url}/agents/demo/contexts/${contextId}/messages`);
  expect(response.status).toBe(200);
  return ((await response.json()) as Transcript).messages;
}

const message = () => page.getByLabel("Message", { exact: true });
const status = () => page.getByRole("status");
const sidebar = () => page.getByRole("navigation", { name: "Conversations" });
const userTexts = () => page.locator("li.turn-user .text").allTextContents();
const contextId = async () => (await page.getByTestId("context-id").textContent()) ?? "";

async function say(text: string): Promise<void> {
  await message().fill(text);
  await message().press("Enter");
  await settled();
}

async function settled(): Promise<void> {
  await expect.poll(async () => status().textContent(), { timeout: 20_000 }).toBe("Ready");
}

describe.skipIf(skip !== undefined)("conversations on the chat page", () => {
  let first = "";

  beforeAll(async () => {
    mkdirSync(OUTPUT, { recursive: true });
    for (const old of readdirSync(OUTPUT).filter((name) => /^conv-\d\d-.*\.png$/.test(name))) rmSync(join(OUTPUT, old));
    server = await startAgentkeel({ ui: true });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    const context = await browser.newContext({ viewport: { width: 1024, height: 900 } });
    page = await context.newPage();
    page.setDefaultTimeout(15_000);
    page.on("console", (entry) => {
      if (entry.type() === "error") consoleErrors.push(entry.text());
    });
    page.on("pageerror", (error) => consoleErrors.push(error.message));
  });

  afterAll(async () => {
    await browser?.close();
    await server?.dispose();
  });

  it("holds a conversation, and a reload shows it again", async () => {
    await page.goto(`${server.url}/?agent=demo`);
    await expect.poll(() => status().textContent()).toBe("Ready");
    await expect.poll(() => sidebar().textContent()).toContain("None yet.");
    await say(BLUE);
    first = await contextId();
    await expect.poll(() => sidebar().getByRole("button").count()).toBe(1);
    expect(await sidebar().getByRole("button").first().textContent()).toContain(BLUE);
    const answer = await page.locator("li.turn-assistant .text").last().textContent();
    await screenshot("first-conversation");
    await page.reload();
    await expect.poll(userTexts).toEqual([BLUE]);
    await expect.poll(() => page.locator("li.turn-assistant .text").last().textContent()).toBe(answer);
    expect(await contextId()).toBe(first);
    await screenshot("after-reload");
  });

  it("starts a second conversation, lists both, and switches back", async () => {
    await page.getByRole("button", { name: "New conversation" }).click();
    await say("What time is it?");
    const second = await contextId();
    expect(second).not.toBe(first);
    await expect.poll(() => sidebar().getByRole("button").count()).toBe(2);
    const titles = await sidebar().locator(".title").allTextContents();
    expect(titles).toEqual(["What time is it?", BLUE]); // newest first
    expect(await sidebar().locator('[aria-current="true"] .title').textContent()).toBe("What time is it?");
    await screenshot("two-conversations");
    await sidebar().getByRole("button", { name: new RegExp(BLUE) }).click();
    await expect.poll(contextId).toBe(first);
    await expect.poll(userTexts).toEqual([BLUE]);
    expect(await page.evaluate(() => localStorage.getItem("agentkeel:demo:contextId"))).toBe(first);
    await screenshot("switched-back");
  });

  it("regenerates the last answer", async () => {
    const before = await transcript(first);
    await page.locator("li.turn-assistant").last().getByRole("button", { name: "Regenerate" }).click();
    await settled();
    await expect.poll(async () => (await transcript(first)).at(-1)?.id).not.toBe(before.at(-1)?.id);
    const after = await transcript(first);
    expect(after.filter((m) => m.role === "user").map((m) => m.text)).toEqual([BLUE]);
    expect(after[0]?.id).toBe(before[0]?.id); // the question stayed, with its id
    await expect.poll(userTexts).toEqual([BLUE]);
    expect(await page.locator("li.turn-assistant").count()).toBe(1);
    await screenshot("regenerated");
  });

  it("edits the question, and the answer follows it", async () => {
    const before = await transcript(first);
    await page.locator("li.turn-user").first().getByRole("button", { name: "Edit" }).click();
    await page.getByLabel("Edit your message").fill(GREEN);
    await screenshot("editing");
    await page.getByRole("button", { name: "Send edit" }).click();
    await settled();
    await expect.poll(userTexts).toEqual([GREEN]);
    const after = await transcript(first);
    expect(after.filter((m) => m.role === "user").map((m) => m.text)).toEqual([GREEN]);
    expect(after.map((m) => m.id)).not.toContain(before[0]?.id);
    await page.reload();
    await expect.poll(userTexts).toEqual([GREEN]); // the server remembers the edit
    await say("What is my favourite colour?");
    await expect.poll(() => page.locator("li.turn-assistant .text").last().textContent()).toContain("green");
    await screenshot("edited");
    expect(consoleErrors).toEqual([]);
  });
});
