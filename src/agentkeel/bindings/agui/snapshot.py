"""MESSAGES_SNAPSHOT: the conversation the server remembers, as AG-UI messages.

A run whose client is not in step with the server (`agentkeel.bindings.agui.sync`)
starts with a snapshot of the context's committed history, so that a client that
reloaded (or a new ``HttpAgent`` on the same ``threadId`` with no messages) shows the
conversation, and so that whatever the client holds is replaced by what the server
holds. It is SPEC 3's transcript (the runtime's transcript read): one message per user
message and per assistant text, never tool inputs, outputs or thinking, each with its
stable ``msg-`` id, the same id the native transcript, edit and regenerate use, kept
across restarts, replicas and cuts of the history.
"""

from __future__ import annotations

from agentkeel.messages import JSONObject, JSONValue, Message

__all__ = ["snapshot_event", "transcript_messages"]


def transcript_messages(transcript: list[Message]) -> list[JSONObject]:
    """The AG-UI messages of a transcript: user messages and assistant texts, by msg- id."""
    messages: list[JSONObject] = []
    for message in transcript:
        text = message.text
        if message.role == "user" and not message.tool_results:
            messages.append({"id": message.id, "role": "user", "content": text})
        elif message.role == "assistant" and text:
            messages.append({"id": message.id, "role": "assistant", "content": text})
    return messages


def snapshot_event(messages: list[JSONObject]) -> JSONObject:
    """The MESSAGES_SNAPSHOT event."""
    listed: list[JSONValue] = list(messages)
    return {"type": "MESSAGES_SNAPSHOT", "messages": listed}
