"""Group flush: the fsyncs of concurrent turns, made in one worker-thread hop per batch.

A turn that changes nothing but appends (the common turn: lines to ``messages.jsonl``,
a run record, usage lines) writes on the event loop, to the page cache, journals what
it wrote (`_file_journal`), and then waits here for the journal's fsync. At concurrency
32, one worker-thread hop per turn cost more CPU than the turn's own writes: each hop's
thread fought the event loop for the GIL. Here the first turn to wait becomes the
leader of the batch that gathered; its hop fsyncs every file of that batch once (the
journal, once for all of the batch's turns), and turns arriving meanwhile gather the
next batch, which one of them leads when the hop returns. At concurrency 1 it is one
hop per turn, with one fsync.

Nothing is acknowledged before its fsync returns, so a turn is as durable as before
(SPEC guarantee 1). A process killed between the write and the fsync loses nothing (the
page cache is the kernel's); only a power cut can, and then the turn was never
acknowledged, as with an fsync in flight.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

import anyio
import anyio.to_thread

from agentkeel import _fs
from agentkeel.errors import StorageError
from agentkeel.keys import SessionKey
from agentkeel.storage import _records, _session_files
from agentkeel.storage._file_journal import Journal
from agentkeel.storage._history import Tail
from agentkeel.storage._session_files import MESSAGES_FILE

__all__ = ["INLINE_BYTES", "FlushedAppends", "GroupFlush"]

_T = TypeVar("_T")
INLINE_BYTES = 65_536
"""The largest turn (its lines and run record) written on the event loop."""


class _Batch:
    """The files one hop fsyncs, and what became of each."""

    __slots__ = ("done", "failed", "paths")

    def __init__(self) -> None:
        self.paths: dict[Path, None] = {}
        self.failed: dict[Path, OSError] = {}
        self.done = anyio.Event()


def _fsync_all(paths: list[Path]) -> dict[Path, OSError]:
    """Fsync each file (blocking: the worker thread); what failed, by path."""
    failed: dict[Path, OSError] = {}
    for path in paths:
        try:
            _fs.fsync_file(path)
        except FileNotFoundError:  # its session was deleted: nothing left to keep
            pass
        except OSError as exc:
            failed[path] = exc
    return failed


class GroupFlush:
    """Fsyncs files for many waiters, one batch (one worker-thread hop) at a time.

    Its events are made on first use, inside the event loop that waits on them.
    """

    def __init__(self) -> None:
        self._gathering: _Batch | None = None
        self._running: anyio.Event | None = None
        """Set when the hop in flight returns; None while none is."""
        self.hops = 0
        """How many worker-thread hops (batches) it made: what the grouping saved shows."""

    async def flush(self, paths: Iterable[Path]) -> None:
        """Return once every file of `paths` is fsynced; StorageError if one failed."""
        batch = self._gathering
        if batch is None:
            batch = self._gathering = _Batch()
        mine = list(paths)
        batch.paths.update(dict.fromkeys(mine))
        while not batch.done.is_set():
            running = self._running
            if running is not None:
                await running.wait()
            else:  # `batch` is still the one gathering: it starts only when led
                await self._lead(batch)
        failed = [batch.failed[path] for path in mine if path in batch.failed]
        if failed:
            raise StorageError(f"session storage I/O failed: {failed[0]}")

    async def _lead(self, batch: _Batch) -> None:
        ended = self._running = anyio.Event()
        self._gathering = None
        try:
            # shielded: a leader cancelled even before its hop started makes it, since
            # the batch's other waiters count on its outcome
            with anyio.CancelScope(shield=True):
                batch.failed = await anyio.to_thread.run_sync(_fsync_all, list(batch.paths))
                self.hops += 1
        finally:
            self._running = None
            batch.done.set()
            ended.set()


class FlushedAppends:
    """LocalFileStorage's appends that write on the event loop and flush as a group.

    With the journal on (`_file_journal`), a turn's appends are made durable by one
    record in it, which the batch's one fsync of the journal covers; without it, each
    file the turn wrote is fsynced in the batch.
    """

    _cache: OrderedDict[SessionKey, Tail]
    _flush: GroupFlush
    _journal: Journal
    _journal_lock: anyio.Lock

    def path(self, key: SessionKey) -> Path:
        raise NotImplementedError

    async def _call(self, key: SessionKey | None, func: Callable[..., _T], *args: object) -> _T:
        raise NotImplementedError

    async def _started(self) -> Journal:
        """The journal, once what an earlier process left in it is finished (`start`).

        Awaited before the first read or write: a replay after a reboot must come before
        anything reads the files it restores or appends after them.
        """
        journal = self._journal
        if not journal.started:
            async with self._journal_lock:
                if not journal.started:
                    await self._call(None, journal.start)
        return journal

    async def _journaling(self) -> Journal | None:
        """The journal with a segment open for `record`; None when it is off."""
        journal = await self._started()
        if not journal.enabled:
            return None
        if not journal.ready or journal.rotation_due:
            async with self._journal_lock:
                await self._call(None, journal.rotate)
        return journal

    async def _saving(self, key: SessionKey, func: Callable[..., _T], *args: object) -> _T:
        """`func(*args)` in a worker thread (a durable save), after the journal's fsync.

        The fsync makes durable the usage lines this turn journaled on the event loop,
        before the save that acknowledges it.
        """
        journal = self._journal
        if not journal.ready:
            return await self._call(key, func, *args)
        return await self._call(key, _then, journal.sync, func, *args)

    async def _replacing(
        self,
        key: SessionKey,
        target: Path,
        func: Callable[..., _T],
        *args: object,
        deleting: bool = False,
    ) -> _T:
        """`func(*args)`, which replaces `target` (or, `deleting`, removes that folder).

        First, in the same hop: a durable barrier for `target`, so that a replay after a
        reboot never writes a journaled append of the old file into the new one of the
        same name; or, for a deletion, the retirement of the segments that name it, so
        that none of its bytes stay on disk.
        """
        journal = self._journal
        if not journal.ready:
            return await self._call(key, func, *args)
        first = journal.forget if deleting else journal.seal
        return await self._call(key, _then, lambda: first(target), func, *args)

    def _appends_only(
        self,
        key: SessionKey,
        tail: Tail,
        lines: list[bytes],
        state: bytes | None,
        cut: int | None,
        run: bytes | None,
    ) -> bool:
        """Whether an append only adds a few lines to files that exist (`_append_flushed`).

        Checked on the event loop with a ``stat`` or two. A tail that changed behind the
        cache, a torn tail to cut, a new state, a cut or a file to create goes the old
        way, all of it in a worker thread: each needs an fsync before a later write. So
        does a turn over `INLINE_BYTES` (a big tool result), not copied on the loop.
        """
        if tail.stamp is None or tail.committed != tail.file_size:
            return False
        if sum(map(len, lines)) + len(run or b"") > INLINE_BYTES:
            return False
        if tail.listed is None or (state is not None and state != tail.state):
            return False
        if cut is not None and cut != tail.count:
            return False
        folder = self.path(key)
        if run is not None and not (folder / _records.RUNS_FILE).is_file():
            return False
        return _fs.stamp(folder / MESSAGES_FILE) == tail.stamp

    async def _append_flushed(
        self,
        key: SessionKey,
        tail: Tail,
        lines: list[bytes],
        run: bytes | None,
        checks: tuple[int | None, int | None, int | None, tuple[str, int] | None],
    ) -> Tail:
        """Append on the event loop, unsynced, journal it, then wait for the group's fsync.

        The writes are small appends to the page cache (no new file, no rename).
        `checks` are `_session_files.append`'s expected version, fence, cut and listing.
        """
        expected_version, fence, cut, shown = checks
        folder = self.path(key)
        journal = await self._journaling()
        written: _fs.Written = []
        try:
            tail = _session_files.append(
                folder, key, tail, lines, None,
                expected_version, fence, cut, run, shown, durable=False, log=written,
            )  # fmt: skip
            if journal is None:
                paths = [path for path, _, _ in written]
            else:
                paths = journal.record(written) if written else []
            await self._flush.flush(paths)
        except BaseException as exc:
            self._cache.pop(key, None)
            if isinstance(exc, OSError):
                raise StorageError(f"session storage I/O failed: {exc}") from exc
            raise
        return tail


def _then(first: Callable[[], None], func: Callable[..., _T], *args: object) -> _T:
    """`first()`, then `func(*args)`, in one worker-thread hop."""
    first()
    return func(*args)
