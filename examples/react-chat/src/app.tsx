import { type FormEvent, useState } from "react";
import { useAgent } from "agentkeel/react";

const KEY = "react-chat:contextId";

/** A complete chat in one component: the hook does the wire, the server keeps the memory. */
export function App({ agent }: { agent: string }) {
  const [saved] = useState(() => localStorage.getItem(KEY) ?? undefined);
  const { turns, thinking, activity, status, error, pendingInterrupt, contextId, send, resume, reset, stop } =
    useAgent({
      agent,
      ...(saved ? { contextId: saved } : {}),
      // keep the id so a reload continues the conversation; undefined after reset()
      onContext: (id) => (id ? localStorage.setItem(KEY, id) : localStorage.removeItem(KEY)),
    });
  const [draft, setDraft] = useState("");

  const submit = (event: FormEvent) => {
    event.preventDefault();
    if (!draft.trim()) return;
    send(draft.trim()).catch(() => {}); // errors show up in `error`
    setDraft("");
  };

  return (
    <main style={{ maxWidth: 640, margin: "0 auto", fontFamily: "system-ui", padding: 16 }}>
      <p>
        {status} · {contextId ?? "new conversation"} <button onClick={() => reset()}>New conversation</button>
      </p>
      {turns.map((turn) => (
        <p key={turn.id}>
          <b>{turn.role === "user" ? "You" : "Agent"}:</b> {turn.text}
        </p>
      ))}
      {thinking && (
        <details>
          <summary>Thinking</summary>
          {thinking}
        </details>
      )}
      <ul>
        {activity.map((line) => (
          <li key={line.id}>
            {line.name}: {line.status}
          </li>
        ))}
      </ul>
      {error && <p role="alert">Error {error.code}: {error.message}</p>}
      {status === "suspended" && pendingInterrupt?.kind === "approval" && (
        <p>
          Run {pendingInterrupt.tool}?{" "}
          <button onClick={() => resume({ approved: true })}>Approve</button>{" "}
          <button onClick={() => resume({ approved: false, reason: "not now" })}>Reject</button>
        </p>
      )}
      {status === "suspended" && pendingInterrupt?.kind === "input" && (
        <form
          onSubmit={(event) => {
            event.preventDefault();
            resume(new FormData(event.currentTarget).get("answer") as string);
          }}
        >
          <label>
            {pendingInterrupt.prompt} <input name="answer" />
          </label>
        </form>
      )}
      <form onSubmit={submit}>
        <label>
          Message <input value={draft} onChange={(event) => setDraft(event.target.value)} />
        </label>
        {status === "streaming" ? <button type="button" onClick={stop}>Stop</button> : <button>Send</button>}
      </form>
    </main>
  );
}
