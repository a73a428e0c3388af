"""Retention on LocalFileStorage: the blocking folder walks, run in worker threads.

A session folder is idle when its history, state and metadata files did not change
since the cutoff; one whose latest run is running or suspended is never named. Expired run
records are dropped by rewriting ``runs.jsonl`` atomically with the lines that stay, in
their order (the last line still names the latest run). Old frames are one file each.

Reading every ``runs.jsonl`` on every tick would cost a sweep the size of the whole
folder. So a storage remembers, per session, the `_fs.stamp` of its ``runs.jsonl`` and
the earliest end among the records a sweep could drop: a file whose stamp did not move
and whose earliest end is after the cutoff costs one ``stat``, never a read. Any write,
by this process or another, moves the stamp.
"""

from __future__ import annotations

import functools
import json
import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import anyio
import anyio.to_thread

from agentkeel import _fs
from agentkeel.errors import AgentkeelError, CorruptSessionError, StorageError
from agentkeel.ids import decode_path_segment
from agentkeel.keys import SessionKey
from agentkeel.storage import _records
from agentkeel.storage._file_journal import Journal
from agentkeel.storage._history import encode_json
from agentkeel.storage._session_files import (
    FRAMES_FILE,
    MESSAGES_FILE,
    SESSION_FILE,
    STATE_FILE,
)
from agentkeel.storage.base import RunRecord
from agentkeel.storage.retention import PROTECTED_STATUSES

_T = TypeVar("_T")

__all__ = [
    "FileRetention",
    "RunsSummary",
    "idle_sessions",
    "runs_to_sweep",
    "session_folders",
    "sweep_frames",
    "sweep_session_runs",
]


@dataclass(frozen=True, slots=True)
class RunsSummary:
    """What a sweep learnt of one ``runs.jsonl``, valid while its stamp is the same."""

    stamp: tuple[int, int, int]
    earliest_end: float
    """The earliest ``ended_at`` of a record a sweep may drop (infinity: none)."""


def _earliest_end(records: list[RunRecord], doomed: set[str]) -> float:
    ends = [
        record.ended_at
        for record in records
        if record.ended_at is not None
        and record.status not in PROTECTED_STATUSES
        and record.run_id not in doomed
    ]
    return min(ends, default=math.inf)


def session_folders(root: Path) -> Iterator[tuple[SessionKey, Path]]:
    """Every session folder under `root` with its key (task indexes and strays skipped)."""
    if not root.is_dir():
        return
    for entry in sorted(root.iterdir()):
        if not entry.is_dir():
            continue
        if ":" in entry.name:
            yield from _session(entry, None)
            continue
        principal = decode_path_segment(entry.name)
        for inner in sorted(entry.iterdir()):
            if inner.is_dir() and ":" in inner.name:
                yield from _session(inner, principal)


def _session(folder: Path, principal: str | None) -> Iterator[tuple[SessionKey, Path]]:
    if not (folder / SESSION_FILE).exists() and not (folder / MESSAGES_FILE).exists():
        if not (folder / _records.RUNS_FILE).exists():
            return  # a task index, or a folder being deleted
    try:
        yield SessionKey.parse(decode_path_segment(folder.name), principal=principal), folder
    except (AgentkeelError, ValueError):
        return  # not a name this storage writes


def _newest_change(folder: Path) -> float:
    """When the conversation last changed: its history, state or metadata.

    Run records and frames are left out, as a sweep rewrites those.
    """
    newest = 0.0
    for name in (SESSION_FILE, MESSAGES_FILE, STATE_FILE):
        try:
            newest = max(newest, os.stat(folder / name).st_mtime)
        except FileNotFoundError:
            continue
    return newest


def idle_sessions(root: Path, updated_before: float, limit: int) -> list[SessionKey]:
    """Up to `limit` sessions unchanged since `updated_before` and not protected."""
    found = []
    for key, folder in session_folders(root):
        if _newest_change(folder) >= updated_before:
            continue
        try:
            latest = _records.last_run(folder)
        except CorruptSessionError:
            continue  # never delete what cannot be read
        if latest is not None and latest.status in PROTECTED_STATUSES:
            continue
        found.append(key)
        if len(found) == limit:
            break
    return found


def runs_to_sweep(
    root: Path, ended_before: float, summaries: dict[Path, RunsSummary]
) -> list[tuple[SessionKey, Path]]:
    """The sessions whose ``runs.jsonl`` may hold a record that ended before the cutoff.

    A file whose stamp did not move since `summaries` learnt that nothing in it ends
    before `ended_before` costs one ``stat``. The sessions that are gone are forgotten.
    """
    found = []
    seen: set[Path] = set()
    for key, folder in session_folders(root):
        seen.add(folder)
        stamp = _fs.stamp(folder / _records.RUNS_FILE)
        known = summaries.get(folder)
        if stamp is None or (
            known is not None and known.stamp == stamp and known.earliest_end >= ended_before
        ):
            continue
        found.append((key, folder))
    for gone in summaries.keys() - seen:
        del summaries[gone]
    return found


def sweep_session_runs(
    folder: Path,
    ended_before: float,
    limit: int,
    summaries: dict[Path, RunsSummary],
    seal: Callable[[Path], None] | None = None,
) -> int:
    """Drop up to `limit` of one session's run records that ended before the cutoff.

    The caller holds the session's lock: the file is rewritten from what was read, so a
    record appended in between would be lost. `seal` (the storage's `Journal.seal`) is
    told of the file before it is replaced.
    """
    path = folder / _records.RUNS_FILE
    raw = _fs.read_bytes(path)
    if not raw:
        return 0
    try:
        records = _records.list_runs(folder)
    except CorruptSessionError:
        return 0
    doomed = {
        record.run_id
        for record in records
        if record.ended_at is not None
        and record.ended_at < ended_before
        and record.status not in PROTECTED_STATUSES
    }
    doomed = set(sorted(doomed)[:limit])
    if doomed:
        kept = [
            encode_json(record.to_json(), "run record") + b"\n"
            for record in _in_file_order(raw)
            if record.run_id not in doomed
        ]
        if seal is not None:
            seal(path)  # a replay after a reboot must not write into the new file
        _fs.atomic_write_bytes(path, b"".join(kept))
    stamp = _fs.stamp(path)
    if stamp is not None:
        summaries[folder] = RunsSummary(stamp, _earliest_end(records, doomed))
    return len(doomed)


def _in_file_order(raw: bytes) -> list[RunRecord]:
    """The last record of each run id, in the order of their last lines (whole lines)."""
    latest: dict[str, RunRecord] = {}
    for line in raw[: raw.rfind(b"\n") + 1].splitlines():
        if line.strip():
            record = RunRecord.from_json(json.loads(line))
            latest.pop(record.run_id, None)
            latest[record.run_id] = record
    return list(latest.values())


def sweep_frames(root: Path, written_before: float, limit: int) -> int:
    """Delete up to `limit` frames files last written before `written_before`."""
    dropped = 0
    for _, folder in session_folders(root):
        path = folder / FRAMES_FILE
        try:
            written = path.stat().st_mtime
        except FileNotFoundError:
            continue
        if written < written_before and _fs.remove_file(path, durable=False):
            dropped += 1
            if dropped == limit:
                break
    return dropped


class FileRetention:
    """RetentionStorage for LocalFileStorage: the walks above, in a worker thread each."""

    directory: Path
    _journal: Journal
    _lock: Callable[[SessionKey], anyio.Lock]
    """The session's lock, which every write of its files holds."""

    async def sweep_runs(self, ended_before: float, limit: int) -> int:
        """Drop up to `limit` run records that ended before `ended_before`.

        Each session's file is rewritten under the session's lock, as every write of a
        run record is made: a record appended while the sweep rewrote the file was lost.
        """
        summaries: dict[Path, RunsSummary] = vars(self).setdefault("_runs_summaries", {})
        found = await _in_thread(
            lambda root, at, _: runs_to_sweep(root, at, summaries),
            self.directory,
            ended_before,
            limit,
        )
        sweep = functools.partial(sweep_session_runs, summaries=summaries, seal=self._journal.seal)
        dropped = 0
        for key, folder in found:
            if dropped >= limit:
                break
            async with self._lock(key):
                dropped += await _in_thread(sweep, folder, ended_before, limit - dropped)
        return dropped

    async def sweep_frames(self, written_before: float, limit: int) -> int:
        """Delete up to `limit` frames files written before `written_before`."""
        return await _in_thread(sweep_frames, self.directory, written_before, limit)

    async def idle_sessions(self, updated_before: float, limit: int) -> list[SessionKey]:
        """Sessions whose folder did not change since `updated_before`, not protected."""
        return await _in_thread(idle_sessions, self.directory, updated_before, limit)


async def _in_thread(func: Callable[[Path, float, int], _T], root: Path, at: float, n: int) -> _T:
    try:
        return await anyio.to_thread.run_sync(func, root, at, n)
    except OSError as exc:
        raise StorageError(f"session storage I/O failed: {exc}") from exc
