"""The Vercel AI SDK UI message stream (protocol v1) for every served agent (SPEC 10).

``POST /agents/{name}/ai-sdk`` takes what AI SDK 6's `DefaultChatTransport` sends (the
chat id is the contextId) and answers with the UI message stream that `useChat` reads;
``GET /agents/{name}/ai-sdk/{chatId}/stream`` resumes a running stream
(``useChat({resume: true})``), ``204`` when nothing runs. The server owns the memory:
of the messages a request carries only the last one is read (the new user message, or
the answer to a tool approval). docs/bindings/ai-sdk.md has the mapping of the native
frames onto the stream's parts.
"""

from agentkeel.bindings.ai_sdk.routes import ai_sdk_routes

__all__ = ["ai_sdk_routes"]
