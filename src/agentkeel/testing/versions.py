"""The SessionStorage conformance suite, part two: versions, fencing and the new operations.

What lets several processes share a backend: every committed turn moves the version on,
a stale writer and a superseded lease holder are refused with ConcurrentWriteError, and
nothing of a refused write is ever stored (SPEC guarantees 9, 10 and 12).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import cast

import pytest

from agentkeel.errors import ConcurrentWriteError
from agentkeel.keys import SessionKey
from agentkeel.messages import Message
from agentkeel.storage.base import RunRecord, SessionStorage
from agentkeel.testing.session_storage import KEY, StorageFactory, full_record, turn

__all__ = ["VersionSuite"]


async def history(storage: SessionStorage, key: SessionKey = KEY) -> list[Message]:
    """The stored history of `key` ([] when there is no session)."""
    snapshot = await storage.load(key)
    return [] if snapshot is None else snapshot.messages


class VersionSuite:
    """Versions, fencing tokens, `exists`, `latest_run`, the lifecycle and key checks."""

    pytestmark = [pytest.mark.anyio]

    async def test_a_new_session_is_at_version_zero(self, reopen_storage: StorageFactory) -> None:
        storage = reopen_storage()
        assert await storage.version(KEY) == 0
        await storage.append(KEY, [], None)
        assert await reopen_storage().version(KEY) == 0

    async def test_each_committed_turn_moves_the_version_on(
        self, reopen_storage: StorageFactory
    ) -> None:
        storage = reopen_storage()
        assert await storage.append(KEY, turn(0), None) == 1
        assert await storage.append(KEY, [], {"only": "state"}) == 2
        assert await storage.rewrite(KEY, turn(1), None) == 3
        snapshot = await reopen_storage().load(KEY)
        assert snapshot is not None and snapshot.version == 3
        assert await reopen_storage().version(KEY) == 3

    async def test_a_save_that_changes_nothing_keeps_the_version(
        self, reopen_storage: StorageFactory
    ) -> None:
        storage = reopen_storage()
        await storage.append(KEY, turn(0), {"a": 1})
        assert await storage.append(KEY, [], None) == 1
        assert await storage.append(KEY, [], {"a": 1}) == 1
        assert await reopen_storage().version(KEY) == 1

    async def test_a_stale_version_is_refused_and_stores_nothing(
        self, reopen_storage: StorageFactory
    ) -> None:
        first, second = reopen_storage(), reopen_storage()
        await first.append(KEY, turn(0), {"by": "first"})
        loaded = await second.load(KEY)
        assert loaded is not None and loaded.version == 1
        await second.append(KEY, turn(1), {"by": "second"}, expected_version=1)
        for write in (
            first.append(KEY, turn(2), {"by": "stale"}, expected_version=1),
            first.rewrite(KEY, turn(2), {"by": "stale"}, expected_version=1),
        ):
            with pytest.raises(ConcurrentWriteError) as caught:
                await write
            assert (caught.value.expected, caught.value.actual) == (1, 2)
        snapshot = await reopen_storage().load(KEY)
        assert snapshot is not None
        assert (snapshot.messages, snapshot.state) == (turn(0) + turn(1), {"by": "second"})
        assert snapshot.version == 2

    async def test_the_expected_version_of_a_new_session_is_zero(
        self, reopen_storage: StorageFactory
    ) -> None:
        storage = reopen_storage()
        assert await storage.append(KEY, turn(0), None, expected_version=0) == 1
        with pytest.raises(ConcurrentWriteError):
            await reopen_storage().append(KEY, turn(1), None, expected_version=0)
        assert await history(reopen_storage()) == turn(0)

    async def test_a_superseded_owner_never_commits(self, reopen_storage: StorageFactory) -> None:
        """Owner A (fence 1) and owner B (fence 2, the newer lease) load the same version."""
        owner_a, owner_b = reopen_storage(), reopen_storage()
        await owner_a.append(KEY, turn(0), None, fence=1)
        version = await owner_b.version(KEY)
        await owner_b.append(KEY, turn(1), None, expected_version=version, fence=2)
        current = await owner_a.version(KEY)
        # Even with the current version, A's lease is gone: its writes are refused.
        for write in (
            owner_a.append(KEY, turn(2), {"a": 1}, expected_version=current, fence=1),
            owner_a.rewrite(KEY, [], {"a": 1}, expected_version=current, fence=1),
        ):
            with pytest.raises(ConcurrentWriteError, match="fencing token 1"):
                await write
        restarted = reopen_storage()
        assert await history(restarted) == turn(0) + turn(1)
        with pytest.raises(ConcurrentWriteError):
            await restarted.append(KEY, turn(3), None, fence=1)
        assert await restarted.append(KEY, turn(3), None, fence=3) == 3

    async def test_a_fence_is_kept_across_writes_without_one(
        self, reopen_storage: StorageFactory
    ) -> None:
        storage = reopen_storage()
        await storage.append(KEY, turn(0), None, fence=5)
        await storage.append(KEY, turn(1), {"x": 1})
        await storage.rewrite(KEY, turn(2), None)
        with pytest.raises(ConcurrentWriteError):
            await reopen_storage().append(KEY, turn(3), None, fence=4)
        assert await history(reopen_storage()) == turn(2)

    async def test_a_rewrite_without_a_state_keeps_the_stored_state(
        self, reopen_storage: StorageFactory
    ) -> None:
        """SPEC guarantee 12: a trim of the history never loses the AgentState."""
        storage = reopen_storage()
        await storage.append(KEY, turn(0), {"name": "Ada"})
        await storage.append(KEY, turn(1), None)
        await storage.rewrite(KEY, turn(1), None)
        snapshot = await reopen_storage().load(KEY)
        assert snapshot is not None
        assert (snapshot.messages, snapshot.state) == (turn(1), {"name": "Ada"})
        await reopen_storage().append(KEY, turn(2), None)
        snapshot = await reopen_storage().load(KEY)
        assert snapshot is not None and snapshot.state == {"name": "Ada"}

    async def test_exists_without_loading(self, reopen_storage: StorageFactory) -> None:
        storage = reopen_storage()
        other = SessionKey(definition="chat", context_id="ctx-runs-only")
        assert not await storage.exists(KEY)
        await storage.append(KEY, turn(0), None)
        await storage.put_run(other, full_record("run-1", 1.0))
        assert await reopen_storage().exists(KEY)
        assert await reopen_storage().exists(other)
        await storage.delete(KEY)
        assert not await reopen_storage().exists(KEY)

    async def test_latest_run_is_the_record_written_last(
        self, reopen_storage: StorageFactory
    ) -> None:
        storage = reopen_storage()
        assert await storage.latest_run(KEY) is None
        first = RunRecord(run_id="run-1", status="suspended", input="a", started_at=1.0)
        second = RunRecord(run_id="run-2", status="completed", input="b", started_at=2.0)
        await storage.put_run(KEY, first)
        await storage.put_run(KEY, second)
        assert await reopen_storage().latest_run(KEY) == second
        resumed = RunRecord(run_id="run-1", status="completed", input="a", started_at=1.0)
        await storage.put_run(KEY, resumed)
        assert await reopen_storage().latest_run(KEY) == resumed
        assert await reopen_storage().get_run(KEY, "run-1") == resumed
        assert len(await reopen_storage().list_runs(KEY)) == 2

    async def test_the_lifecycle_and_health(self, reopen_storage: StorageFactory) -> None:
        storage = reopen_storage()
        await storage.open()
        assert (await storage.health()).ok
        await storage.append(KEY, turn(0), None)
        await storage.close()
        assert await history(reopen_storage()) == turn(0)

    async def test_a_key_that_is_not_a_session_key_is_a_type_error(
        self, storage: SessionStorage
    ) -> None:
        wrong = cast(SessionKey, "chat:ctx-1")
        record = full_record("run-1", 1.0)
        calls: list[Callable[[], Awaitable[object]]] = [
            lambda: storage.load(wrong),
            lambda: storage.version(wrong),
            lambda: storage.exists(wrong),
            lambda: storage.append(wrong, [], None),
            lambda: storage.rewrite(wrong, [], None),
            lambda: storage.delete(wrong),
            lambda: storage.put_run(wrong, record),
            lambda: storage.get_run(wrong, "run-1"),
            lambda: storage.latest_run(wrong),
            lambda: storage.list_runs(wrong),
        ]
        for call in calls:
            with pytest.raises(TypeError, match=r"pass SessionKey\.parse\('chat:ctx-1'\)"):
                await call()
