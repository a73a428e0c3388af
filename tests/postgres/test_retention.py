"""Retention (SPEC 5) on every backend, with an injected clock: nothing sleeps."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import anyio
import pytest

from agentkeel.errors import RunInProgressError
from agentkeel.framework import Retention
from agentkeel.keys import SessionKey
from agentkeel.messages import Message
from agentkeel.result import RunStatus
from agentkeel.server.sweeper import RetentionSweeper
from agentkeel.storage import InMemoryStorage, LocalFileStorage
from agentkeel.storage.base import RunRecord, SessionStorage
from agentkeel.storage.memory import InMemoryStorage as _Memory
from agentkeel.storage.postgres import PostgresStorage

pytestmark = [pytest.mark.anyio]
DAY = 86_400.0
IDLE = SessionKey(definition="chat", context_id="ctx-idle", principal="alice")
WAITING = SessionKey(definition="chat", context_id="ctx-waiting")
RECENT = SessionKey(definition="chat", context_id="ctx-recent")


@pytest.fixture(params=["memory", "files", pytest.param("postgres", marks=pytest.mark.postgres)])
async def storage(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SessionStorage]:
    if request.param == "memory":
        yield InMemoryStorage()
    elif request.param == "files":
        yield LocalFileStorage(tmp_path / "sessions")
    else:
        database = request.getfixturevalue("pg_database")
        schema = request.getfixturevalue("pg_schema")
        postgres = PostgresStorage(database, schema=schema, pool_size=2)
        await postgres.open()
        try:
            yield postgres
        finally:
            await postgres.close()


def record(run_id: str, status: RunStatus, ended_at: float | None) -> RunRecord:
    return RunRecord(run_id=run_id, status=status, input="x", started_at=1.0, ended_at=ended_at)


def sweeper_on(
    storage: SessionStorage, clock: Callable[[], float], deleted: list[SessionKey]
) -> tuple[RetentionSweeper, dict[str, int]]:
    counted: dict[str, int] = {}

    async def delete(key: SessionKey) -> bool:
        deleted.append(key)
        return await storage.delete(key)

    def count(kind: str, amount: int) -> None:
        counted[kind] = counted.get(kind, 0) + amount

    policy = Retention(runs=30 * DAY, events=3600.0, idle_sessions=7 * DAY)
    sweeper = RetentionSweeper(
        storage, policy, delete_context=delete, clock=clock, batch=2, on_swept=count
    )
    return sweeper, counted


async def test_idle_contexts_old_runs_and_frames_go_running_and_suspended_stay(
    storage: SessionStorage,
) -> None:
    await storage.append(IDLE, [Message.user("old")], {"k": 1})
    await storage.put_run(IDLE, record("run-done", "completed", 10.0))
    await storage.put_frames(IDLE, "run-done", b"id: 1\n")  # type: ignore[attr-defined]
    await storage.append(WAITING, [Message.user("approve?")], None)
    await storage.put_run(WAITING, record("run-old", "completed", 10.0))
    await storage.put_run(WAITING, record("run-wait", "suspended", None))
    await anyio.sleep(0.02)  # file mtimes are coarse; this is ordering, not timing
    cut = time.time()
    await anyio.sleep(0.02)
    await storage.append(RECENT, [Message.user("new")], None)
    await storage.put_run(RECENT, record("run-live", "completed", time.time()))
    deleted: list[SessionKey] = []
    # a week after `cut`: IDLE and WAITING are a week idle, RECENT is not
    sweeper, counted = sweeper_on(storage, lambda: cut + 7 * DAY, deleted)
    swept = await sweeper.sweep()
    assert deleted == [IDLE]
    assert await storage.load(IDLE) is None and await storage.list_runs(IDLE) == []
    waiting = await storage.list_runs(WAITING)
    assert [r.run_id for r in waiting] == ["run-wait"]  # an old ended run went, not this one
    assert [r.run_id for r in await storage.list_runs(RECENT)] == ["run-live"]
    assert (await storage.load(RECENT)) is not None
    assert swept == counted == {"runs": 2, "frames": 1, "sessions": 1}
    assert await sweeper.sweep() == {"runs": 0, "frames": 0, "sessions": 0}


async def test_memory_storage_stays_bounded_under_retention() -> None:
    storage = _Memory()
    now = [time.time()]
    sweeper, _ = sweeper_on(storage, lambda: now[0], [])
    for index in range(50):
        key = SessionKey(definition="chat", context_id=f"ctx-{index}")
        await storage.append(key, [Message.user("hi"), Message.assistant("hello")], None)
        await storage.put_run(key, record(f"run-{index}", "completed", time.time()))
    now[0] += 8 * DAY
    await sweeper.sweep()
    assert storage._sessions == {}  # nothing kept once its retention ran out


@pytest.mark.postgres
async def test_two_replicas_never_sweep_the_same_sessions(pg_storage: PostgresStorage) -> None:
    for index in range(30):
        key = SessionKey(definition="chat", context_id=f"ctx-{index}")
        await pg_storage.append(key, [Message.user("hi")], None)
    deleted: list[SessionKey] = []
    later = time.time() + 8 * DAY
    first, _ = sweeper_on(pg_storage, lambda: later, deleted)
    second, _ = sweeper_on(pg_storage.sharing(), lambda: later, deleted)
    results: list[dict[str, int]] = []

    async def run(sweeper: RetentionSweeper) -> None:
        results.append(await sweeper.sweep())

    async with anyio.create_task_group() as group:
        group.start_soon(run, first)
        group.start_soon(run, second)
    assert sum(result["sessions"] for result in results) == 30
    assert len(deleted) == len(set(deleted)) == 30  # each named to one sweeper only


async def test_a_context_running_a_turn_is_left_for_a_later_sweep() -> None:
    storage = _Memory()
    await storage.append(IDLE, [Message.user("old")], None)

    async def busy(key: SessionKey) -> bool:
        raise RunInProgressError(f"{key.context_id} is running a turn")

    policy = Retention(runs=None, events=None, idle_sessions=DAY)
    sweeper = RetentionSweeper(
        storage, policy, delete_context=busy, clock=lambda: time.time() + 2 * DAY
    )
    assert await sweeper.sweep() == {"runs": 0, "frames": 0, "sessions": 0}
    assert await storage.load(IDLE) is not None
