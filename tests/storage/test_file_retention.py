"""LocalFileStorage's retention walks remember what they read, see every write, and lose none."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from agentkeel.errors import StorageError
from agentkeel.keys import SessionKey
from agentkeel.storage import LocalFileStorage, RunRecord
from agentkeel.storage._file_retention import RunsSummary, runs_to_sweep, sweep_session_runs

pytestmark = pytest.mark.anyio
KEY = SessionKey(definition="chat", context_id="ctx-1")


def ended(run_id: str, at: float) -> RunRecord:
    return RunRecord(run_id=run_id, status="completed", input="x", started_at=1.0, ended_at=at)


async def test_a_records_file_written_after_a_sweep_is_read_again(tmp_path: Path) -> None:
    sweeping = LocalFileStorage(tmp_path)
    await sweeping.put_run(KEY, ended("run-old", 10.0))
    await sweeping.put_run(KEY, ended("run-new", 1_000.0))
    assert await sweeping.sweep_runs(100.0, 10) == 1
    assert await sweeping.sweep_runs(100.0, 10) == 0  # remembered: nothing left before 100
    other = LocalFileStorage(tmp_path)  # another process writes the same folder
    await other.put_run(KEY, ended("run-late", 20.0))
    assert await sweeping.sweep_runs(100.0, 10) == 1, "a changed file was not read again"
    assert await sweeping.sweep_runs(2_000.0, 10) == 1, "a later cutoff skipped a record"
    assert await other.list_runs(KEY) == []


async def test_a_protected_record_is_never_counted_as_expiring(tmp_path: Path) -> None:
    storage = LocalFileStorage(tmp_path)
    waiting = RunRecord(run_id="run-w", status="suspended", input="x", started_at=1.0)
    await storage.put_run(KEY, waiting)
    await storage.put_run(KEY, ended("run-done", 50.0))
    assert await storage.sweep_runs(100.0, 10) == 1
    assert await storage.sweep_runs(10_000.0, 10) == 0
    assert [r.run_id for r in await storage.list_runs(KEY)] == ["run-w"]


async def test_a_record_written_while_a_sweep_rewrites_the_file_is_kept(tmp_path: Path) -> None:
    # the sweep rewrites runs.jsonl from what it read: a record a turn appended between
    # that read and the rename was lost, unless the sweep holds the session's lock
    storage = LocalFileStorage(tmp_path)
    await storage.put_run(KEY, ended("run-kept", 5_000.0))
    written = []
    for number in range(60):
        await storage.put_run(KEY, ended(f"run-old-{number}", 10.0))
        record = RunRecord(run_id=f"run-{number}", status="suspended", input="x", started_at=1.0)
        async with anyio.create_task_group() as group:
            group.start_soon(storage.sweep_runs, 100.0, 10)
            for _ in range(number % 4):
                await anyio.sleep(0)  # the put at a different point of the sweep each time
            group.start_soon(storage.put_run, KEY, record)
        written.append(record.run_id)
    await storage.sweep_runs(100.0, 100)
    kept = {record.run_id for record in await storage.list_runs(KEY)}
    assert kept == {"run-kept", *written}, f"lost: {sorted({*written} - kept)}"


def test_a_run_record_with_a_status_no_reader_knows_is_refused() -> None:
    # written, it would make the session's whole runs.jsonl unreadable (CorruptSessionError)
    with pytest.raises(StorageError, match="'running'"):
        RunRecord(run_id="run-1", status="running", input="x", started_at=1.0)  # type: ignore[arg-type]


async def test_a_session_deleted_between_the_walk_and_its_rewrite_is_skipped(
    tmp_path: Path,
) -> None:
    # the walk names the sessions in one thread hop and each is rewritten later, under its
    # lock: one deleted meanwhile must cost nothing, and the sweep must go on to the next
    storage = LocalFileStorage(tmp_path)
    other = SessionKey(definition="chat", context_id="ctx-2")
    for key in (KEY, other):
        await storage.put_run(key, ended("run-old", 10.0))
    summaries: dict[Path, RunsSummary] = {}
    found = runs_to_sweep(tmp_path, 100.0, summaries)
    assert [key for key, _ in found] == [KEY, other]
    await storage.delete(KEY)
    assert sweep_session_runs(found[0][1], 100.0, 10, summaries) == 0
    assert sweep_session_runs(found[1][1], 100.0, 10, summaries) == 1
    assert await storage.list_runs(other) == []
    assert await storage.sweep_runs(100.0, 10) == 0
