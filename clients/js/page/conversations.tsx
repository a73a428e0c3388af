/**
 * The sidebar of the chat page: the caller's conversations with the agent (title and
 * time of the last change), newest first, from `GET /agents/{name}/contexts`. A click
 * switches the chat to that conversation, whose transcript the server shows again.
 */

import { useEffect, useMemo, useState } from "react";

import { AgentClient, type ContextSummary } from "../src/index.js";

export interface ConversationsProps {
  agent: string;
  /** The conversation the chat shows now (marked `aria-current`). */
  current: string | undefined;
  /** Anything that changes when the list may have changed (a turn ended, a switch). */
  version: string;
  onSwitch: (contextId: string) => void;
}

export function Conversations({ agent, current, version, onSwitch }: ConversationsProps) {
  const client = useMemo(() => new AgentClient({ url: "", agent }), [agent]);
  const [items, setItems] = useState<readonly ContextSummary[]>([]);

  useEffect(() => {
    let live = true;
    client.listContexts({ limit: 50 }).then(
      (page) => {
        if (live) setItems(page.contexts);
      },
      () => undefined, // the list is a convenience: the chat works without it
    );
    return () => {
      live = false;
    };
  }, [client, version]);

  return (
    <nav className="conversations" aria-label="Conversations">
      <h2>Conversations</h2>
      {items.length === 0 ? (
        <p className="empty">None yet.</p>
      ) : (
        <ul>
          {items.map((item) => (
            <li key={item.contextId}>
              <button
                type="button"
                className="link conversation"
                aria-current={item.contextId === current ? "true" : undefined}
                onClick={() => onSwitch(item.contextId)}
              >
                <span className="title">{item.title === "" ? "Untitled" : item.title}</span>
                <time dateTime={item.updatedAt}>{new Date(item.updatedAt).toLocaleString()}</time>
              </button>
            </li>
          ))}
        </ul>
      )}
    </nav>
  );
}
