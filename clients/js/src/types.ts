/**
 * The native wire of an agentkeel server (SPEC sections 3 and 4), declared once.
 *
 * Each wire shape is written as a small runtime schema, and its TypeScript type is
 * derived from that schema with `Infer`, so the validator and the type can never drift
 * apart. The schemas keep only the fields the SPEC names: unknown extra fields are
 * dropped, and a frame whose event type this client does not know is skipped (see
 * `parseStreamFrame`), so a newer server does not break an older client.
 */

import { AgentError } from "./errors.js";

/** Any JSON value: what a decision to an `input` interrupt may be. */
export type JSONValue = null | boolean | number | string | JSONValue[] | { [key: string]: JSONValue };

// -- a minimal schema kit ---------------------------------------------------------------

/** A runtime check that turns an unknown value into a `T`, or throws with a path. */
interface Schema<T> {
  parse(value: unknown, path: string): T;
}

/** The type a schema produces. */
type Infer<S> = S extends Schema<infer T> ? T : never;

/** A schema marked as an optional object property. */
interface OptionalSchema<T> extends Schema<T | undefined> {
  readonly optional: true;
}

type Shape = Record<string, Schema<unknown>>;
type OptionalKeys<S extends Shape> = { [K in keyof S]: S[K] extends OptionalSchema<unknown> ? K : never }[keyof S];
type RequiredKeys<S extends Shape> = Exclude<keyof S, OptionalKeys<S>>;
type Simplify<T> = { [K in keyof T]: T[K] } & {};
type ObjectOf<S extends Shape> = Simplify<
  { [K in RequiredKeys<S>]: Infer<S[K]> } & {
    [K in OptionalKeys<S>]?: Exclude<Infer<S[K]>, undefined>;
  }
>;

class SchemaError extends Error {}

function fail(path: string, expected: string): never {
  throw new SchemaError(`${path}: expected ${expected}`);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

const string: Schema<string> = {
  parse: (value, path) => (typeof value === "string" ? value : fail(path, "a string")),
};

const integer: Schema<number> = {
  parse: (value, path) => (Number.isInteger(value) ? (value as number) : fail(path, "an integer")),
};

const number: Schema<number> = {
  parse: (value, path) => (typeof value === "number" && Number.isFinite(value) ? value : fail(path, "a number")),
};

/** Any JSON value, as sent (a structured answer, whose shape the agent defines). */
const json: Schema<JSONValue> = {
  parse: (value) => value as JSONValue,
};

function literal<const L extends readonly string[]>(...values: L): Schema<L[number]> {
  return {
    parse: (value, path) =>
      values.includes(value as string) ? (value as L[number]) : fail(path, values.map((v) => `"${v}"`).join(" | ")),
  };
}

function optional<T>(schema: Schema<T>): OptionalSchema<T> {
  return {
    optional: true,
    parse: (value, path) => (value === undefined || value === null ? undefined : schema.parse(value, path)),
  };
}

function array<T>(item: Schema<T>): Schema<T[]> {
  return {
    parse: (value, path) =>
      Array.isArray(value) ? value.map((v, i) => item.parse(v, `${path}[${i}]`)) : fail(path, "an array"),
  };
}

function object<S extends Shape>(shape: S): Schema<ObjectOf<S>> {
  return {
    parse(value, path) {
      if (!isRecord(value)) fail(path, "an object");
      const out: Record<string, unknown> = {};
      for (const [key, schema] of Object.entries(shape)) {
        const parsed = schema.parse(value[key], `${path}.${key}`);
        if (parsed !== undefined) out[key] = parsed;
      }
      return out as ObjectOf<S>;
    },
  };
}

// -- SPEC section 4: run events ---------------------------------------------------------

/** `agent` names the swarm member that produced an event (absent outside a swarm). */
const member = { agent: optional(string) };

const eventSchemas = {
  status: object({ type: literal("status"), status: literal("running"), ...member }),
  step: object({ type: literal("step"), step: integer, ...member }),
  token: object({ type: literal("token"), text: string, ...member }),
  thinking: object({ type: literal("thinking"), text: string, ...member }),
  // `input` and `output` are there only for a tool the server declares `expose`
  tool_call: object({ type: literal("tool_call"), id: string, name: string, input: optional(json), ...member }),
  tool_result: object({
    type: literal("tool_result"),
    id: string,
    name: string,
    status: literal("success", "error"),
    output: optional(json),
    ...member,
  }),
  interrupt: object({
    type: literal("interrupt"),
    id: string,
    kind: literal("approval", "input"),
    tool: optional(string),
    prompt: optional(string),
    ...member,
  }),
  error: object({ type: literal("error"), code: string, message: string, ...member }),
};

/** The run started (or resumed). */
export type StatusEvent = Infer<typeof eventSchemas.status>;
/** A new cycle of the run loop: one model call (`step` is 1-based). */
export type StepEvent = Infer<typeof eventSchemas.step>;
/** A delta of the completion text. */
export type TokenEvent = Infer<typeof eventSchemas.token>;
/** A delta of the model's reasoning. */
export type ThinkingEvent = Infer<typeof eventSchemas.thinking>;
/** A tool execution starts (its `input` only for a tool declared `expose`). */
export type ToolCallEvent = Infer<typeof eventSchemas.tool_call>;
/** A tool execution ended (its `output` only for a tool declared `expose`). */
export type ToolResultEvent = Infer<typeof eventSchemas.tool_result>;
/** The run suspends for a human decision. */
export type InterruptEvent = Infer<typeof eventSchemas.interrupt>;
/** The run failed; `message` is safe to show. */
export type ErrorEvent = Infer<typeof eventSchemas.error>;

/** One event of a run, discriminated on `type` (SPEC section 4). */
export type RunEvent = { [K in keyof typeof eventSchemas]: Infer<(typeof eventSchemas)[K]> }[keyof typeof eventSchemas];

/** The `type` values of `RunEvent`, in SPEC order. */
export const RUN_EVENT_TYPES = Object.keys(eventSchemas) as readonly RunEvent["type"][];

// -- SPEC section 3: results, interrupts, errors ----------------------------------------

const interruptSchema = object({
  id: string,
  kind: literal("approval", "input"),
  tool: optional(string),
  prompt: optional(string),
});

const errorBodySchema = object({ code: string, message: string });

const usageSchema = object({
  inputTokens: integer,
  outputTokens: integer,
  cachedTokens: optional(integer),
  reasoningTokens: optional(integer),
  cost: optional(number),
});

/** The tokens a run used, over all its model calls; `cost` when the model has a price. */
export type Usage = Infer<typeof usageSchema>;

const resultFields = {
  contextId: string,
  runId: string,
  status: literal("completed", "suspended", "failed", "cancelled"),
  text: string,
  toolCalls: array(string),
  interrupt: optional(interruptSchema),
  error: optional(errorBodySchema),
  usage: optional(usageSchema),
  output: optional(json),
};

const sendResultSchema = object(resultFields);

/** A pending human-in-the-loop question: a tool `approval` or an `input` request. */
export type Interrupt = Infer<typeof interruptSchema>;

/** The `{code, message}` of a failure, as in `{"error": {...}}` bodies and failed runs. */
export type ErrorBody = Infer<typeof errorBodySchema>;

/** How a run ended. */
export type RunStatus = SendResult["status"];

/**
 * The outcome of one turn: the body of `POST /agents/{name}/send` and the fields of a
 * stream's `done` frame. `interrupt` is set when `status` is `suspended`, `error` when
 * it is `failed`. `toolCalls` names the tools that ran, in call order. `usage` counts the
 * run's tokens; `output` is the validated structured answer of an agent with an output type.
 */
export type SendResult = Infer<typeof sendResultSchema>;

// -- SPEC section 4: stream frames ------------------------------------------------------

const frameBase = { contextId: string, runId: string, ...member };

const frameHeadSchema = object(frameBase);

/** A frame that carries one run event; `agent` is set on a swarm member's frames. */
export type EventFrame = Simplify<Infer<typeof frameHeadSchema> & { event: RunEvent }>;

/** The last frame of a run: the SendResult, with `done: true`. */
export type DoneFrame = Simplify<Infer<typeof frameHeadSchema> & SendResult & { done: true }>;

/** One frame of `POST /agents/{name}/stream`; every frame carries `contextId`. */
export type StreamFrame = EventFrame | DoneFrame;

function parseEvent(value: unknown): RunEvent | undefined {
  if (!isRecord(value)) fail("event", "an object");
  const type = value["type"];
  if (typeof type !== "string" || !Object.hasOwn(eventSchemas, type)) return undefined;
  return eventSchemas[type as RunEvent["type"]].parse(value, "event") as RunEvent;
}

/** True for the final frame of a run. */
export function isDoneFrame(frame: StreamFrame): frame is DoneFrame {
  return "done" in frame;
}

/** The SendResult a `done` frame carries (without `done` and `agent`). */
export function toSendResult(frame: DoneFrame): SendResult {
  const { done: _done, agent: _agent, ...result } = frame;
  return result;
}

function invalid(what: string, error: unknown): AgentError {
  const detail = error instanceof Error ? error.message : String(error);
  return new AgentError("invalid_response", `the server sent an invalid ${what} (${detail})`, 0);
}

function parseJSON(text: string, what: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw invalid(what, error);
  }
}

/**
 * Parse the `data` of one SSE frame into a typed frame.
 *
 * Returns `undefined` for an event frame whose event type this client does not know
 * (a newer server), so callers can skip it.
 *
 * @throws AgentError with code `invalid_response` when the data is not a SPEC frame.
 */
export function parseStreamFrame(data: string): StreamFrame | undefined {
  const value = parseJSON(data, "stream frame");
  try {
    if (!isRecord(value)) fail("frame", "an object");
    const head = frameHeadSchema.parse(value, "frame");
    if (value["done"] === true) {
      return { ...head, ...sendResultSchema.parse(value, "frame"), done: true };
    }
    const event = parseEvent(value["event"]);
    return event === undefined ? undefined : { ...head, event };
  } catch (error) {
    throw error instanceof SchemaError ? invalid("stream frame", error) : error;
  }
}

const agentListSchema = object({
  agents: array(object({ name: string, description: optional(string), skills: optional(array(string)), a2a: optional(string) })),
});

/**
 * One entry of `GET /agents`: the agent's name, description, tool names (`skills`)
 * and the URL of its A2A agent card (`a2a`).
 */
export type AgentInfo = Infer<typeof agentListSchema>["agents"][number];

/** Parse the body of `GET /agents`. */
export function parseAgentList(value: unknown): AgentInfo[] {
  try {
    return agentListSchema.parse(value, "body").agents;
  } catch (error) {
    throw error instanceof SchemaError ? invalid("agent list", error) : error;
  }
}

// -- SPEC section 3: conversations, transcripts and message ids -------------------------

const contextSummarySchema = object({
  contextId: string,
  title: string,
  createdAt: string,
  updatedAt: string,
  messageCount: integer,
  status: literal("idle", "running", "suspended"),
  interrupt: optional(interruptSchema),
});

const transcriptMessageSchema = object({
  id: string,
  role: literal("user", "assistant"),
  text: string,
  toolCalls: optional(array(string)),
  runId: optional(string),
  createdAt: optional(string),
  agent: optional(string),
});

const cursor = optional(string);
const contextPageSchema = object({ contexts: array(contextSummarySchema), nextCursor: cursor });
const messagePageSchema = object({ messages: array(transcriptMessageSchema), nextCursor: cursor });
const cancelResultSchema = object({ runId: string, status: literal("cancelling") });
const forkResultSchema = object({ contextId: string });

/**
 * One conversation of the caller with an agent: `GET /agents/{name}/contexts[/{id}]`.
 * `title` is the first user message cut to 80 characters (empty with `server.transcript:
 * false`); `interrupt` is set while `status` is `suspended`.
 */
export type ContextSummary = Infer<typeof contextSummarySchema>;

/**
 * One user or assistant message of the transcript, the read-only view of what the agent
 * remembers: `id` is the stable `msg-` id that `replace`, `regenerate` and `fork` take.
 * `toolCalls` names the tools the message called; `agent` is the swarm member that wrote it.
 */
export type TranscriptMessage = Infer<typeof transcriptMessageSchema>;

/** A page of the context list; `nextCursor` is absent on the last page. */
export type ContextPage = Infer<typeof contextPageSchema>;

/** A page of the transcript, oldest first; `nextCursor` is absent on the last page. */
export type MessagePage = Infer<typeof messagePageSchema>;

/** The answer of `POST …/cancel`: the run being stopped. */
export type CancelResult = Infer<typeof cancelResultSchema>;

/** The answer of `POST …/fork`: the new context. */
export type ForkResult = Infer<typeof forkResultSchema>;

function parseWith<T>(schema: Schema<T>, value: unknown, what: string): T {
  try {
    return schema.parse(value, "body");
  } catch (error) {
    throw error instanceof SchemaError ? invalid(what, error) : error;
  }
}

/** Parse the body of `GET /agents/{name}/contexts`. */
export function parseContextPage(value: unknown): ContextPage {
  return parseWith(contextPageSchema, value, "context list");
}

/** Parse the body of `GET /agents/{name}/contexts/{id}`. */
export function parseContextSummary(value: unknown): ContextSummary {
  return parseWith(contextSummarySchema, value, "context summary");
}

/** Parse the body of `GET /agents/{name}/contexts/{id}/messages`. */
export function parseMessagePage(value: unknown): MessagePage {
  return parseWith(messagePageSchema, value, "transcript page");
}

/** Parse the body of `POST /agents/{name}/contexts/{id}/cancel`. */
export function parseCancelResult(value: unknown): CancelResult {
  return parseWith(cancelResultSchema, value, "cancel answer");
}

/** Parse the body of `POST /agents/{name}/contexts/{id}/fork`. */
export function parseForkResult(value: unknown): ForkResult {
  return parseWith(forkResultSchema, value, "fork answer");
}

/** Parse and validate a SendResult (the JSON body of `send`). */
export function parseSendResult(value: unknown): SendResult {
  try {
    return sendResultSchema.parse(value, "result");
  } catch (error) {
    throw error instanceof SchemaError ? invalid("send result", error) : error;
  }
}

/** The `{code, message}` of an `{"error": {...}}` body, or undefined if it is not one. */
export function parseErrorBody(value: unknown): ErrorBody | undefined {
  if (!isRecord(value)) return undefined;
  try {
    return errorBodySchema.parse(value["error"], "error");
  } catch {
    return undefined;
  }
}
