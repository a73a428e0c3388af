/**
 * The HTTP helpers of the client: headers, JSON bodies, typed errors from error bodies,
 * backoff sleeps and idempotency keys. No wire knowledge beyond SPEC's error shape.
 */

import { AgentError, errorFromBody } from "./errors.js";
import { parseErrorBody } from "./types.js";

/** Headers for every request, or a function that returns them (e.g. a fresh token). */
export type HeadersOption = HeadersInit | (() => HeadersInit | Promise<HeadersInit>);

export async function resolveHeaders(option: HeadersOption | undefined): Promise<HeadersInit> {
  if (option === undefined) return {};
  return typeof option === "function" ? option() : option;
}

export async function readJSON(response: Response): Promise<unknown> {
  try {
    return (await response.json()) as unknown;
  } catch (error) {
    throw new AgentError("invalid_response", `the server did not answer JSON (${describe(error)})`, 0, {
      cause: error,
    });
  }
}

/** The AgentError of a non-2xx response, from its `{"error": {...}}` body when it has one. */
export async function errorFrom(response: Response): Promise<AgentError> {
  let body: unknown;
  try {
    body = JSON.parse(await response.text()) as unknown;
  } catch {
    body = undefined;
  }
  const error = parseErrorBody(body);
  if (error !== undefined) return errorFromBody(error.code, error.message, response.status);
  return new AgentError(`http_${response.status}`, `the server answered ${response.status} ${response.statusText}`, response.status);
}

export function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

export function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** A random UUID (version 4); works where `crypto.randomUUID` does not (plain-HTTP pages). */
export function newIdempotencyKey(): string {
  if (typeof crypto.randomUUID === "function") return crypto.randomUUID();
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  bytes[6] = ((bytes[6] ?? 0) & 0x0f) | 0x40;
  bytes[8] = ((bytes[8] ?? 0) & 0x3f) | 0x80;
  const hex = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** The context id a call acts on, or the `no_context` error. */
export function requireContext(contextId: string | undefined, what: string): string {
  if (contextId === undefined) throw new AgentError("no_context", `there is no conversation to ${what}`, 0);
  return contextId;
}

/** The headers of a JSON request that expects a JSON answer. */
export function jsonHeaders(): Record<string, string> {
  return { "Content-Type": "application/json", Accept: "application/json" };
}

/** A query string (`?a=1&b=x`) of the defined values, or `""`. */
export function searchOf(params: { readonly [name: string]: string | number | undefined }): string {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) if (value !== undefined) search.set(name, String(value));
  const text = search.toString();
  return text === "" ? "" : `?${text}`;
}
