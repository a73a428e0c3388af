"""Group flush: the fsyncs of concurrent turns, made in one worker-thread hop per batch.

A turn that changes nothing but appends (the common turn: lines to ``messages.jsonl``,
a run record, usage lines) writes on the event loop, to the page cache, and then waits
for its files' fsyncs here. At concurrency 32, one worker-thread hop per turn cost more
CPU than the turn's own writes: each hop's thread fought the event loop for the GIL.
Here the first turn to wait becomes the leader of the batch that gathered; its hop
fsyncs every file of that batch once (a principal's usage file of the day, shared by
all of its contexts, once for all of them), and turns arriving meanwhile gather the
next batch, which one of them leads when the hop returns. At concurrency 1 it is one
hop per turn, as before.

Nothing is acknowledged before its fsync returns, so a turn is as durable as before
(SPEC guarantee 1). A process killed between the write and the fsync loses nothing (the
page cache is the kernel's); only a power cut can, and then the turn was never
acknowledged, as with an fsync in flight.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from pathlib import Path

import anyio
import anyio.to_thread

from agentkeel import _fs
from agentkeel.errors import StorageError
from agentkeel.keys import SessionKey
from agentkeel.storage import _records, _session_files
from agentkeel.storage._file_usage import UsageSyncs
from agentkeel.storage._history import Tail
from agentkeel.storage._session_files import MESSAGES_FILE

__all__ = ["INLINE_BYTES", "FlushedAppends", "GroupFlush"]

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
    """LocalFileStorage's appends that write on the event loop and flush as a group."""

    _cache: OrderedDict[SessionKey, Tail]
    _usage_syncs: UsageSyncs
    _flush: GroupFlush

    def path(self, key: SessionKey) -> Path:
        raise NotImplementedError

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
        """Append on the event loop, unsynced, then wait for the group's fsyncs.

        The writes are small appends to the page cache (no new file, no rename); the
        fsyncs of the turn's files and of the usage lines it owes go to `GroupFlush`.
        `checks` are `_session_files.append`'s expected version, fence, cut and listing.
        """
        expected_version, fence, cut, shown = checks
        folder = self.path(key)
        owed = self._usage_syncs.take(key)
        try:
            written = _session_files.append(
                folder, key, tail, lines, None,
                expected_version, fence, cut, run, shown, durable=False,
            )  # fmt: skip
            usage = self._usage_syncs.due(owed)
            paths = [path for path, _ in usage]
            if run is not None:
                paths.append(folder / _records.RUNS_FILE)
            paths.append(folder / MESSAGES_FILE)  # the commit last, as the writes were
            await self._flush.flush(paths)
        except BaseException as exc:
            self._cache.pop(key, None)
            self._usage_syncs.give_back(key, owed)
            if isinstance(exc, OSError):
                raise StorageError(f"session storage I/O failed: {exc}") from exc
            raise
        self._usage_syncs.reached(usage)
        return written
