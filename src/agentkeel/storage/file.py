"""LocalFileStorage: sessions as plain files under one folder (SPEC section 8).

Layout, per session (folder names go through `ids.encode_path_segment`)::

    <dir>/[<principal>/]<def-name>:<contextId>/
        session.json     definition, context id, owner, created_at, schema_version
        messages.jsonl   the history: one ``{"m": <message>}`` per line, in turns
        state.json       ``{"turn": n, "state": {...}}``, absent until the state holds a key
        runs.jsonl       one run record per line, appended (the last line of an id wins)
        frames.sse       the latest run's stream frames, the SSE bytes as sent (a cache)
        <name>.json      a named document beside the session (a swarm's ``swarm.json``)
    <dir>/[<principal>/]a2a-task-index:<def-name>/tasks.jsonl   the A2A task index

The number of files in a session folder never grows with its turns: creating a file
costs the kernel more than writing a turn. `_history` has the history's commit format
and `_records` the record files; docs/sessions.md has all of it, and how sessions that
0.1.0 wrote (``runs/<runId>.json``) still load.

An append is one write per file, made durable by one record in the storage's journal
(`_file_journal`; an atomic state.json too when the state changed). It never reads the
history: what it needs (committed length, version, fence, state) is cached per session
and checked against the file's size, inode and mtime, so another process's write is seen.
"""

from __future__ import annotations

import logging
import os
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import anyio
import anyio.to_thread

from agentkeel import _fs
from agentkeel.errors import StorageError
from agentkeel.ids import encode_path_segment
from agentkeel.keys import SessionKey, require_key
from agentkeel.messages import JSONObject, Message
from agentkeel.storage import _file_retention, _records, _session_files
from agentkeel.storage._file_flush import GroupFlush
from agentkeel.storage._file_journal import Journal
from agentkeel.storage._file_transcript import FileTranscript
from agentkeel.storage._file_usage import FileUsage
from agentkeel.storage._history import Tail, encode_json, encode_messages
from agentkeel.storage._session_files import (
    FRAMES_FILE,
    MESSAGES_FILE,
    principal_folder,
    session_folder,
)
from agentkeel.storage.base import RunRecord, SessionSnapshot, StorageHealth
from agentkeel.storage.transcript import listed

__all__ = ["LocalFileStorage", "principal_folder", "session_folder"]

_LOCK_STRIPES = 64
_INLINE_FRAMES_BYTES = 65_536
"""The largest frames.sse written on the event loop; a bigger one goes to a thread."""
_T = TypeVar("_T")
_log = logging.getLogger(__name__)


class LocalFileStorage(_file_retention.FileRetention, FileTranscript, FileUsage):
    """A SessionStorage that keeps each session in a folder of plain, inspectable files.

    Args:
        directory: The session folder (``sessionDir``); created on the first write.
        cache_size: How many sessions' append bookkeeping to keep in memory. A session
            that fell out is re-read once on its next append.
    """

    def __init__(self, directory: str | os.PathLike[str], *, cache_size: int = 4096) -> None:
        self.directory = Path(directory)
        self._cache: OrderedDict[SessionKey, Tail] = OrderedDict()
        self._cache_size = cache_size
        # fast_acquire: a free lock is taken without a trip through the event loop, which
        # resumed the whole request's coroutine stack on every save
        self._locks = [anyio.Lock(fast_acquire=True) for _ in range(_LOCK_STRIPES)]
        self._task_indexes: OrderedDict[SessionKey, _records.TaskIndex] = OrderedDict()
        self._journal = Journal(self.directory)
        self._journal_lock = anyio.Lock()
        self._flush = GroupFlush()
        self._folders: dict[SessionKey, Path] = {}

    def path(self, key: SessionKey) -> Path:
        """The folder holding `key`'s files (it may not exist yet); kept per key."""
        folder = self._folders.get(key)
        if folder is None:
            if len(self._folders) >= self._cache_size:
                self._folders.clear()  # rebuilt as used: a folder's path never changes
            folder = self._folders[key] = session_folder(self.directory, key)
        return folder

    async def open(self) -> None:
        """Finish what an earlier process left in the journal (a replay after a reboot)."""
        await self._started()

    async def close(self) -> None:
        """Fsync the journaled files, delete the journal, forget the cached bookkeeping."""
        await self._call(None, self._journal.close)
        self._cache.clear()
        self._task_indexes.clear()

    async def health(self) -> StorageHealth:
        """Whether the folder (or the nearest parent that exists) is writable."""
        try:
            await anyio.to_thread.run_sync(_session_files.check_writable, self.directory)
        except OSError as exc:
            return StorageHealth(ok=False, detail=str(exc))
        return StorageHealth(ok=True)

    # -- history and state -------------------------------------------------------------

    async def load(self, key: SessionKey) -> SessionSnapshot | None:
        """Read the session, dropping any uncommitted tail; None if it was never saved."""
        require_key(key, "load")
        await self._started()
        async with self._lock(key):
            loaded = await self._call(key, _session_files.load, self.path(key), key)
            if loaded is None:
                return None
            self._remember(key, loaded[1])
            return loaded[0]

    async def version(self, key: SessionKey) -> int:
        """The last committed turn, from the cache while messages.jsonl did not change.

        The check is one ``stat``, made on the event loop: cheaper than a worker thread
        hop, and a stat of a local file does not block. Only a file changed by another
        process (or not cached) is read again.
        """
        require_key(key, "version")
        tail = self._cache.get(key)
        if tail is not None and _fs.stamp(self.path(key) / MESSAGES_FILE) == tail.stamp:
            return tail.turn
        async with self._lock(key):
            loaded = await self._call(key, _session_files.load, self.path(key), key)
            if loaded is None:
                return 0
            self._remember(key, loaded[1])
            return loaded[1].turn

    async def exists(self, key: SessionKey) -> bool:
        """Whether the session folder holds anything (nothing is read or decoded)."""
        folder = self.path(require_key(key, "exists"))
        return await self._call(None, _fs.has_files, folder)

    async def append(
        self,
        key: SessionKey,
        messages: Sequence[Message],
        state: JSONObject | None,
        *,
        expected_version: int | None = None,
        fence: int | None = None,
        cut: int | None = None,
        run: RunRecord | None = None,
    ) -> int:
        """Append one turn as one fsynced batch (its cut too); a crash keeps all or none."""
        require_key(key, "append")
        await self._started()
        lines = encode_messages(messages)
        encoded_state = None if state is None else encode_json(state)
        async with self._lock(key):
            before = self._cache.get(key)
            run_line, shown = _records.run_line(run), listed(messages)
            if before is not None and self._appends_only(
                key, before, lines, encoded_state, cut, run_line
            ):
                commit = (expected_version, fence, cut, shown)
                tail = await self._append_flushed(key, before, lines, run_line, commit)
            else:
                args = (self.path(key), key, before, lines, encoded_state)
                checks = (expected_version, fence, cut, run_line, shown)
                tail = await self._saving(key, _session_files.append, *args, *checks)
            self._remember(key, tail)
            self._follow_append(key, before, cut, [message.id for message in messages], tail)
            return tail.turn

    async def rewrite(
        self,
        key: SessionKey,
        messages: Sequence[Message],
        state: JSONObject | None,
        *,
        expected_version: int | None = None,
        fence: int | None = None,
        run: RunRecord | None = None,
    ) -> int:
        """Replace the history (and the state unless None) with one atomic rename."""
        require_key(key, "rewrite")
        await self._started()
        lines = encode_messages(messages)
        encoded_state = None if state is None else encode_json(state)
        async with self._lock(key):
            self._forget_index(key)
            folder, tail = self.path(key), self._cache.get(key)
            args = (folder, key, tail, lines, encoded_state, expected_version, fence)
            extra = (_records.run_line(run), listed(messages))
            rewrite = _session_files.rewrite
            tail = await self._replacing(key, folder / MESSAGES_FILE, rewrite, *args, *extra)
            self._remember(key, tail)
            return tail.turn

    async def delete(self, key: SessionKey) -> bool:
        """Remove the session folder (history, state, runs, frames) as one rename."""
        require_key(key, "delete")
        await self._started()
        async with self._lock(key):
            self._cache.pop(key, None)
            self._forget_index(key)
            folder = self.path(key)
            return await self._replacing(key, folder, _fs.remove_tree, folder, deleting=True)

    # -- run records ---------------------------------------------------------------------

    async def put_run(self, key: SessionKey, record: RunRecord) -> None:
        """Append the record to runs.jsonl (one fsynced write; no new file)."""
        folder = self.path(require_key(key, "put_run"))
        await self._started()
        line = encode_json(record.to_json(), "run record")

        def write() -> None:
            _fs.ensure_dir(folder)
            _fs.append_records(folder / _records.RUNS_FILE, [line])

        async with self._lock(key):  # not while the folder is being deleted
            await self._saving(key, write)

    async def get_run(self, key: SessionKey, run_id: str) -> RunRecord | None:
        """One run's latest record; CorruptSessionError if it cannot be decoded."""
        folder = self.path(require_key(key, "get_run"))
        return await self._call(
            None, _records.find_run, folder, encode_path_segment(run_id), run_id
        )

    async def latest_run(self, key: SessionKey) -> RunRecord | None:
        """The record appended last (only the end of runs.jsonl is read)."""
        folder = self.path(require_key(key, "latest_run"))
        return await self._call(None, _records.last_run, folder)

    async def list_runs(self, key: SessionKey) -> list[RunRecord]:
        """Every run record of the session, oldest first (start time, then id)."""
        folder = self.path(require_key(key, "list_runs"))
        return await self._call(None, _records.list_runs, folder)

    # -- capabilities: frames, documents, task index -------------------------------------

    async def put_frames(self, key: SessionKey, run_id: str, body: bytes) -> None:
        """Overwrite frames.sse with `run_id`'s frames (RunEventStorage).

        A reconnect cache: written in place behind a checksum and not fsynced, so it
        costs neither a new file nor a disk flush; a crash can lose it, never tear it.
        Up to `_INLINE_FRAMES_BYTES` it is written on the event loop (a page-cache copy
        costs less than a thread hop, and the ``done`` frame waiting for it is not queued
        behind the fsyncs of the worker threads).
        """
        folder = self.path(require_key(key, "put_frames"))

        def write() -> None:
            _fs.ensure_dir(folder)
            _fs.overwrite_checked(folder / FRAMES_FILE, body, encode_path_segment(run_id))

        async with self._lock(key):
            if len(body) > _INLINE_FRAMES_BYTES:
                await self._call(None, write)
                return
            try:
                write()
            except OSError as exc:
                raise StorageError(f"session storage I/O failed: {exc}") from exc

    async def get_frames(self, key: SessionKey, run_id: str) -> bytes | None:
        """The kept frames when they are `run_id`'s (RunEventStorage)."""
        path = self.path(require_key(key, "get_frames")) / FRAMES_FILE
        async with self._lock(key):
            return await self._call(None, _fs.read_checked, path, encode_path_segment(run_id))

    async def put_document(self, key: SessionKey, name: str, document: JSONObject) -> None:
        """Replace ``<name>.json`` in the session folder atomically (SessionDocumentStorage)."""
        folder = self.path(require_key(key, "put_document"))
        target = folder / _session_files.document_file(name)
        body = encode_json(document, "document") + b"\n"

        def write() -> None:
            _fs.ensure_dir(folder)
            _fs.atomic_write_bytes(target, body)

        async with self._lock(key):
            await self._call(None, write)

    async def get_document(self, key: SessionKey, name: str) -> JSONObject | None:
        """The session's ``<name>.json``, or None (SessionDocumentStorage)."""
        target = self.path(require_key(key, "get_document")) / _session_files.document_file(name)
        return await self._call(None, _fs.read_json_object, target)

    async def put_task(
        self, index: SessionKey, task_id: str, context_id: str, document: JSONObject
    ) -> None:
        """Append the task to the index's tasks.jsonl, unsynced (TaskIndexStorage).

        The append is one small ``write`` to the page cache with no fsync, made on the
        event loop: a worker-thread hop would put the put, and so a stream's first
        frame, in the queue behind every fsync the thread pool is busy with.
        """
        require_key(index, "put_task")
        line = encode_json({"task": task_id, "context": context_id, "doc": document}, "task")
        async with self._lock(index):
            tasks = await self._task_index(index)
            try:
                self._append_tasks_sync(index, tasks, [line])
            except OSError as exc:
                raise StorageError(f"session storage I/O failed: {exc}") from exc
            tasks.apply({"task": task_id, "context": context_id, "doc": document})

    async def get_task(self, index: SessionKey, task_id: str) -> JSONObject | None:
        """One task's document, or None (TaskIndexStorage)."""
        require_key(index, "get_task")
        async with self._lock(index):
            found = (await self._task_index(index)).tasks.get(task_id)
        return None if found is None else found[1]

    async def list_tasks(self, index: SessionKey) -> list[tuple[str, JSONObject]]:
        """Every task of the index, in the order they were last put (TaskIndexStorage)."""
        require_key(index, "list_tasks")
        async with self._lock(index):
            tasks = (await self._task_index(index)).tasks
            return [(task_id, document) for task_id, (_, document) in tasks.items()]

    async def delete_tasks(self, index: SessionKey, context_id: str) -> int:
        """Forget every task of `context_id` (TaskIndexStorage).

        The index is rewritten without them (atomically, durably), so that nothing of a
        deleted context stays on disk, not even in a superseded line (guarantee 13).
        """
        require_key(index, "delete_tasks")
        async with self._lock(index):
            tasks = await self._task_index(index)
            count = sum(1 for context, _ in tasks.tasks.values() if context == context_id)
            if count:
                tasks.apply({"drop": context_id})
                path = self.path(index) / _records.TASKS_FILE
                await self._call(None, _fs.atomic_write_bytes, path, tasks.compacted())
            return count

    # -- plumbing ----------------------------------------------------------------------

    def _lock(self, key: SessionKey) -> anyio.Lock:
        return self._locks[hash(key) % _LOCK_STRIPES]

    def _remember(self, key: SessionKey, tail: Tail) -> None:
        self._cache[key] = tail
        self._cache.move_to_end(key)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)

    async def _task_index(self, index: SessionKey) -> _records.TaskIndex:
        tasks = self._task_indexes.get(index)
        if tasks is None:
            path = self.path(index) / _records.TASKS_FILE
            tasks = await self._call(None, _records.read_task_index, path)
            self._task_indexes[index] = tasks
        self._task_indexes.move_to_end(index)
        while len(self._task_indexes) > self._cache_size:
            self._task_indexes.popitem(last=False)
        return tasks

    async def _call(self, key: SessionKey | None, func: Callable[..., _T], *args: object) -> _T:
        """Run blocking `func` in a worker thread; forget `key`'s cache if it fails."""
        try:
            return await anyio.to_thread.run_sync(func, *args)
        except BaseException as exc:
            if key is not None:
                self._cache.pop(key, None)
            if isinstance(exc, OSError):
                raise StorageError(f"session storage I/O failed: {exc}") from exc
            raise

    # -- blocking work, in worker threads -----------------------------------------------

    def _append_tasks_sync(
        self, index: SessionKey, tasks: _records.TaskIndex, lines: list[bytes]
    ) -> None:
        """Append unsynced (no fsync before a first frame); compact now and then."""
        folder = self.path(index)
        _fs.ensure_dir(folder)
        path = folder / _records.TASKS_FILE
        if tasks.needs_compaction():
            _fs.atomic_write_bytes(path, tasks.compacted(), durable=False)
        _fs.append_records(path, lines, durable=False)
