"""The transcript capability of LocalFileStorage: a page of a history, and a context list.

A page is read from messages.jsonl by the same scan a load makes (the commit format,
with its cuts, is only known line by line), in a worker thread and without touching the
append cache; a principal's sessions are listed from the folder names under the
principal's folder. Both cost the files they read: the file backend is the one for a
single machine and small deployments; PostgreSQL answers both from indexes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from agentkeel.errors import AgentkeelError, CorruptSessionError
from agentkeel.ids import decode_path_segment, encode_path_segment
from agentkeel.keys import SessionKey, require_key
from agentkeel.storage import _session_files
from agentkeel.storage.transcript import (
    ContextListing,
    HistoryPage,
    in_transcript,
    page_of,
    sort_listings,
    title_of,
)

__all__ = ["FileTranscript"]

_T = TypeVar("_T")


def _read_page(folder: Path, key: SessionKey, after: str | None, limit: int) -> HistoryPage | None:
    loaded = _session_files.load(folder, key)
    return None if loaded is None else page_of(loaded[0].messages, after, limit)


def _listings(root: Path, principal: str | None, definition: str) -> list[ContextListing]:
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
            loaded = _session_files.load(entry, key)
        except CorruptSessionError:
            continue  # listed by nobody until someone looks at it; never fatal to a list
        except (AgentkeelError, ValueError):
            continue  # not a name this storage writes
        if loaded is None or key.definition != definition:
            continue
        snapshot = loaded[0]
        found.append(
            ContextListing(
                metadata=snapshot.metadata,
                title=title_of(snapshot.messages),
                transcript_count=sum(1 for m in snapshot.messages if in_transcript(m)),
            )
        )
    return found


class FileTranscript:
    """`TranscriptStorage` for LocalFileStorage, which supplies the folder and the calls."""

    if TYPE_CHECKING:
        directory: Path

        def path(self, key: SessionKey) -> Path: ...

        async def _call(
            self, key: SessionKey | None, func: Callable[..., _T], *args: object
        ) -> _T: ...

    async def read_messages(
        self, key: SessionKey, *, after: str | None, limit: int
    ) -> HistoryPage | None:
        """A page of the committed history (TranscriptStorage)."""
        folder = self.path(require_key(key, "read_messages"))
        return await self._call(None, _read_page, folder, key, after, limit)

    async def list_sessions(
        self, principal: str | None, definition: str, *, limit: int, cursor: str | None
    ) -> tuple[list[ContextListing], str | None]:
        """The principal's saved sessions of `definition`, newest first (TranscriptStorage)."""
        found = await self._call(None, _listings, self.directory, principal, definition)
        return sort_listings(found, limit=limit, cursor=cursor)
