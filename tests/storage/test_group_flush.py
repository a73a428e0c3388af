"""GroupFlush and the appends that use it: one hop for the turns saving together."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from agentkeel.errors import ConcurrentWriteError, StorageError
from agentkeel.messages import Message
from agentkeel.result import Usage
from agentkeel.storage import LocalFileStorage, SessionKey
from agentkeel.storage._file_flush import INLINE_BYTES, GroupFlush
from agentkeel.storage.base import RunRecord

pytestmark = pytest.mark.anyio


def _files(folder: Path, count: int) -> list[Path]:
    paths = []
    for number in range(count):
        path = folder / f"f{number}.jsonl"
        path.write_bytes(b"line\n")
        paths.append(path)
    return paths


async def test_flushes_waiting_together_share_one_hop(tmp_path: Path) -> None:
    flush = GroupFlush()
    paths = _files(tmp_path, 10)
    async with anyio.create_task_group() as group:
        for path in paths:  # the first leads alone; the nine after it gather meanwhile
            group.start_soon(flush.flush, [path, paths[0]])
    assert flush.hops == 2
    await flush.flush([paths[3]])
    assert flush.hops == 3


async def test_a_failed_fsync_fails_only_its_own_waiters(tmp_path: Path) -> None:
    flush = GroupFlush()
    good = _files(tmp_path, 1)[0]
    bad = good / "child"  # a file is no folder: NotADirectoryError, not "deleted"
    outcomes: dict[str, str] = {}

    async def wait(name: str, path: Path) -> None:
        try:
            await flush.flush([path])
        except StorageError as exc:
            outcomes[name] = str(exc)
        else:
            outcomes[name] = "ok"

    async with anyio.create_task_group() as group:
        group.start_soon(wait, "first", good)
        group.start_soon(wait, "good", good)
        group.start_soon(wait, "bad", bad)
    assert outcomes["first"] == outcomes["good"] == "ok"
    assert outcomes["bad"].startswith("session storage I/O failed")
    assert flush.hops == 2


async def test_a_deleted_file_has_nothing_left_to_keep(tmp_path: Path) -> None:
    flush = GroupFlush()
    await flush.flush([tmp_path / "gone.jsonl"])
    assert flush.hops == 1


async def test_a_cancelled_waiter_leaves_the_batch_to_the_others(tmp_path: Path) -> None:
    flush = GroupFlush()
    first, second = _files(tmp_path, 2)
    done: list[str] = []

    async def follower() -> None:
        await flush.flush([second])
        done.append("second")

    async with anyio.create_task_group() as group:
        group.start_soon(flush.flush, [first])
        await anyio.sleep(0)  # its hop is in flight
        with anyio.CancelScope() as scope:
            scope.cancel()
            await flush.flush([second])  # gathers, then is cancelled while it waits
        group.start_soon(follower)  # joins that batch and leads it
    assert done == ["second"]
    assert flush.hops == 2


async def test_a_leader_cancelled_before_its_hop_still_makes_it(tmp_path: Path) -> None:
    flush = GroupFlush()
    with anyio.CancelScope() as scope:
        scope.cancel()
        await flush.flush(_files(tmp_path, 1))
    assert flush.hops == 1


def _record(run_id: str) -> RunRecord:
    return RunRecord(run_id=run_id, status="completed", input="q", started_at=1.0)


def _turn(number: int) -> list[Message]:
    return [Message.user(f"question {number}"), Message.assistant(f"answer {number}")]


async def test_turns_saved_together_share_hops_and_are_all_durable(
    tmp_path: Path,
) -> None:
    storage = LocalFileStorage(tmp_path)
    keys = [SessionKey(definition="chat", context_id=f"ctx-{n}") for n in range(8)]
    for key in keys:  # the first turn of a session creates its files, in a worker thread
        await storage.append(key, _turn(0), None, run=_record("run-0"))
        await storage.add_usage(key, Usage(input_tokens=1), day="2026-12-01")
    before = storage._flush.hops

    async def save(key: SessionKey) -> None:
        await storage.add_usage(key, Usage(output_tokens=2), day="2026-12-01")
        await storage.append(key, _turn(1), None, expected_version=1, run=_record("run-1"))

    # a hop stands in flight while the turns start, as when the worker thread is busy
    # (without it, a loaded machine can finish each hop before the next turn is ready)
    busy = storage._flush._running = anyio.Event()
    async with anyio.create_task_group() as group:
        for key in keys:
            group.start_soon(save, key)
        await anyio.sleep(0.2)
        storage._flush._running = None
        busy.set()
    # one hop per turn would be eight; two sessions can share a lock stripe, so a turn
    # can wait for another's flush and join a later batch: fewer, not exactly two
    assert storage._flush.hops - before < len(keys)
    reopened = LocalFileStorage(tmp_path)
    for key in keys:
        snapshot = await reopened.load(key)
        assert snapshot is not None and snapshot.version == 2
        assert snapshot.messages[-1].text == "answer 1"
        latest = await reopened.latest_run(key)
        assert latest is not None and latest.run_id == "run-1"
        assert await reopened.context_usage(key) == Usage(input_tokens=1, output_tokens=2)
    assert await reopened.principal_usage(None, "2026-12-01") == Usage(
        input_tokens=8, output_tokens=16
    )


async def test_a_state_change_still_commits_the_durable_way(tmp_path: Path) -> None:
    storage = LocalFileStorage(tmp_path)
    key = SessionKey(definition="chat", context_id="ctx-state")
    await storage.append(key, _turn(0), None)
    before = storage._flush.hops
    await storage.append(key, _turn(1), {"step": 2})  # state.json: a rename, in a thread
    assert storage._flush.hops == before
    await storage.append(key, _turn(2), {"step": 2})  # unchanged state: only appends
    assert storage._flush.hops == before + 1
    snapshot = await LocalFileStorage(tmp_path).load(key)
    assert snapshot is not None and snapshot.state == {"step": 2} and snapshot.version == 3


async def test_a_big_turn_is_written_in_a_worker_thread_and_still_saved(
    tmp_path: Path,
) -> None:
    storage = LocalFileStorage(tmp_path)
    key = SessionKey(definition="chat", context_id="ctx-big")
    await storage.append(key, _turn(0), None)
    before = storage._flush.hops
    big = [Message.user("q"), Message.assistant("x" * (INLINE_BYTES + 1))]
    await storage.append(key, big, None)  # not copied on the event loop
    assert storage._flush.hops == before
    snapshot = await LocalFileStorage(tmp_path).load(key)
    assert snapshot is not None and snapshot.messages[-1].text == "x" * (INLINE_BYTES + 1)


async def test_a_refused_append_writes_nothing_and_keeps_the_usage_it_owed(
    tmp_path: Path,
) -> None:
    storage = LocalFileStorage(tmp_path)
    key = SessionKey(definition="chat", context_id="ctx-stale")
    await storage.append(key, _turn(0), None, run=_record("run-0"))
    await storage.add_usage(key, Usage(input_tokens=1), day="2026-12-01")
    await storage.add_usage(key, Usage(input_tokens=2), day="2026-12-01")  # owed
    folder = storage.path(key)
    sizes = {name: (folder / name).stat().st_size for name in ("messages.jsonl", "runs.jsonl")}
    with pytest.raises(ConcurrentWriteError):  # a stale writer, on the event-loop path
        await storage.append(key, _turn(1), None, expected_version=0, run=_record("run-1"))
    assert {name: (folder / name).stat().st_size for name in sizes} == sizes
    await storage.append(key, _turn(1), None, expected_version=1, run=_record("run-1"))
    reopened = LocalFileStorage(tmp_path)
    snapshot = await reopened.load(key)
    assert snapshot is not None and snapshot.version == 2
    latest = await reopened.latest_run(key)
    assert latest is not None and latest.run_id == "run-1"
    assert await reopened.context_usage(key) == Usage(input_tokens=3)
