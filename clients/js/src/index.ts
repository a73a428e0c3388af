/**
 * agentkeel: the headless TypeScript client of an agentkeel server.
 *
 * `AgentClient` speaks the native wire (SPEC sections 3 and 4); `AgentStore` turns its
 * frames into a chat view with a pure reducer; `AgentChat` binds the two for any UI
 * framework. The React hook lives in `agentkeel/react`.
 */

export { AgentChat, type AgentChatOptions } from "./agent-chat.js";
export {
  AgentClient,
  type AgentClientOptions,
  type ApprovalDecision,
  type CallOptions,
  type Decision,
  type ForkOptions,
  type HeadersOption,
  type ListContextsOptions,
  type MessageInput,
  type MessagesOptions,
  type MultitaskPolicy,
  type RetryOptions,
  type TurnOptions,
  listAgents,
} from "./client.js";
export { AgentError, ContextExistsError, MessageNotFoundError, NoActiveRunError } from "./errors.js";
export type { MemoryItem, MemoryPage, MemoryQuery } from "./memory.js";
export { type SSEFrame, type SSESource, SSEDecoder, decodeSSE } from "./sse.js";
export {
  type ActivityLine,
  type AgentView,
  type AssistantTurn,
  type ChatStatus,
  type StoreAction,
  type Turn,
  type UserTurn,
  AgentStore,
  applyAction,
  applyFrame,
  initialView,
} from "./store.js";
export type {
  AgentInfo,
  CancelResult,
  ContextPage,
  ContextSummary,
  DoneFrame,
  ErrorBody,
  ErrorEvent,
  EventFrame,
  ForkResult,
  Interrupt,
  InterruptEvent,
  JSONValue,
  MessagePage,
  RunEvent,
  RunStatus,
  SendResult,
  StatusEvent,
  StepEvent,
  StreamFrame,
  ThinkingEvent,
  TokenEvent,
  ToolCallEvent,
  ToolResultEvent,
  TranscriptMessage,
  Usage,
} from "./types.js";
export { RUN_EVENT_TYPES, isDoneFrame, parseStreamFrame, toSendResult } from "./types.js";
