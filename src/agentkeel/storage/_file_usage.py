"""UsageStorage on LocalFileStorage: a model call's usage lines, fsynced with the turn.

Each model call appends one line to the context's ``usage.jsonl`` and one to its
principal's file of the day (`_usage_files`). A worker-thread hop and two fsyncs per
call used to cost a turn more CPU than its commit: at concurrency 32 the hops' threads
fought for the GIL, and all of a principal's contexts fsynced the same day file.

So while both files exist, the lines are appended on the event loop to the page cache
(one small ``write`` each, no fsync), as the A2A task index is: a killed process loses
nothing written, and the totals read back include them at once. Each line is owed an
fsync, and the context's next save pays it in its own hop, before its commit
(`UsageSyncs.sync`), so when `append` returns the turn's usage is as durable as its
history (SPEC guarantee 1). An fsync flushes every line written to a file before it, so
a line of the shared day file that another context's save already flushed is not
fsynced again. A file that does not exist yet is created the durable way, in a hop.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import anyio

from agentkeel import _fs
from agentkeel.errors import StorageError
from agentkeel.keys import SessionKey, require_key
from agentkeel.result import Usage
from agentkeel.storage._session_files import principal_folder, session_folder
from agentkeel.storage._usage_files import (
    USAGE_FILE,
    append_usage,
    principal_usage_path,
    read_usage,
    usage_line,
)

__all__ = ["FileUsage", "Owed", "UsageSyncs"]

_T = TypeVar("_T")
_KEPT_FILES = 4096
"""How many files' sync counts are kept before those synced up to date are dropped."""
Owed = dict[Path, int]
"""Files with unsynced lines, each with the number of its last append (`UsageSyncs`)."""


class UsageSyncs:
    """The usage lines written unsynced, per session, and how far each file is synced.

    Written on the event loop, synced in worker threads; a lock keeps the counts whole.
    Every append gets the next number, of all files (so a number is never reused, also
    for a file whose counts were dropped); a file's number is that of its last append.
    An fsync that started after the number was read covers every append up to it, so
    `sync` skips a file synced that far already.
    """

    def __init__(self) -> None:
        self._owed: dict[SessionKey, Owed] = {}
        self._written: dict[Path, int] = {}
        self._synced: dict[Path, int] = {}
        self._appends = 0
        self._guard = threading.Lock()

    def append(self, key: SessionKey, paths: tuple[Path, ...], usage: Usage) -> bool:
        """Append `usage` unsynced to each of `paths`; False (nothing written): one is missing."""
        if not all(path.is_file() for path in paths):
            return False
        line = usage_line(usage)
        for path in paths:
            _fs.append_records(path, [line], durable=False)
            with self._guard:
                self._appends += 1
                count = self._written[path] = self._appends
                self._owed.setdefault(key, {})[path] = count
        return True

    def take(self, key: SessionKey | None = None) -> Owed:
        """What `key`'s lines (every session's, for None) are owed, no longer tracked."""
        with self._guard:
            if key is not None:
                return self._owed.pop(key, {})
            owed: Owed = {}
            for each in self._owed.values():
                for path, count in each.items():
                    owed[path] = max(count, owed.get(path, 0))
            self._owed.clear()
            return owed

    def give_back(self, key: SessionKey, owed: Owed) -> None:
        """Track `owed` again (the save that took them failed)."""
        with self._guard:
            mine = self._owed.setdefault(key, {})
            for path, count in owed.items():
                mine[path] = max(count, mine.get(path, 0))

    def due(self, owed: Owed) -> list[tuple[Path, int]]:
        """The files of `owed` not yet synced that far, each with how far a sync now reaches.

        Read before the fsync starts: it then covers every append up to that number.
        """
        with self._guard:
            return [
                (path, self._written.get(path, count))
                for path, count in owed.items()
                if self._synced.get(path, 0) < count
            ]

    def reached(self, synced: list[tuple[Path, int]]) -> None:
        """Note the files of `due` as synced (their fsyncs returned)."""
        with self._guard:
            for path, reached in synced:
                if reached > self._synced.get(path, 0):
                    self._synced[path] = reached
            if len(self._synced) > _KEPT_FILES:
                self._forget_synced()

    def sync(self, owed: Owed) -> None:
        """Flush each file of `owed` not yet synced that far (blocking: a worker thread)."""
        for path, reached in self.due(owed):
            try:
                _fs.fsync_file(path)
            except FileNotFoundError:  # its session was deleted: nothing left to keep
                pass
            self.reached([(path, reached)])

    def _forget_synced(self) -> None:
        """Drop the counts of files synced as far as written (under the guard).

        Each of their appends is synced, so what is owed on them is due already; a line
        owed on one of them is at worst fsynced once more than needed.
        """
        done = [path for path, count in self._synced.items() if count >= self._written.get(path, 0)]
        for path in done:
            self._synced.pop(path)
            self._written.pop(path, None)

    def then(self, owed: Owed, func: Callable[..., _T], *args: object) -> _T:
        """`sync` `owed`, then run `func` (a save), in the same worker thread."""
        self.sync(owed)
        return func(*args)


class FileUsage:
    """UsageStorage for LocalFileStorage (see the module docstring)."""

    directory: Path
    _usage_syncs: UsageSyncs

    def _lock(self, key: SessionKey) -> anyio.Lock:
        raise NotImplementedError

    async def _call(self, key: SessionKey | None, func: Callable[..., _T], *args: object) -> _T:
        raise NotImplementedError

    def path(self, key: SessionKey) -> Path:
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
            try:
                if self._usage_syncs.append(key, paths, usage):
                    return
            except OSError as exc:
                raise StorageError(f"session storage I/O failed: {exc}") from exc
            await self._call(None, append_usage, paths, usage)

    async def context_usage(self, key: SessionKey) -> Usage:
        """The context's total (UsageStorage); deleted with the session's folder."""
        path = session_folder(self.directory, require_key(key, "context_usage")) / USAGE_FILE
        return await self._call(None, read_usage, path)

    async def principal_usage(self, principal: str | None, day: str) -> Usage:
        """The principal's total of `day` (UsageStorage)."""
        path = principal_usage_path(principal_folder(self.directory, principal), day)
        return await self._call(None, read_usage, path)

    async def _saving(self, key: SessionKey, func: Callable[..., _T], *args: object) -> _T:
        """`func(*args)` in a worker thread, after the fsyncs `key`'s usage lines owe."""
        owed = self._usage_syncs.take(key)
        if not owed:
            return await self._call(key, func, *args)
        try:
            return await self._call(key, self._usage_syncs.then, owed, func, *args)
        except BaseException:
            self._usage_syncs.give_back(key, owed)
            raise
