"""The transcript capability: a page of a history, and a principal's sessions of a definition.

The native wire's transcript (SPEC section 3) reads a conversation page by page and lists
a caller's conversations; loading every history for that would make a page of a long
conversation cost its whole length. So every backend answers these two questions itself,
at the cost of the page: `read_messages` finds a message by its id and returns the next
few; `list_sessions` reads summaries, not histories (memory and files: in their own way;
PostgreSQL: one indexed statement).

The helpers here are what the backends share: which messages a transcript shows, a
title, and the list cursor.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from agentkeel.errors import InvalidRequestError, MessageNotFoundError
from agentkeel.keys import SessionKey
from agentkeel.messages import Message
from agentkeel.storage.base import SessionMetadata

__all__ = [
    "TITLE_LENGTH",
    "ContextListing",
    "HistoryPage",
    "TranscriptStorage",
    "decode_cursor",
    "encode_cursor",
    "in_transcript",
    "listed",
    "page_of",
    "read_transcript",
    "sort_listings",
    "title_of",
]

TITLE_LENGTH = 80
"""A context's title is its first user message, cut to this many characters."""


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryPage:
    """Stored messages of one session, oldest first, and whether more follow them."""

    messages: list[Message]
    more: bool
    start: int = 0
    """The position (0-based) of the first message of the page in the history."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextListing:
    """One session as the context list shows it, without its history."""

    metadata: SessionMetadata
    title: str
    """The first user message's text (uncut; empty when there is none)."""
    transcript_count: int
    """How many of its messages the transcript shows (see `in_transcript`)."""


@runtime_checkable
class TranscriptStorage(Protocol):
    """Reading a history a page at a time, and listing sessions; every backend has it."""

    async def read_messages(
        self, key: SessionKey, *, after: str | None, limit: int
    ) -> HistoryPage | None:
        """Up to `limit` stored messages after the message `after` (from the start if None).

        None when the session was never saved. Raises MessageNotFoundError when the
        history holds no message `after`. Costs the page, not the history.
        """
        ...

    async def list_sessions(
        self, principal: str | None, definition: str, *, limit: int, cursor: str | None
    ) -> tuple[list[ContextListing], str | None]:
        """`principal`'s saved sessions of `definition`, most recently updated first.

        Returns a page of at most `limit` and the cursor of the next page (None on the
        last). Raises InvalidRequestError for a cursor it did not make.
        """
        ...


def in_transcript(message: Message) -> bool:
    """Whether the transcript shows `message`.

    Every assistant message does; a user message does unless it carries tool results
    back to the model.
    """
    return message.role == "assistant" or not message.tool_results


async def read_transcript(storage: object, key: SessionKey, *, page: int = 500) -> list[Message]:
    """Every message the transcript shows of `key`, oldest first, read a page at a time.

    Empty for a session never saved, and for a storage that keeps no transcripts.
    """
    if not isinstance(storage, TranscriptStorage):
        return []
    shown: list[Message] = []
    after: str | None = None
    while True:
        found = await storage.read_messages(key, after=after, limit=page)
        if found is None:
            return shown
        shown.extend(m for m in found.messages if in_transcript(m))
        if not found.more or not found.messages:
            return shown
        after = found.messages[-1].id


def title_of(messages: Sequence[Message]) -> str:
    """The first user message's text, uncut."""
    first = next((m for m in messages if m.role == "user" and in_transcript(m)), None)
    return "" if first is None else first.text


def listed(messages: Sequence[Message]) -> tuple[str, int]:
    """What the context list shows of `messages`: the title and how many are shown."""
    return title_of(messages), sum(1 for message in messages if in_transcript(message))


def page_of(messages: Sequence[Message], after: str | None, limit: int) -> HistoryPage:
    """The page of an in-memory history (the backends that hold one decoded)."""
    start = 0
    if after is not None:
        index = next((i for i, m in enumerate(messages) if m.id == after), None)
        if index is None:
            raise MessageNotFoundError(f"the conversation holds no message {after!r}")
        start = index + 1
    page = list(messages[start : start + limit])
    return HistoryPage(messages=page, more=start + limit < len(messages), start=start)


def encode_cursor(updated_at: float, context_id: str) -> str:
    """The list cursor after a session: its (updated_at, context id), opaque to clients."""
    raw = json.dumps([updated_at, context_id], separators=(",", ":")).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_cursor(cursor: str | None) -> tuple[float, str] | None:
    """Invert `encode_cursor`; InvalidRequestError for anything it did not make."""
    if cursor is None:
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        value = json.loads(raw)
    except ValueError:
        raise InvalidRequestError("cursor is not one this server gave out") from None
    if (
        not isinstance(value, list)
        or len(value) != 2
        or not isinstance(value[0], int | float)
        or isinstance(value[0], bool)
        or not isinstance(value[1], str)
    ):
        raise InvalidRequestError("cursor is not one this server gave out")
    return float(value[0]), value[1]


def sort_listings(
    listings: Sequence[ContextListing], *, limit: int, cursor: str | None
) -> tuple[list[ContextListing], str | None]:
    """Order, skip past `cursor` and cut a page (the backends that list in memory)."""
    after = decode_cursor(cursor)
    ordered = sorted(
        listings,
        key=lambda item: (item.metadata.updated_at, item.metadata.context_id),
        reverse=True,
    )
    if after is not None:
        ordered = [
            item for item in ordered if (item.metadata.updated_at, item.metadata.context_id) < after
        ]
    page = ordered[:limit]
    if len(ordered) <= limit:
        return page, None
    last = page[-1].metadata
    return page, encode_cursor(last.updated_at, last.context_id)
