"""What the clients get from the memory endpoints: typed items, decoded from the wire."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

from agentkeel.errors import AgentkeelError
from agentkeel.messages import JSONValue

__all__ = [
    "RememberedItem",
    "RememberedPage",
    "decode_memory_page",
    "memory_query",
]


def memory_query(query: str | None, limit: int | None, cursor: str | None) -> str:
    """The query string of ``GET /agents/{name}/memory`` ("" when nothing is set)."""
    params = {"q": query, "limit": None if limit is None else str(limit), "cursor": cursor}
    encoded = urlencode({k: v for k, v in params.items() if v is not None})
    return f"?{encoded}" if encoded else ""


@dataclass(frozen=True, slots=True, kw_only=True)
class RememberedItem:
    """One item of ``GET /agents/{name}/memory``: what the agent remembers of the caller."""

    key: str
    text: str
    namespace: str = "memories"
    value: JSONValue = None
    created_at: str = ""
    updated_at: str = ""
    context_id: str | None = None
    """The conversation it was remembered in."""
    score: float | None = None
    """Its similarity to the query, for a search (``q``)."""


@dataclass(frozen=True, slots=True)
class RememberedPage:
    """A page of items and the cursor of the next page (None: the last page)."""

    items: tuple[RememberedItem, ...]
    next_cursor: str | None = None


def _item(raw: JSONValue) -> RememberedItem:
    if not isinstance(raw, dict) or not isinstance(raw.get("key"), str):
        raise AgentkeelError("the server's memory listing is malformed")
    source = raw.get("source")
    context_id = source.get("contextId") if isinstance(source, dict) else None
    score = raw.get("score")
    return RememberedItem(
        key=str(raw["key"]),
        text=str(raw.get("text", "")),
        namespace=str(raw.get("namespace", "memories")),
        value=raw.get("value"),
        created_at=str(raw.get("createdAt", "")),
        updated_at=str(raw.get("updatedAt", "")),
        context_id=context_id if isinstance(context_id, str) else None,
        score=float(score) if isinstance(score, int | float) else None,
    )


def decode_memory_page(body: object) -> RememberedPage:
    """Decode a memory listing.

    Raises:
        AgentkeelError: The body is not one.
    """
    items = body.get("items") if isinstance(body, dict) else None
    if not isinstance(items, list) or not isinstance(body, dict):
        raise AgentkeelError("the server's memory listing is malformed")
    cursor = body.get("nextCursor")
    return RememberedPage(
        tuple(_item(raw) for raw in items), cursor if isinstance(cursor, str) else None
    )
