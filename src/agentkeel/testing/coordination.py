"""Conformance suites for the coordination Protocols: every backend must pass them.

Subclass a suite in a test module and give it its backend through the fixtures it
names; pytest then runs every test of the suite against it::

    class TestMyLease(RunLeaseConformance):
        @pytest.fixture
        def leases(self) -> LeaseHandles:
            backend = MyLeaseBackend(...)
            return backend.handle, backend.handle  # or two clients of one server

Two handles on one backend stand for two replicas: what one holds, the other must see.
The tests need the anyio pytest plugin (``pytest.mark.anyio``, which ships with anyio).
"""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest

from agentkeel.errors import RunInProgressError
from agentkeel.messages import JSONObject
from agentkeel.runtime.coordination import (
    IdempotencyScope,
    IdempotencyStore,
    LeaseLostError,
    RunLease,
    RunStream,
    StreamFanout,
)
from agentkeel.runtime.errors import IdempotencyKeyReusedError
from agentkeel.storage.base import SessionKey

__all__ = [
    "IdempotencyConformance",
    "LeaseHandles",
    "RunLeaseConformance",
    "StreamFanoutConformance",
]

LeaseHandles = tuple[RunLease, RunLease]
"""Two handles on the same lease backend (two replicas)."""

KEY = SessionKey(definition="chat", context_id="ctx-1")
OTHER = SessionKey(definition="chat", context_id="ctx-2")
_SHORT = 0.2
"""A ttl short enough for a test, long enough for a loaded machine to renew within."""


@pytest.mark.anyio
class RunLeaseConformance:
    """`RunLease`: mutual exclusion, arrival order, expiry, fencing, cancel delivery."""

    @pytest.fixture
    def leases(self) -> LeaseHandles:
        """Two handles on one fresh backend; a subclass must provide it."""
        raise NotImplementedError("a RunLease conformance test class provides `leases`")

    async def test_one_holder_at_a_time_in_arrival_order(self, leases: LeaseHandles) -> None:
        """Turns from both replicas never overlap, and run in the order they arrived."""
        holding: list[int] = []
        order: list[int] = []

        async def turn(index: int) -> None:
            grant = await leases[index % 2].acquire(KEY)
            holding.append(index)
            assert len(holding) == 1, f"two holders at once: {holding}"
            order.append(index)
            await anyio.sleep(0.01)
            holding.remove(index)
            assert await leases[index % 2].release(grant)

        async with anyio.create_task_group() as group:
            for index in range(6):
                group.start_soon(turn, index)
                await anyio.sleep(0.005)  # arrive one after another
        assert order == list(range(6))

    async def test_a_busy_context_refuses_without_waiting(self, leases: LeaseHandles) -> None:
        """``wait=False`` is refused while another replica holds the context."""
        grant = await leases[0].acquire(KEY)
        with pytest.raises(RunInProgressError):
            await leases[1].acquire(KEY, wait=False)
        other = await leases[1].acquire(OTHER, wait=False)  # contexts are independent
        assert await leases[1].release(other)
        assert await leases[0].release(grant)
        again = await leases[1].acquire(KEY, wait=False)
        assert await leases[1].release(again)

    async def test_the_fence_only_grows(self, leases: LeaseHandles) -> None:
        """Every grant of a context carries a larger fence than the one before."""
        fences = []
        for index in range(5):
            grant = await leases[index % 2].acquire(KEY)
            fences.append(grant.fence)
            assert await leases[index % 2].release(grant)
        assert fences == sorted(fences)
        assert len(set(fences)) == len(fences)

    async def test_an_unrenewed_grant_expires_to_the_next_caller(
        self, leases: LeaseHandles
    ) -> None:
        """A holder that stops renewing loses the context to whoever waits."""
        stale = await leases[0].acquire(KEY, ttl=_SHORT)
        with anyio.fail_after(5):
            fresh = await leases[1].acquire(KEY)
        assert fresh.fence > stale.fence
        assert await leases[1].release(fresh)

    async def test_a_stale_holder_is_refused(self, leases: LeaseHandles) -> None:
        """After a takeover the old grant can neither renew, write, nor release."""
        stale = await leases[0].acquire(KEY, ttl=_SHORT)
        with anyio.fail_after(5):
            fresh = await leases[1].acquire(KEY, ttl=30)
        with pytest.raises(LeaseLostError):
            await leases[0].renew(stale)
        with pytest.raises(LeaseLostError):
            await leases[0].check(stale)
        assert not await leases[0].release(stale)
        with pytest.raises(RunInProgressError):  # the fresh holder still holds it
            await leases[0].acquire(KEY, wait=False)
        await leases[1].check(fresh)
        assert await leases[1].release(fresh)

    async def test_renewing_keeps_the_context(self, leases: LeaseHandles) -> None:
        """A holder that renews in time is not taken over."""
        grant = await leases[0].acquire(KEY, ttl=_SHORT * 2)
        for _ in range(4):
            await anyio.sleep(_SHORT / 2)
            grant = await leases[0].renew(grant)
            with pytest.raises(RunInProgressError):
                await leases[1].acquire(KEY, wait=False)
        await leases[0].check(grant)
        assert await leases[0].release(grant)

    async def test_a_caller_that_gives_up_leaves_the_line(self, leases: LeaseHandles) -> None:
        """A waiter cancelled in line does not block the ones behind it."""
        grant = await leases[0].acquire(KEY)
        with anyio.move_on_after(0.05):
            await leases[1].acquire(KEY)
        assert await leases[0].release(grant)
        with anyio.fail_after(5):
            after = await leases[1].acquire(KEY)
        assert await leases[1].release(after)

    async def test_a_cancel_reaches_the_holder(self, leases: LeaseHandles) -> None:
        """The cancel control message, sent from either replica, reaches the holder only."""
        told: list[tuple[str, bool]] = []

        def on_cancel(run_id: str, drop: bool) -> bool:
            told.append((run_id, drop))
            return run_id == "run-1"

        assert not await leases[1].cancel(KEY, "run-1")  # nobody holds it
        grant = await leases[0].acquire(KEY, on_cancel=on_cancel)
        with anyio.fail_after(5):
            assert await leases[1].cancel(KEY, "run-1")
            assert not await leases[0].cancel(KEY, "run-2")
            assert await leases[1].cancel(KEY, "run-1", drop=True)  # a rollback says so
        assert told == [("run-1", False), ("run-2", False), ("run-1", True)]
        assert await leases[0].release(grant)
        assert not await leases[1].cancel(KEY, "run-1")
        assert len(told) == 3


def _frame(index: int, *, done: bool = False) -> JSONObject:
    data: JSONObject = {"runId": "run-1", "n": index}
    if done:
        data["done"] = True
    return data


async def _collect(stream: RunStream, after: int) -> list[tuple[int, JSONObject]]:
    got: list[tuple[int, JSONObject]] = []
    with anyio.fail_after(5):
        async for batch in stream.batches(after, heartbeat=1.0):
            got.extend((frame.id, frame.data) for frame in batch)
    return got


async def _started(fanout: StreamFanout, run_id: str = "run-1") -> RunStream:
    stream = await fanout.run(KEY, run_id, resumed=False)
    stream.begin()
    fanout.put(stream)
    return stream


@pytest.mark.anyio
class StreamFanoutConformance:
    """`StreamFanout`: ordering, replay after an id, many followers, done ends a follow."""

    @pytest.fixture
    def fanout(self) -> StreamFanout:
        """A fresh backend; a subclass must provide it."""
        raise NotImplementedError("a StreamFanout conformance test class provides `fanout`")

    async def test_frames_come_in_order_with_growing_ids(self, fanout: StreamFanout) -> None:
        """A follower from the start sees every frame, in order, numbered from 1."""
        stream = await _started(fanout)
        for index in range(5):
            stream.publish(_frame(index))
        stream.publish(_frame(5, done=True))
        got = await _collect(stream, 0)
        assert [frame_id for frame_id, _ in got] == [1, 2, 3, 4, 5, 6]
        assert [data["n"] for _, data in got] == [0, 1, 2, 3, 4, 5]

    async def test_replay_after_an_id(self, fanout: StreamFanout) -> None:
        """A follower from id n gets exactly the frames after n."""
        stream = await _started(fanout)
        for index in range(4):
            stream.publish(_frame(index))
        stream.publish(_frame(4, done=True))
        assert [frame_id for frame_id, _ in await _collect(stream, 3)] == [4, 5]
        assert await _collect(stream, 5) == []

    async def test_many_followers_see_the_same_frames(self, fanout: StreamFanout) -> None:
        """Followers that joined before, during and after publishing agree."""
        stream = await _started(fanout)
        results: list[list[tuple[int, JSONObject]]] = []

        async def follow() -> None:
            results.append(await _collect(stream, 0))

        async with anyio.create_task_group() as group:
            for _ in range(4):
                group.start_soon(follow)
            await anyio.sleep(0.01)
            for index in range(3):
                stream.publish(_frame(index))
                await anyio.sleep(0.005)
            group.start_soon(follow)
            await anyio.sleep(0.01)
            stream.publish(_frame(3, done=True))
        results.append(await _collect(stream, 0))
        assert len(results) == 6
        assert all(result == results[0] for result in results)
        assert [frame_id for frame_id, _ in results[0]] == [1, 2, 3, 4]

    async def test_done_ends_the_follow(self, fanout: StreamFanout) -> None:
        """A follower stops at a done frame; the next segment goes on with the next ids."""
        stream = await _started(fanout)
        stream.publish(_frame(0))
        stream.publish(_frame(1, done=True))
        assert not stream.active
        assert [frame_id for frame_id, _ in await _collect(stream, 0)] == [1, 2]
        after = stream.begin()  # the run resumes: a second segment
        fanout.put(stream)
        assert after == 2
        stream.publish(_frame(2, done=True))
        assert [frame_id for frame_id, _ in await _collect(stream, after)] == [3]
        assert stream.latest_segment_start() == 2

    async def test_a_contexts_latest_run(self, fanout: StreamFanout) -> None:
        """`latest` gives the run started last on the context, none for another."""
        first = await _started(fanout, "run-1")
        first.publish(_frame(0, done=True))
        latest = await fanout.latest(KEY)
        assert latest is not None and latest.run_id == "run-1"
        await _started(fanout, "run-2")
        latest = await fanout.latest(KEY)
        assert latest is not None and latest.run_id == "run-2" and latest.active
        assert await fanout.latest(OTHER) is None
        fanout.drop(KEY)
        assert await fanout.latest(KEY) is None

    async def test_a_resumed_run_wakes_who_waits_for_it(self, fanout: StreamFanout) -> None:
        """`next_segment` returns as soon as the run's next segment starts; else times out."""
        stream = await _started(fanout)
        stream.publish(_frame(0, done=True))
        assert not await fanout.next_segment(KEY, "run-1", 0.05)
        woke: list[bool] = []

        async def wait() -> None:
            woke.append(await fanout.next_segment(KEY, "run-1", 5))

        async with anyio.create_task_group() as group:
            group.start_soon(wait)
            await anyio.sleep(0.02)
            resumed = await fanout.run(KEY, "run-1", resumed=True)
            resumed.begin()
            fanout.put(resumed)
        assert woke == [True]


def _run(run_id: str) -> Callable[[], str]:
    return lambda: run_id


def _scope(key: str = "key-1") -> IdempotencyScope:
    return IdempotencyScope(principal=None, definition="chat", context_id=None, key=key)


@pytest.mark.anyio
class IdempotencyConformance:
    """`IdempotencyStore`: one claim per key, also under concurrency."""

    @pytest.fixture
    def store(self) -> IdempotencyStore[str]:
        """A fresh backend holding run ids; a subclass must provide it."""
        raise NotImplementedError("an IdempotencyStore conformance test class provides `store`")

    async def test_one_claim_per_key_under_concurrency(self, store: IdempotencyStore[str]) -> None:
        """Of many simultaneous claims of one key exactly one wins; all see its run."""
        results: list[tuple[str, bool]] = []

        async def claim(index: int) -> None:
            results.append(await store.claim(_scope(), "same", _run(f"run-{index}"), context=KEY))

        async with anyio.create_task_group() as group:
            for index in range(20):
                group.start_soon(claim, index)
        winners = [run for run, won in results if won]
        assert len(winners) == 1
        assert {run for run, _ in results} == set(winners)

    async def test_a_different_request_reusing_the_key_is_refused(
        self, store: IdempotencyStore[str]
    ) -> None:
        """The same key with another request body is an error, not the earlier run."""
        assert await store.claim(_scope(), "body-a", _run("run-1"), context=KEY) == ("run-1", True)
        with pytest.raises(IdempotencyKeyReusedError):
            await store.claim(_scope(), "body-b", _run("run-2"), context=KEY)
        assert await store.claim(_scope(), "body-a", _run("run-3"), context=KEY) == ("run-1", False)

    async def test_keys_are_independent(self, store: IdempotencyStore[str]) -> None:
        """Another key (or another caller's same key) claims for itself."""
        assert (await store.claim(_scope("a"), "x", _run("run-1"), context=KEY))[1]
        assert (await store.claim(_scope("b"), "x", _run("run-2"), context=KEY))[1]
        theirs = IdempotencyScope(principal="bob", definition="chat", context_id=None, key="a")
        assert await store.claim(theirs, "x", _run("run-3"), context=KEY) == ("run-3", True)

    async def test_a_released_claim_can_be_made_anew(self, store: IdempotencyStore[str]) -> None:
        """A run that never started gives its key back; only its own release counts."""
        assert (await store.claim(_scope(), "x", _run("run-1"), context=KEY))[1]
        await store.release(_scope(), "run-other")
        assert await store.claim(_scope(), "x", _run("run-2"), context=KEY) == ("run-1", False)
        await store.release(_scope(), "run-1")
        assert await store.claim(_scope(), "x", _run("run-2"), context=KEY) == ("run-2", True)

    async def test_a_deleted_context_forgets_its_claims(self, store: IdempotencyStore[str]) -> None:
        """Claims of a deleted context go; another context's stay."""
        assert (await store.claim(_scope("a"), "x", _run("run-1"), context=KEY))[1]
        assert (await store.claim(_scope("b"), "x", _run("run-2"), context=OTHER))[1]
        await store.forget_context(KEY)
        assert await store.claim(_scope("a"), "x", _run("run-3"), context=KEY) == ("run-3", True)
        assert await store.claim(_scope("b"), "x", _run("run-4"), context=OTHER) == ("run-2", False)
