/**
 * Start a real `agentkeel serve` for the integration and browser tests.
 *
 * The server runs the example framework (examples/framework.json, or the file named by
 * AGENTKEEL_FRAMEWORK) with its storage moved into a fresh temporary folder, on a free
 * loopback port. The command is `<repo>/.venv/bin/agentkeel serve`, or the words of
 * AGENTKEEL_SERVE (e.g. `agentkeel serve`) when set. When the command is missing, the
 * tests that need it are skipped with the reason printed (or fail, under
 * AGENTKEEL_REQUIRE_SERVICES=1).
 */

import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "..");

function command(): string[] {
  const custom = process.env["AGENTKEEL_SERVE"];
  if (custom !== undefined && custom.trim() !== "") return custom.trim().split(/\s+/);
  return [join(REPO, ".venv", "bin", "agentkeel"), "serve"];
}

/** Why `agentkeel serve` cannot run here, or undefined when it can. */
export function serveUnavailable(): string | undefined {
  const [program, ...args] = command();
  if (program === undefined) return "AGENTKEEL_SERVE is empty";
  const probe = spawnSync(program, [...args, "--help"], { encoding: "utf8", timeout: 30_000 });
  if (probe.error !== undefined) return `${program} cannot be run (${probe.error.message}); run \`make install\` first`;
  if (probe.status !== 0) {
    return `\`${command().join(" ")}\` does not exist yet: ${(probe.stderr || probe.stdout).trim().split("\n").at(-1) ?? ""}`;
  }
  return undefined;
}

/**
 * Print why a file's tests against a real server are skipped; with
 * AGENTKEEL_REQUIRE_SERVICES=1 (as CI sets it) a missing server fails instead.
 */
export function reportSkip(reason: string | undefined, file: string): void {
  if (reason === undefined) return;
  if (process.env["AGENTKEEL_REQUIRE_SERVICES"] === "1") {
    throw new Error(`[${file}] AGENTKEEL_REQUIRE_SERVICES=1 but the server cannot run: ${reason}`);
  }
  console.warn(`[${file}] skipping the tests against a real server: ${reason}`);
}

export interface RunningServer {
  /** The base URL, e.g. http://127.0.0.1:43123 */
  url: string;
  /** The folder holding framework.json and the server's data. */
  dir: string;
  /** Stop the server (SIGTERM, then SIGKILL after a grace period). */
  stop(): Promise<void>;
  /** Stop it and start it again on the same port, with the same data. */
  restart(): Promise<void>;
  /** Stop it and delete its data. */
  dispose(): Promise<void>;
}

export interface StartOptions {
  /** Serve the chat page at `/` (`server.ui`). */
  ui?: boolean;
  /** Change the framework before it is written (`dir` is the server's folder). */
  edit?: (framework: Record<string, unknown>, dir: string) => void;
  /** Extra environment variables of the server process (e.g. PYTHONPATH for a factory). */
  env?: Record<string, string>;
}

/** Write a framework.json whose storage lives in a new temporary folder. */
function writeFramework(dir: string, options: StartOptions): string {
  const source = process.env["AGENTKEEL_FRAMEWORK"] ?? join(REPO, "examples", "framework.json");
  const framework = JSON.parse(readFileSync(source, "utf8")) as Record<string, unknown>;
  framework["sessionDir"] = join(dir, "sessions");
  framework["checkpointer"] = { dir: join(dir, "checkpoints") };
  const server = (framework["server"] ?? {}) as Record<string, unknown>;
  framework["server"] = { ...server, host: "127.0.0.1", ...(options.ui ? { ui: true } : {}) };
  options.edit?.(framework, dir);
  const path = join(dir, "framework.json");
  writeFileSync(path, JSON.stringify(framework, null, 2));
  return path;
}

/** Start `agentkeel serve` on a free port and wait until /healthz answers. */
export async function startAgentkeel(options: StartOptions = {}): Promise<RunningServer> {
  const dir = mkdtempSync(join(tmpdir(), "agentkeel-js-"));
  const framework = writeFramework(dir, options);
  let child: ChildProcess | undefined;
  let port = 0;

  const launch = async () => {
    const [program, ...args] = command();
    if (program === undefined) throw new Error("no serve command");
    const started = spawn(program, [...args, framework, "--host", "127.0.0.1", "--port", String(port)], {
      cwd: dir,
      stdio: ["ignore", "pipe", "pipe"],
      ...(options.env === undefined ? {} : { env: { ...process.env, ...options.env } }),
    });
    child = started;
    let output = "";
    let timer: ReturnType<typeof setTimeout> | undefined;
    const announced = new Promise<number>((resolveAnnounced, reject) => {
      const onData = (chunk: Buffer) => {
        output += chunk.toString("utf8");
        const match = /http:\/\/127\.0\.0\.1:(\d+)/.exec(output);
        if (match?.[1] !== undefined) resolveAnnounced(Number(match[1]));
      };
      started.stdout?.on("data", onData);
      started.stderr?.on("data", onData);
      started.once("exit", (code) => reject(new Error(`agentkeel serve exited with ${code}:\n${output}`)));
      timer = setTimeout(() => reject(new Error(`agentkeel serve did not start in time:\n${output}`)), 30_000);
    });
    try {
      port = await announced;
    } catch (error) {
      started.kill("SIGKILL");
      throw error;
    } finally {
      clearTimeout(timer);
    }
    await waitHealthy(`http://127.0.0.1:${port}`);
  };

  const stop = async () => {
    const running = child;
    child = undefined;
    if (running === undefined || running.exitCode !== null) return;
    const exited = new Promise<void>((resolveExit) => running.once("exit", () => resolveExit()));
    running.kill("SIGTERM");
    const timer = setTimeout(() => running.kill("SIGKILL"), 10_000);
    await exited;
    clearTimeout(timer);
  };

  try {
    await launch();
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  return {
    get url() {
      return `http://127.0.0.1:${port}`;
    },
    dir,
    stop,
    restart: async () => {
      await stop();
      await launch();
    },
    dispose: async () => {
      await stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function waitHealthy(url: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      const response = await fetch(`${url}/healthz`);
      if (response.ok) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`${url}/healthz did not answer in time`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
