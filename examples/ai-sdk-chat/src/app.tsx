import { useChat } from "@ai-sdk/react";
import { DefaultChatTransport, isToolUIPart, lastAssistantMessageIsCompleteWithApprovalResponses, type UIMessage } from "ai";
import { type FormEvent, useMemo, useState } from "react";

/** The chat id is the agentkeel context id: kept in localStorage, so a reload resumes. */
function chatId(agent: string): string {
  const key = `ai-sdk-chat:${agent}`;
  const known = localStorage.getItem(key);
  if (known !== null) return known;
  const fresh = `chat-${crypto.randomUUID()}`;
  localStorage.setItem(key, fresh);
  return fresh;
}

export function App({ agent }: { agent: string }) {
  const id = useMemo(() => chatId(agent), [agent]);
  const transport = useMemo(
    () =>
      new DefaultChatTransport<UIMessage>({
        api: `/agents/${agent}/ai-sdk`,
        // the server keeps the history: send the new message only
        prepareSendMessagesRequest: ({ id, messages, trigger, messageId }) => ({
          body: { id, messages: messages.slice(-1), trigger, messageId },
        }),
      }),
    [agent],
  );
  const { messages, sendMessage, status, error, regenerate, addToolApprovalResponse } = useChat({
    id,
    transport,
    resume: true, // a reload in the middle of an answer picks the stream up again
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
  });
  const [input, setInput] = useState("");
  const busy = status === "submitted" || status === "streaming";

  const submit = (event: FormEvent) => {
    event.preventDefault();
    if (!input.trim() || busy) return;
    void sendMessage({ text: input });
    setInput("");
  };

  return (
    <main style={{ maxWidth: 640, margin: "2rem auto", fontFamily: "system-ui, sans-serif" }}>
      <h1>useChat on agentkeel ({agent})</h1>
      {messages.map((message) => (
        <section key={message.id} style={{ margin: "1rem 0" }}>
          <strong>{message.role === "user" ? "You" : "Agent"}</strong>
          {message.parts.map((part, index) => {
            if (part.type === "text") return <p key={index}>{part.text}</p>;
            if (part.type === "reasoning") {
              return (
                <p key={index} style={{ color: "#777", fontStyle: "italic" }}>
                  {part.text}
                </p>
              );
            }
            if (!isToolUIPart(part)) return null;
            const tool = part.type.slice("tool-".length);
            if (part.state === "approval-requested") {
              const prompt = (part.callProviderMetadata?.["agentkeel"]?.["prompt"] as string | undefined) ?? tool;
              return (
                <div key={index}>
                  {prompt}{" "}
                  <button onClick={() => void addToolApprovalResponse({ id: part.approval.id, approved: true })}>
                    Approve
                  </button>{" "}
                  <button
                    onClick={() =>
                      void addToolApprovalResponse({ id: part.approval.id, approved: false, reason: "declined" })
                    }
                  >
                    Reject
                  </button>
                </div>
              );
            }
            return (
              <p key={index} style={{ color: "#555" }}>
                🔧 {tool}: {part.state}
              </p>
            );
          })}
        </section>
      ))}
      {error && <p style={{ color: "crimson" }}>{error.message}</p>}
      <form onSubmit={submit}>
        <input value={input} onChange={(event) => setInput(event.target.value)} placeholder="Say something" />
        <button disabled={busy}>Send</button>{" "}
        <button type="button" disabled={busy || messages.length === 0} onClick={() => void regenerate()}>
          Regenerate
        </button>
      </form>
    </main>
  );
}
