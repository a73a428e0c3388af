"""MESSAGES_SNAPSHOT: the conversation the server remembers, as AG-UI messages.

A run starts with a snapshot of the context's committed history, so that a client that
reloaded (or a new ``HttpAgent`` on the same ``threadId`` with no messages) shows the
conversation, and so that whatever the client holds is replaced by what the server
holds. As in SPEC 3's transcript, it is a view: one message per user message and per
assistant text, never tool inputs, outputs or thinking. Ids are the message's position
in the history, stable while the history only grows.
"""

from __future__ import annotations

from agentkeel.messages import JSONObject, JSONValue, Message

__all__ = ["snapshot_event", "transcript_messages"]


def transcript_messages(context_id: str, history: list[Message]) -> list[JSONObject]:
    """The AG-UI messages of a history: user messages and assistant texts."""
    messages: list[JSONObject] = []
    for index, message in enumerate(history):
        text = message.text
        if message.role == "user" and not message.tool_results:
            messages.append({"id": f"{context_id}:{index}", "role": "user", "content": text})
        elif message.role == "assistant" and text:
            messages.append({"id": f"{context_id}:{index}", "role": "assistant", "content": text})
    return messages


def snapshot_event(messages: list[JSONObject]) -> JSONObject:
    """The MESSAGES_SNAPSHOT event."""
    listed: list[JSONValue] = list(messages)
    return {"type": "MESSAGES_SNAPSHOT", "messages": listed}
