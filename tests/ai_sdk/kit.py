"""Reading the binding's responses: UI message parts, as the AI SDK's parser sees them."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

PATH = "/agents/scripted/ai-sdk"

Part = dict[str, Any]
"""A part, or a UIMessage: loose JSON, as the client reads it."""


def user(text: str, message_id: str = "u-1") -> Part:
    """A UIMessage from the person, as `sendMessage({text})` builds it."""
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}]}


def body(chat_id: str, messages: Sequence[Part], **extra: object) -> Part:
    """What `DefaultChatTransport` sends."""
    return {"id": chat_id, "messages": list(messages), "trigger": "submit-message", **extra}


def parse(raw: str) -> list[Part]:
    """The parts of a stream body; asserts the SSE framing and the closing ``[DONE]``."""
    events = [block for block in raw.split("\n\n") if block.strip()]
    assert events, "an empty stream"
    assert events[-1] == "data: [DONE]", events[-1]
    parts: list[Part] = []
    for block in events[:-1]:
        if block.startswith(":"):
            continue  # a keep-alive comment
        assert block.startswith("data: ") and "\n" not in block, block
        part = json.loads(block[len("data: ") :])
        assert isinstance(part, dict)
        parts.append(part)
    return parts


async def chat(
    client: httpx.AsyncClient, payload: Mapping[str, object], path: str = PATH
) -> list[Part]:
    """POST a chat request and return its parts (the response must be a stream)."""
    response = await client.post(path, json=dict(payload))
    assert response.status_code == 200, response.text
    assert response.headers["x-vercel-ai-ui-message-stream"] == "v1"
    assert response.headers["content-type"].startswith("text/event-stream")
    return parse(response.text)


def text_of(parts: Sequence[Part]) -> str:
    """The text the deltas spell."""
    return "".join(str(p["delta"]) for p in parts if p["type"] == "text-delta")


def types_of(parts: Sequence[Part]) -> list[str]:
    """The part types, deltas folded into their block (``text-delta`` once per block)."""
    out: list[str] = []
    for part in parts:
        kind = str(part["type"])
        if kind.endswith("-delta") and out and out[-1] == kind:
            continue
        out.append(kind)
    return out
