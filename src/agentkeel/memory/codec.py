"""The JSON form of a memory item, shared by the file backend and any future one.

Vectors are stored as base64 of little-endian float32 bytes: a fifth of the size of a
list of decimal floats, and exact.
"""

from __future__ import annotations

import base64
from datetime import datetime

import numpy as np

from agentkeel.memory.records import MemoryItem, MemorySource
from agentkeel.messages import JSONObject, JSONValue

__all__ = ["item_from_json", "item_to_json"]

_FLOAT32 = np.dtype("<f4")


def item_to_json(item: MemoryItem) -> JSONObject:
    """The stored document of `item`, vector included."""
    source: JSONObject = {
        "contextId": item.source.context_id,
        "agent": item.source.agent,
        "runId": item.source.run_id,
    }
    vector = base64.b64encode(item.vector.astype(_FLOAT32).tobytes()).decode("ascii")
    return {
        "namespace": item.namespace,
        "key": item.key,
        "text": item.text,
        "value": item.value,
        "createdAt": item.created_at.isoformat(),
        "updatedAt": item.updated_at.isoformat(),
        "source": source,
        "model": item.model,
        "vector": vector,
    }


def _text(data: JSONObject, name: str) -> str:
    value = data[name]
    if not isinstance(value, str):
        raise ValueError(f"{name} is not a string")
    return value


def _optional(data: JSONValue, name: str) -> str | None:
    value = data.get(name) if isinstance(data, dict) else None
    return value if isinstance(value, str) else None


def item_from_json(data: JSONObject) -> MemoryItem:
    """Decode a stored document; ValueError (or KeyError) when it is not one."""
    source = data.get("source")
    vector = np.frombuffer(base64.b64decode(_text(data, "vector")), dtype=_FLOAT32)
    return MemoryItem(
        namespace=_text(data, "namespace"),
        key=_text(data, "key"),
        text=_text(data, "text"),
        value=data.get("value"),
        created_at=datetime.fromisoformat(_text(data, "createdAt")),
        updated_at=datetime.fromisoformat(_text(data, "updatedAt")),
        source=MemorySource(
            context_id=_optional(source, "contextId"),
            agent=_optional(source, "agent"),
            run_id=_optional(source, "runId"),
        ),
        model=_text(data, "model"),
        vector=vector.astype(np.float32),
    )
