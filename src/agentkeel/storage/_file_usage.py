"""UsageStorage on LocalFileStorage: a model call's usage lines, durable with the turn.

Each model call appends one line to the context's ``usage.jsonl`` and one to its
principal's file of the day (`_usage_files`). A worker-thread hop and two fsyncs per
call used to cost a turn more CPU than its commit: at concurrency 32 the hops' threads
fought for the GIL, and all of a principal's contexts fsynced the same day file.

So while both files exist, the lines are appended on the event loop to the page cache
(one small ``write`` each, no fsync) and journaled (`_file_journal`): a killed process
loses nothing written, and the totals read back include them at once. The journal's
next fsync, which the context's next save waits for (its own group flush, or the fsync
before a save made in a worker thread), makes them durable, so when `append` returns
the turn's usage is as durable as its history (SPEC guarantee 1). Without the journal,
or when a file does not exist yet, the lines are written the durable way, in a hop.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

import anyio

from agentkeel import _fs
from agentkeel.errors import StorageError
from agentkeel.keys import SessionKey, require_key
from agentkeel.result import Usage
from agentkeel.storage._file_flush import FlushedAppends
from agentkeel.storage._session_files import principal_folder, session_folder
from agentkeel.storage._usage_files import (
    USAGE_FILE,
    append_usage,
    principal_usage_path,
    read_usage,
    usage_line,
)

__all__ = ["FileUsage"]

_T = TypeVar("_T")


class FileUsage(FlushedAppends):
    """UsageStorage for LocalFileStorage (see the module docstring)."""

    directory: Path

    def _lock(self, key: SessionKey) -> anyio.Lock:
        raise NotImplementedError

    def _usage_paths(self, key: SessionKey, day: str) -> tuple[Path, Path]:
        return (
            self.path(key) / USAGE_FILE,
            principal_usage_path(principal_folder(self.directory, key.principal), day),
        )

    async def add_usage(self, key: SessionKey, usage: Usage, *, day: str) -> None:
        """Append to the context's and the principal's usage files (UsageStorage)."""
        paths = self._usage_paths(require_key(key, "add_usage"), day)
        async with self._lock(key):  # not while the folder is being deleted
            files = all(path.is_file() for path in paths)
            journal = await self._journaling() if files else None
            if journal is not None:
                written: _fs.Written = []
                try:
                    for path in paths:
                        _fs.append_records(path, [usage_line(usage)], durable=False, log=written)
                except OSError as exc:
                    raise StorageError(f"session storage I/O failed: {exc}") from exc
                journal.record(written)
                return
            await self._call(None, append_usage, paths, usage)

    async def context_usage(self, key: SessionKey) -> Usage:
        """The context's total (UsageStorage); deleted with the session's folder."""
        path = session_folder(self.directory, require_key(key, "context_usage")) / USAGE_FILE
        return await self._call(None, read_usage, path)

    async def principal_usage(self, principal: str | None, day: str) -> Usage:
        """The principal's total of `day` (UsageStorage)."""
        path = principal_usage_path(principal_folder(self.directory, principal), day)
        return await self._call(None, read_usage, path)
