"""The transcript capability of LocalFileStorage: a page of a history, and a context list.

A page costs the page, not the history: per session, a *page index* holds each
committed message's id and the (offset, length) of its line in messages.jsonl, so a page
is found by id in a dict and read with one ``pread`` per line; only those lines are
decoded. The index is built by one scan of the file (the commit format, with its cuts,
is only known line by line) the first time a session is read after a start or after
another process changed it, and is then kept up to date by the appends of this process
(each knows where it wrote its lines, and what it cut). It is checked against the file's
stamp on every read, as the append cache is. Indexes are kept for `INDEXED_SESSIONS`
sessions, the most recently read.

A principal's sessions are listed from the folder names under the principal's folder,
each from its listing summary (`_file_summary`: two small files per session, whatever
its history's length; the history is read only when the summary is stale). The list
still costs one read per session of the principal and definition (the file backend is
the one for a single machine; PostgreSQL answers it from an index).
"""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import anyio

from agentkeel import _fs
from agentkeel.errors import AgentkeelError, CorruptSessionError, MessageNotFoundError
from agentkeel.ids import decode_path_segment, encode_path_segment
from agentkeel.keys import SessionKey, require_key
from agentkeel.messages import Message, MessageDecodeError, message_from_json
from agentkeel.storage import _session_files
from agentkeel.storage._file_summary import Summary, read_summary, write_summary
from agentkeel.storage._history import Tail, read_state, scan
from agentkeel.storage.base import SessionMetadata, SessionSnapshot
from agentkeel.storage.transcript import (
    ContextListing,
    HistoryPage,
    listed,
    sort_listings,
)

__all__ = ["INDEXED_SESSIONS", "FileTranscript", "PageIndex"]

INDEXED_SESSIONS = 256
_T = TypeVar("_T")


@dataclass(slots=True)
class PageIndex:
    """Where each committed message of one session's history is, by position and by id."""

    stamp: tuple[int, int, int] | None
    ids: list[str]
    spans: list[tuple[int, int]]
    positions: dict[str, int]

    def cut_and_add(self, cut: int | None, ids: Sequence[str], tail: Tail) -> bool:
        """Follow one append of this process; False when the index no longer fits."""
        if cut is not None:
            for dropped in self.ids[cut:]:
                self.positions.pop(dropped, None)
            del self.ids[cut:], self.spans[cut:]
        if len(self.ids) + len(ids) != tail.count or len(tail.appended) != len(ids):
            return False
        for message_id, span in zip(ids, tail.appended, strict=True):
            self.positions[message_id] = len(self.ids)
            self.ids.append(message_id)
            self.spans.append(span)
        self.stamp = tail.stamp
        return True


def _build_index(folder: Path, key: SessionKey) -> PageIndex | None:
    """Scan messages.jsonl once; None when the session was never saved."""
    path = folder / _session_files.MESSAGES_FILE
    stamp = _fs.stamp(path)
    if _fs.read_json_object(folder / _session_files.SESSION_FILE) is None:
        _session_files.load(folder, key)  # CorruptSessionError if a history has no session.json
        return None
    raw = _fs.read_bytes(path) or b""
    found = scan(raw, path, read_state(folder / _session_files.STATE_FILE))
    starts, offset = [], 0
    for line in raw.split(b"\n"):
        starts.append(offset)
        offset += len(line) + 1
    spans = [(starts[i], starts[i + 1] - starts[i] - 1) for i in found.lines]
    ids = [message.id for message in found.messages]
    return PageIndex(stamp, ids, spans, {message_id: i for i, message_id in enumerate(ids)})


def _read_lines(path: Path, spans: Sequence[tuple[int, int]], start: int) -> list[Message]:
    """Decode the messages on the lines at `spans` (positions from `start` on)."""
    messages: list[Message] = []
    fd = os.open(path, os.O_RDONLY)
    try:
        for offset, (at, length) in enumerate(spans):
            line = os.pread(fd, length, at)
            try:
                messages.append(message_from_json(json.loads(line)["m"], position=start + offset))
            except (ValueError, KeyError, TypeError, MessageDecodeError):
                raise _fs.corrupt(path, f"the line at byte {at} cannot be decoded") from None
    finally:
        os.close(fd)
    return messages


def _listings(
    root: Path, principal: str | None, definition: str, known: dict[SessionKey, Tail]
) -> list[ContextListing]:
    folder = _session_files.principal_folder(root, principal)
    prefix = encode_path_segment(definition + ":")
    found: list[ContextListing] = []
    if not folder.is_dir():
        return found
    for entry in folder.iterdir():
        if not entry.name.startswith(prefix) or not entry.is_dir():
            continue
        try:
            key = SessionKey.parse(decode_path_segment(entry.name), principal=principal)
            if key.definition == definition:
                listing = _listing(entry, key, known.get(key))
                if listing is not None:
                    found.append(listing)
        except CorruptSessionError:
            continue  # listed by nobody until someone looks at it; never fatal to a list
        except (AgentkeelError, ValueError):
            continue  # not a name this storage writes
    return found


def _listing(folder: Path, key: SessionKey, tail: Tail | None) -> ContextListing | None:
    """One session's listing: from this process's append tail, its summary, or its history.

    The tail (what this process last wrote or loaded) and the summary (`_file_summary`)
    are used only while their stamp is the history file's; the history is read, and the
    summary written, only when neither is.
    """
    stamp = _fs.stamp(folder / _session_files.MESSAGES_FILE)
    summary = None
    if tail is not None and stamp is not None and tail.stamp == stamp:
        if tail.listed is not None and tail.updated_at is not None:
            title, shown = tail.listed
            summary = Summary(stamp, title, shown, tail.count, tail.updated_at)
    if summary is None:
        summary = read_summary(folder, stamp)
    meta = _fs.read_json_object(folder / _session_files.SESSION_FILE)
    created = None if meta is None else meta.get("created_at")
    if summary is not None and isinstance(created, int | float):
        metadata = SessionMetadata(
            definition=key.definition,
            context_id=key.context_id,
            owner=key.principal,
            created_at=float(created),
            updated_at=summary.updated_at,
            message_count=summary.messages,
        )
        return ContextListing(
            metadata=metadata, title=summary.title, transcript_count=summary.shown
        )
    loaded = _session_files.load(folder, key)
    if loaded is None:
        return None
    snapshot, tail = loaded
    title, shown = listed(snapshot.messages)
    if tail.stamp is not None:
        meta_time = snapshot.metadata.updated_at
        write_summary(folder, Summary(tail.stamp, title, shown, len(snapshot.messages), meta_time))
    return ContextListing(metadata=snapshot.metadata, title=title, transcript_count=shown)


class FileTranscript:
    """`TranscriptStorage` for LocalFileStorage, which supplies the folder and the calls."""

    if TYPE_CHECKING:
        directory: Path
        _cache: OrderedDict[SessionKey, Tail]

        def path(self, key: SessionKey) -> Path: ...

        def _lock(self, key: SessionKey) -> anyio.Lock: ...

        async def load(self, key: SessionKey) -> SessionSnapshot | None: ...

        async def _call(
            self, key: SessionKey | None, func: Callable[..., _T], *args: object
        ) -> _T: ...

    _page_indexes: OrderedDict[SessionKey, PageIndex]

    def _indexes(self) -> OrderedDict[SessionKey, PageIndex]:
        try:
            return self._page_indexes
        except AttributeError:
            self._page_indexes = OrderedDict()
            return self._page_indexes

    def _follow_append(
        self, key: SessionKey, before: Tail | None, cut: int | None, ids: list[str], tail: Tail
    ) -> None:
        """Keep `key`'s page index in step with an append this process just made."""
        indexes = self._indexes()
        index = indexes.get(key)
        if index is None:
            return
        if before is None or index.stamp != before.stamp or not index.cut_and_add(cut, ids, tail):
            del indexes[key]  # rebuilt by the next read

    def _forget_index(self, key: SessionKey) -> None:
        self._indexes().pop(key, None)

    async def load_since(
        self, key: SessionKey, *, version: int, count: int, last_id: str | None
    ) -> SessionSnapshot | None:
        """The whole session, as `load` reads it (`kept` 0; IncrementalLoadStorage).

        One process writes a folder at a time, so a cached Agent over files is stale only
        after another process took the folder over, which is rare; and a file another
        process changed is scanned whole anyway, for its commits and cuts.
        """
        del version, count, last_id
        return await self.load(require_key(key, "load_since"))

    async def read_messages(
        self, key: SessionKey, *, after: str | None, limit: int
    ) -> HistoryPage | None:
        """A page of the committed history (TranscriptStorage); reads only its lines.

        Under the session's lock, so that no write of this process moves the lines while
        they are read.
        """
        async with self._lock(require_key(key, "read_messages")):
            return await self._read_page(key, after, limit)

    async def _read_page(
        self, key: SessionKey, after: str | None, limit: int
    ) -> HistoryPage | None:
        folder = self.path(key)
        path = folder / _session_files.MESSAGES_FILE
        indexes = self._indexes()
        index = indexes.get(key)
        if index is None or index.stamp != _fs.stamp(path):
            index = await self._call(None, _build_index, folder, key)
            if index is None:
                indexes.pop(key, None)
                return None
            indexes[key] = index
        indexes.move_to_end(key)
        while len(indexes) > INDEXED_SESSIONS:
            indexes.popitem(last=False)
        start = 0
        if after is not None:
            found = index.positions.get(after)
            if found is None:
                raise MessageNotFoundError(f"the conversation holds no message {after!r}")
            start = found + 1
        spans = index.spans[start : start + limit]
        messages = await self._call(None, _read_lines, path, spans, start) if spans else []
        return HistoryPage(messages=messages, more=start + limit < len(index.ids), start=start)

    async def list_sessions(
        self, principal: str | None, definition: str, *, limit: int, cursor: str | None
    ) -> tuple[list[ContextListing], str | None]:
        """The principal's saved sessions of `definition`, newest first (TranscriptStorage)."""
        known = dict(self._cache)  # the append tails: what this process knows is current
        found = await self._call(None, _listings, self.directory, principal, definition, known)
        return sort_listings(found, limit=limit, cursor=cursor)
