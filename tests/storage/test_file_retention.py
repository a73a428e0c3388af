"""LocalFileStorage's retention walks remember what they read, and see every write."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentkeel.keys import SessionKey
from agentkeel.storage import LocalFileStorage, RunRecord

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
