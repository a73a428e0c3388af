/**
 * The chat itself, built on `useAgent`: streaming turns, thinking, tool activity, the
 * status, errors, the context id (kept in localStorage so a reload shows the
 * conversation again, from the server's transcript), the answers to interrupts, Stop
 * while a run goes on, Edit on the person's messages and Regenerate on the last answer,
 * and the sidebar of the caller's conversations to switch between.
 */

import { type FormEvent, type KeyboardEvent, useCallback, useEffect, useId, useRef, useState } from "react";

import type { AssistantTurn, Decision, Interrupt } from "../src/index.js";
import { useAgent } from "../src/react/index.js";
import { Conversations } from "./conversations.js";
import { MemoryPanel } from "./memory-panel.js";

const STATUS_WORDS = {
  idle: "Ready",
  streaming: "Answering…",
  suspended: "Waiting for you",
  error: "Something went wrong",
} as const;

function storageKey(agent: string): string {
  return `agentkeel:${agent}:contextId`;
}

function readStored(agent: string): string | undefined {
  try {
    return window.localStorage.getItem(storageKey(agent)) ?? undefined;
  } catch {
    return undefined; // storage disabled: the conversation lasts as long as the page
  }
}

function writeStored(agent: string, contextId: string | undefined): void {
  try {
    if (contextId === undefined) window.localStorage.removeItem(storageKey(agent));
    else window.localStorage.setItem(storageKey(agent), contextId);
  } catch {
    // storage disabled or full: nothing to keep
  }
}

export function Chat({ agent }: { agent: string }) {
  const [initialContext] = useState(() => readStored(agent));
  const chat = useAgent({
    agent,
    ...(initialContext === undefined ? {} : { contextId: initialContext }),
    onContext: (id) => writeStored(agent, id),
  });
  const { status, pendingInterrupt, error, turns, contextId, send, resume, stop, reset, attach, edit, regenerate, load } =
    chat;
  const [draft, setDraft] = useState("");
  const input = useRef<HTMLTextAreaElement>(null);
  const end = useRef<HTMLDivElement>(null);
  const messageId = useId();
  const streaming = status === "streaming";
  const waiting = pendingInterrupt !== undefined && !streaming;

  // After a reload, useAgent shows the transcript; then follow the latest run on top of
  // it (still going, or waiting on a decision).
  useEffect(() => {
    if (initialContext !== undefined) attach().catch(() => undefined);
  }, [attach, initialContext]);

  useEffect(() => {
    end.current?.scrollIntoView?.({ block: "end" });
  }, [turns, waiting, error]);

  const submit = useCallback(
    (event?: FormEvent) => {
      event?.preventDefault();
      const text = draft.trim();
      if (text === "" || streaming || waiting) return;
      setDraft("");
      send(text).catch(() => undefined); // the view shows the error
      input.current?.focus();
    },
    [draft, send, streaming, waiting],
  );

  const onKeyDown = (event: KeyboardEvent<HTMLTextAreaElement>) => {
    if (event.key === "Enter" && !event.shiftKey && !event.nativeEvent.isComposing) submit(event);
  };

  const decide = (decision: Decision) => {
    resume(decision).catch(() => undefined);
    input.current?.focus();
  };

  const editTurn = (messageId: string, text: string) => {
    edit(messageId, text).catch(() => undefined);
    input.current?.focus();
  };

  const answerAgain = (messageId: string) => {
    regenerate(messageId).catch(() => undefined);
  };

  const lastAnswer = turns.at(-1);
  const idle = !streaming && !waiting;

  const switchTo = (id: string) => {
    if (id === contextId || streaming) return;
    writeStored(agent, id);
    reset(id);
    load().catch(() => undefined); // the view shows the error
    input.current?.focus();
  };

  const startOver = () => {
    reset();
    setDraft("");
    input.current?.focus();
  };

  return (
    <main className="app">
      <header className="bar">
        <h1>{agent}</h1>
        <p className={`status status-${status}`} role="status" aria-live="polite">
          {STATUS_WORDS[status]}
        </p>
      </header>

      <section className="context" aria-label="Conversation">
        <p>
          {contextId === undefined ? (
            "New conversation"
          ) : (
            <>
              Conversation <code data-testid="context-id">{contextId}</code>
            </>
          )}
        </p>
        <button type="button" onClick={startOver} disabled={contextId === undefined && turns.length === 0}>
          New conversation
        </button>
      </section>

      <Conversations
        agent={agent}
        current={contextId}
        version={`${contextId ?? ""}:${status === "streaming" ? "streaming" : turns.length}`}
        onSwitch={switchTo}
      />

      <MemoryPanel agent={agent} refresh={status === "streaming" ? "streaming" : turns.length} />

      <ol className="turns" aria-label="Messages">
        {turns.map((turn) =>
          turn.role === "user" ? (
            <UserView key={turn.id} text={turn.text} {...(idle && turn.messageId ? { onEdit: (text: string) => editTurn(turn.messageId ?? "", text) } : {})} />
          ) : (
            <AssistantView
              key={turn.id}
              turn={turn}
              {...(idle && turn === lastAnswer && turn.messageId ? { onRegenerate: () => answerAgain(turn.messageId ?? "") } : {})}
            />
          ),
        )}
      </ol>

      {error !== undefined && (
        <p className="error" role="alert">
          <strong>Error ({error.code}):</strong> {error.message}
        </p>
      )}

      {waiting && <InterruptPanel key={pendingInterrupt.id} interrupt={pendingInterrupt} onDecide={decide} />}
      <div ref={end} />

      <form className="composer" onSubmit={submit}>
        <label htmlFor={messageId}>Message</label>
        <div className="composer-row">
          <textarea
            id={messageId}
            ref={input}
            rows={2}
            value={draft}
            placeholder={waiting ? "Answer the request above first" : "Ask something… (Enter sends, Shift+Enter breaks the line)"}
            onChange={(event) => setDraft(event.target.value)}
            onKeyDown={onKeyDown}
            autoFocus
          />
          {streaming ? (
            <button type="button" className="stop" onClick={() => void stop()}>
              Stop
            </button>
          ) : (
            <button type="submit" disabled={waiting || draft.trim() === ""}>
              Send
            </button>
          )}
        </div>
      </form>
    </main>
  );
}

/** A message of the person; with `onEdit`, an Edit button turns it into a form that sends the new text. */
function UserView({ text, onEdit }: { text: string; onEdit?: (text: string) => void }) {
  const [editing, setEditing] = useState<string | undefined>(undefined);
  const fieldId = useId();
  const focus = useCallback((element: HTMLTextAreaElement | null) => element?.focus(), []);
  if (editing !== undefined && onEdit !== undefined) {
    return (
      <li className="turn turn-user">
        <span className="who">You</span>
        <form
          className="edit"
          onSubmit={(event) => {
            event.preventDefault();
            const changed = editing.trim();
            setEditing(undefined);
            if (changed !== "" && changed !== text) onEdit(changed);
          }}
        >
          <label htmlFor={fieldId}>Edit your message</label>
          <textarea id={fieldId} ref={focus} rows={2} value={editing} onChange={(event) => setEditing(event.target.value)} />
          <div className="actions">
            <button type="submit">Send edit</button>
            <button type="button" className="link" onClick={() => setEditing(undefined)}>
              Cancel
            </button>
          </div>
        </form>
      </li>
    );
  }
  return (
    <li className="turn turn-user">
      <span className="who">You</span>
      <p className="text">{text}</p>
      {onEdit !== undefined && (
        <button type="button" className="link turn-action" onClick={() => setEditing(text)}>
          Edit
        </button>
      )}
    </li>
  );
}

function AssistantView({ turn, onRegenerate }: { turn: AssistantTurn; onRegenerate?: () => void }) {
  const streaming = turn.status === "streaming";
  return (
    <li className="turn turn-assistant" aria-busy={streaming}>
      <span className="who">{turn.agent ?? "Agent"}</span>
      {turn.thinking !== "" && (
        <details className="thinking">
          <summary>Thinking</summary>
          <p>{turn.thinking}</p>
        </details>
      )}
      {turn.activity.length > 0 && (
        <ul className="activity" aria-label="Tool activity">
          {turn.activity.map((line) => (
            <li key={line.id} className={`tool tool-${line.status}`}>
              <span aria-hidden="true">{line.status === "running" ? "○" : line.status === "success" ? "✓" : "✗"}</span>{" "}
              <code>{line.name}</code> {line.status === "running" ? "running" : line.status}
            </li>
          ))}
        </ul>
      )}
      {turn.text !== "" && <p className="text">{turn.text}</p>}
      {streaming && turn.text === "" && <p className="pending">…</p>}
      {turn.status === "suspended" && <p className="note">Waiting for you.</p>}
      {turn.activity.length === 0 && turn.toolCalls.length > 0 && (
        <p className="note">
          Used {turn.toolCalls.map((name, i) => (
            <code key={`${name}-${i}`}>{name}</code>
          ))}
        </p>
      )}
      {turn.status === "stopped" && <p className="note">Stopped here; the agent may still finish on the server.</p>}
      {turn.status === "cancelled" && <p className="note">Stopped.</p>}
      {onRegenerate !== undefined && (
        <button type="button" className="link turn-action" onClick={onRegenerate}>
          Regenerate
        </button>
      )}
    </li>
  );
}

function InterruptPanel({
  interrupt,
  onDecide,
}: {
  interrupt: Interrupt;
  onDecide: (decision: Decision) => void;
}) {
  // the panel's first control takes the focus when the interrupt appears
  const first = useCallback((element: HTMLElement | null) => element?.focus(), []);
  const [reason, setReason] = useState("");
  const [answer, setAnswer] = useState("");
  const headingId = useId();
  const fieldId = useId();

  if (interrupt.kind === "approval") {
    const tool = interrupt.tool ?? "a tool";
    return (
      <section className="interrupt" aria-labelledby={headingId}>
        <h2 id={headingId}>Approval needed</h2>
        <p>
          The agent wants to run <code>{tool}</code>:
        </p>
        {/* the server's account of the call (the tool's describe text or its input, secrets hidden) */}
        <p className="interrupt-prompt" data-testid="interrupt-prompt">
          {interrupt.prompt ?? `Run ${tool}`}
        </p>
        <div className="actions">
          <button type="button" ref={first} className="approve" onClick={() => onDecide({ approved: true })}>
            Approve
          </button>
        </div>
        <form
          className="reject"
          onSubmit={(event) => {
            event.preventDefault();
            const why = reason.trim();
            onDecide(why === "" ? { approved: false } : { approved: false, reason: why });
          }}
        >
          <label htmlFor={fieldId}>Reason for rejecting (optional)</label>
          <div className="composer-row">
            <input id={fieldId} value={reason} onChange={(event) => setReason(event.target.value)} />
            <button type="submit">Reject</button>
          </div>
        </form>
      </section>
    );
  }
  return (
    <section className="interrupt" aria-labelledby={headingId}>
      <h2 id={headingId}>The agent asks you</h2>
      <form
        onSubmit={(event) => {
          event.preventDefault();
          if (answer.trim() !== "") onDecide(answer.trim());
        }}
      >
        <label htmlFor={fieldId}>{interrupt.prompt ?? "Your answer"}</label>
        <div className="composer-row">
          <input id={fieldId} ref={first} value={answer} onChange={(event) => setAnswer(event.target.value)} />
          <button type="submit" disabled={answer.trim() === ""}>
            Answer
          </button>
        </div>
        <button type="button" className="link" onClick={() => onDecide({ cancel: true })}>
          Cancel the request
        </button>
      </form>
    </section>
  );
}
