/**
 * "What I remember": the agent's memory of this user across conversations, from
 * `GET /agents/{name}/memory`, with a search and a button to forget each item or all.
 * Shown only for agents that have the semantic tools; it reloads after every turn, so a
 * `remember` call shows up as soon as the answer is in.
 */

import { type FormEvent, useCallback, useEffect, useId, useMemo, useState } from "react";

import { AgentClient, type MemoryItem, listAgents } from "../src/index.js";

const MEMORY_TOOLS = ["remember", "recall", "forget"];

type Shown = { state: "hidden" } | { state: "loading" } | { state: "ready"; items: MemoryItem[] } | { state: "failed"; message: string };

export function MemoryPanel({ agent, refresh }: { agent: string; refresh: unknown }) {
  const client = useMemo(() => new AgentClient({ url: "", agent }), [agent]);
  const [enabled, setEnabled] = useState(false);
  const [shown, setShown] = useState<Shown>({ state: "hidden" });
  const [query, setQuery] = useState("");
  const [searched, setSearched] = useState("");
  const headingId = useId();
  const searchId = useId();

  useEffect(() => {
    let live = true;
    listAgents({ url: "" }).then(
      (agents) => {
        const skills = agents.find((item) => item.name === agent)?.skills ?? [];
        if (live) setEnabled(skills.some((name) => MEMORY_TOOLS.includes(name)));
      },
      () => undefined,
    );
    return () => {
      live = false;
    };
  }, [agent]);

  const load = useCallback(async () => {
    try {
      const page = await client.memory(searched === "" ? { limit: 50 } : { q: searched, limit: 10 });
      setShown({ state: "ready", items: page.items });
    } catch (error: unknown) {
      setShown({ state: "failed", message: String(error) });
    }
  }, [client, searched]);

  useEffect(() => {
    if (enabled) void load();
  }, [enabled, load, refresh]);

  if (!enabled) return null;

  const forget = async (key?: string) => {
    try {
      await client.forgetMemory(key);
    } catch (error: unknown) {
      setShown({ state: "failed", message: String(error) });
      return;
    }
    await load();
  };

  const search = (event: FormEvent) => {
    event.preventDefault();
    setSearched(query.trim());
  };

  return (
    <aside className="memory" aria-labelledby={headingId}>
      <h2 id={headingId}>What I remember</h2>
      <p className="note">Kept across your conversations with this agent; only you can see it.</p>
      <form className="composer-row" onSubmit={search} role="search">
        <label htmlFor={searchId} className="sr-only">
          Search what I remember
        </label>
        <input id={searchId} value={query} placeholder="Search…" onChange={(event) => setQuery(event.target.value)} />
        <button type="submit">Search</button>
      </form>
      {shown.state === "failed" && (
        <p className="error" role="alert">
          {shown.message}
        </p>
      )}
      {shown.state === "ready" && shown.items.length === 0 && (
        <p className="note">{searched === "" ? "Nothing yet." : "No match."}</p>
      )}
      {shown.state === "ready" && shown.items.length > 0 && (
        <ul className="memory-items" aria-label="Remembered items">
          {shown.items.map((item) => (
            <li key={`${item.namespace}/${item.key}`} data-testid="memory-item">
              <span className="text">{item.text}</span>
              {item.score !== undefined && <span className="note"> ({item.score.toFixed(2)})</span>}{" "}
              <button type="button" className="link" onClick={() => void forget(item.key)} aria-label={`Forget ${item.key}`}>
                Forget
              </button>
            </li>
          ))}
        </ul>
      )}
      {shown.state === "ready" && shown.items.length > 0 && searched === "" && (
        <button type="button" onClick={() => void forget()}>
          Forget everything
        </button>
      )}
    </aside>
  );
}
