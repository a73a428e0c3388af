"""The SessionStorage conformance suite, part three: run records.

One record per run, replaced as the run moves on, listed oldest first, kept apart from
the history (a run record never creates a session) and keyed, never a path. A turn's
record saved with the turn (``append``/``rewrite`` with ``run``) lands with it, and a
refused turn leaves no record (SPEC guarantee 10).
"""

from __future__ import annotations

from typing import cast

import pytest

from agentkeel.errors import ConcurrentWriteError, StorageError
from agentkeel.messages import JSONObject
from agentkeel.storage.base import RunRecord
from agentkeel.testing.session_storage import KEY, StorageFactory, full_record, turn

__all__ = ["RunRecordSuite"]


class RunRecordSuite:
    """Run records: what every SessionStorage does with them."""

    pytestmark = [pytest.mark.anyio]

    async def test_run_records_round_trip(self, reopen_storage: StorageFactory) -> None:
        record = full_record("run-1", 100.0)
        await reopen_storage().put_run(KEY, record)
        assert await reopen_storage().get_run(KEY, "run-1") == record

    async def test_put_run_replaces_a_record(self, reopen_storage: StorageFactory) -> None:
        storage = reopen_storage()
        await storage.put_run(
            KEY, RunRecord(run_id="run-1", status="suspended", input="x", started_at=1.0)
        )
        done = RunRecord(
            run_id="run-1", status="completed", input="x", started_at=1.0, ended_at=2.0, text="done"
        )
        await storage.put_run(KEY, done)
        assert await reopen_storage().get_run(KEY, "run-1") == done
        assert await reopen_storage().list_runs(KEY) == [done]

    async def test_list_runs_is_oldest_first(self, reopen_storage: StorageFactory) -> None:
        storage = reopen_storage()
        records = [
            full_record(f"run-{name}", started)
            for name, started in [("c", 3.0), ("a", 1.0), ("b2", 2.0), ("b1", 2.0)]
        ]
        for record in records:
            await storage.put_run(KEY, record)
        listed = await reopen_storage().list_runs(KEY)
        assert [record.run_id for record in listed] == ["run-a", "run-b1", "run-b2", "run-c"]

    async def test_runs_do_not_create_a_session(self, reopen_storage: StorageFactory) -> None:
        await reopen_storage().put_run(KEY, full_record("run-1", 1.0))
        assert await reopen_storage().load(KEY) is None
        assert await reopen_storage().get_run(KEY, "run-unknown") is None
        await reopen_storage().append(KEY, turn(0), None)
        assert await reopen_storage().list_runs(KEY) == [full_record("run-1", 1.0)]

    @pytest.mark.parametrize(
        "run_id", ["../x", "/etc/passwd", "%2e%2e%2f", "a/b", "nul\x00", ".", ".."]
    )
    async def test_any_run_id_is_a_key_not_a_path(
        self, reopen_storage: StorageFactory, run_id: str
    ) -> None:
        record = RunRecord(run_id=run_id, status="completed", input=None, started_at=1.0)
        await reopen_storage().put_run(KEY, record)
        assert await reopen_storage().get_run(KEY, run_id) == record
        assert await reopen_storage().get_run(KEY, "x") is None
        assert await reopen_storage().list_runs(KEY) == [record]

    async def test_a_run_record_that_is_not_json_is_refused(
        self, reopen_storage: StorageFactory
    ) -> None:
        not_json = cast(JSONObject, {"x": object()})
        record = RunRecord(run_id="run-1", status="completed", input=not_json, started_at=1.0)
        with pytest.raises(StorageError):
            await reopen_storage().put_run(KEY, record)
        assert await reopen_storage().get_run(KEY, "run-1") is None

    async def test_a_turn_saves_its_run_record_with_it(
        self, reopen_storage: StorageFactory
    ) -> None:
        storage = reopen_storage()
        records = [full_record(f"run-{index}", float(index)) for index in range(4)]
        assert await storage.append(KEY, turn(0), {"a": 1}, run=records[0]) == 1  # new
        assert await storage.append(KEY, turn(1), None, run=records[1]) == 2  # saved
        assert await storage.rewrite(KEY, turn(1), None, run=records[2]) == 3
        assert await storage.append(KEY, [], None, run=records[3]) == 3  # nothing else
        reopened = reopen_storage()
        assert await reopened.list_runs(KEY) == records
        assert await reopened.latest_run(KEY) == records[3]
        snapshot = await reopened.load(KEY)
        assert snapshot is not None and (snapshot.messages, snapshot.state) == (turn(1), {"a": 1})

    async def test_a_refused_turn_leaves_no_run_record(
        self, reopen_storage: StorageFactory
    ) -> None:
        owner_a, owner_b = reopen_storage(), reopen_storage()
        await owner_a.append(KEY, turn(0), None, fence=1)
        await owner_b.append(KEY, turn(1), None, fence=2, run=full_record("run-b", 2.0))
        stale = full_record("run-a", 3.0)
        for write in (
            owner_a.append(KEY, turn(2), None, fence=1, run=stale),
            owner_a.rewrite(KEY, [], None, fence=1, run=stale),
            owner_a.append(KEY, turn(2), None, expected_version=1, fence=2, run=stale),
            owner_a.append(KEY, [], None, fence=1, run=stale),
        ):
            with pytest.raises(ConcurrentWriteError):
                await write
        reopened = reopen_storage()
        assert await reopened.get_run(KEY, "run-a") is None, "a refused turn's record landed"
        assert await reopened.latest_run(KEY) == full_record("run-b", 2.0)
        assert await reopened.version(KEY) == 2
