/**
 * The demo chat page: finds its agent (`?agent=` or the first of `GET /agents`), then
 * renders the chat. It talks to the origin that served it.
 */

import { useEffect, useState } from "react";

import { listAgents } from "../src/index.js";
import { Chat } from "./chat.js";

type Found = { state: "loading" } | { state: "ready"; agent: string } | { state: "failed"; message: string };

export function App() {
  const [found, setFound] = useState<Found>(() => {
    const agent = new URLSearchParams(window.location.search).get("agent");
    return agent ? { state: "ready", agent } : { state: "loading" };
  });

  useEffect(() => {
    if (found.state !== "loading") return;
    let live = true;
    listAgents({ url: "" }).then(
      (agents) => {
        if (!live) return;
        const first = agents[0];
        setFound(first ? { state: "ready", agent: first.name } : { state: "failed", message: "This server has no agents." });
      },
      (error: unknown) => {
        if (live) setFound({ state: "failed", message: `Could not list the agents: ${String(error)}` });
      },
    );
    return () => {
      live = false;
    };
  }, [found.state]);

  if (found.state === "ready") return <Chat agent={found.agent} />;
  return (
    <main className="app">
      <h1>agentkeel</h1>
      {found.state === "loading" ? <p role="status">Loading…</p> : <p role="alert">{found.message}</p>}
    </main>
  );
}
