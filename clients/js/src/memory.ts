/**
 * Memory across conversations, as the client sees it: what an agent remembers of the
 * caller (`GET /agents/{name}/memory`), searchable, and erasable item by item or whole.
 * Vectors never leave the server; these are the items' texts and where they came from.
 */

import { AgentError } from "./errors.js";
import type { JSONValue } from "./types.js";

/** One remembered item. `score` is set on search results (`q`), the cosine similarity. */
export interface MemoryItem {
  key: string;
  namespace: string;
  text: string;
  value: JSONValue;
  createdAt: string;
  updatedAt: string;
  source: { contextId: string | null; agent: string | null };
  score?: number;
}

/** A page of items, newest first; `nextCursor` is null on the last page. */
export interface MemoryPage {
  items: MemoryItem[];
  nextCursor: string | null;
}

/** Options of `AgentClient.memory`: a search query, or a page. */
export interface MemoryQuery {
  q?: string;
  limit?: number;
  cursor?: string;
  signal?: AbortSignal;
}

function malformed(): AgentError {
  return new AgentError("invalid_response", "the server's memory listing is malformed", 0);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function parseItem(raw: unknown): MemoryItem {
  if (!isObject(raw) || typeof raw.key !== "string" || typeof raw.text !== "string") throw malformed();
  const source = isObject(raw.source) ? raw.source : {};
  const item: MemoryItem = {
    key: raw.key,
    namespace: typeof raw.namespace === "string" ? raw.namespace : "memories",
    text: raw.text,
    value: (raw.value ?? null) as JSONValue,
    createdAt: typeof raw.createdAt === "string" ? raw.createdAt : "",
    updatedAt: typeof raw.updatedAt === "string" ? raw.updatedAt : "",
    source: {
      contextId: typeof source.contextId === "string" ? source.contextId : null,
      agent: typeof source.agent === "string" ? source.agent : null,
    },
  };
  if (typeof raw.score === "number") item.score = raw.score;
  return item;
}

/** Validate a `GET /agents/{name}/memory` body. */
export function parseMemoryPage(body: unknown): MemoryPage {
  if (!isObject(body) || !Array.isArray(body.items)) throw malformed();
  const cursor = body.nextCursor;
  return { items: body.items.map(parseItem), nextCursor: typeof cursor === "string" ? cursor : null };
}

/** The query string of a memory listing ("" when nothing is set). */
export function memorySearch(query: MemoryQuery): string {
  const params = new URLSearchParams();
  if (query.q !== undefined) params.set("q", query.q);
  if (query.limit !== undefined) params.set("limit", String(query.limit));
  if (query.cursor !== undefined) params.set("cursor", query.cursor);
  const text = params.toString();
  return text === "" ? "" : `?${text}`;
}
