import { useEffect, useMemo, useRef, useSyncExternalStore } from "react";

import { AgentChat } from "../agent-chat.js";
import type { Decision, HeadersOption, RetryOptions } from "../client.js";
import type { AgentView } from "../store.js";
import type { SendResult } from "../types.js";

/** Options of `useAgent`. */
export interface UseAgentOptions {
  /** The server's base URL; `""` (the default) means the page's own origin. */
  url?: string;
  /** The agent's name, as in `framework.json`. */
  agent: string;
  /**
   * The conversation to continue (e.g. one kept in localStorage); absent starts a new
   * one. Passing a different id later switches the chat to that conversation.
   */
  contextId?: string;
  /** Called with the context id when the server sets it, and with `undefined` after `reset()`. */
  onContext?: (contextId: string | undefined) => void;
  /** Extra headers for every request, or a function returning them (read at each request). */
  headers?: HeadersOption;
  /** The fetch to use; defaults to the global one. */
  fetch?: typeof fetch;
  /** Retries of failed requests and dropped streams. */
  retry?: RetryOptions;
}

/** What `useAgent` returns: the view of the conversation and the actions on it. */
export interface UseAgentResult extends AgentView {
  /** A stable ref whose `current` is always the latest context id (safe in callbacks). */
  contextRef: { readonly current: string | undefined };
  /** Send a message; resolves with the run's SendResult (see `AgentChat.send`). */
  send: (text: string) => Promise<SendResult>;
  /** Answer the pending interrupt: `{approved: true}`, `{approved: false, reason}`, or an input answer. */
  resume: (decision: Decision) => Promise<SendResult>;
  /** Start a new conversation, or continue `contextId`. */
  reset: (contextId?: string) => void;
  /** Stop the turn: cancel its run on the server (see `AgentChat.stop`). */
  stop: () => Promise<void>;
  /** Edit a user message by its `messageId` (see `AgentChat.edit`). */
  edit: (messageId: string, text: string) => Promise<SendResult>;
  /** Answer an assistant message again, by its `messageId` (see `AgentChat.regenerate`). */
  regenerate: (messageId: string) => Promise<SendResult>;
  /** Read the conversation's transcript into `turns` again (see `AgentChat.load`). */
  load: () => Promise<void>;
  /** Forget the conversation on the server, then start a new one. */
  deleteContext: () => Promise<void>;
  /** Follow the conversation's latest run (e.g. after a reload); see `AgentChat.attach`. */
  attach: () => Promise<SendResult>;
}

/**
 * Chat with one agent of an agentkeel server.
 *
 * The hook holds an AgentChat per `url` and `agent`, and re-renders on every change of
 * its view. Given a `contextId`, it loads that conversation's transcript into `turns`
 * on mount (and on a switch), so a reloaded page shows the conversation again. It is safe under StrictMode's double effects, and a stream still running at
 * unmount is aborted without any further state update.
 */
export function useAgent(options: UseAgentOptions): UseAgentResult {
  const url = options.url ?? "";
  const { agent, contextId } = options;
  // The latest callbacks and headers, read when used, so a new closure each render
  // neither recreates the chat nor goes stale.
  const latest = useRef(options);
  useEffect(() => {
    latest.current = options;
  });

  const chat = useMemo(
    () =>
      new AgentChat({
        url,
        agent,
        ...(contextId === undefined ? {} : { contextId }),
        onContext: (id) => latest.current.onContext?.(id),
        headers: () => resolveHeaders(latest.current.headers),
        fetch: (input, init) => (latest.current.fetch ?? globalThis.fetch)(input, init),
        ...(options.retry === undefined ? {} : { retry: options.retry }),
      }),
    // A new chat only for another server or agent; contextId changes are followed below.
    // eslint-disable-next-line react-hooks/exhaustive-deps
    [url, agent],
  );

  const view = useSyncExternalStore(chat.subscribe, chat.getSnapshot, chat.getSnapshot);

  // A given (or switched-to) conversation shows its transcript, so a reload shows the chat.
  useEffect(() => {
    if (contextId === undefined) return;
    if (contextId !== chat.contextRef.current) chat.reset(contextId);
    if (chat.getSnapshot().turns.length === 0) chat.load().catch(() => undefined);
  }, [chat, contextId]);

  useEffect(() => () => void chat.abort(), [chat]);

  const actions = useMemo(
    () => ({
      contextRef: chat.contextRef,
      send: (text: string) => chat.send(text),
      resume: (decision: Decision) => chat.resume(decision),
      reset: (id?: string) => chat.reset(id),
      stop: () => chat.stop(),
      edit: (messageId: string, text: string) => chat.edit(messageId, text),
      regenerate: (messageId: string) => chat.regenerate(messageId),
      load: () => chat.load(),
      deleteContext: () => chat.deleteContext(),
      attach: () => chat.attach(),
    }),
    [chat],
  );

  return useMemo(() => ({ ...view, ...actions }), [view, actions]);
}

async function resolveHeaders(option: HeadersOption | undefined): Promise<HeadersInit> {
  if (option === undefined) return {};
  return typeof option === "function" ? option() : option;
}
