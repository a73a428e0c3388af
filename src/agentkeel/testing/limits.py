"""The conformance suite of `LimitCounters`: every backend of ``server.limits`` passes it.

Subclass it in a test module and give it two handles on one fresh backend (two
replicas: what one counts, the other must see)::

    class TestMyCounters(LimitCountersConformance):
        @pytest.fixture
        def counters(self) -> CounterHandles:
            backend = MyCounters(...)
            return backend, MyCounters(...)  # two clients of one server

Windows are short and real (a shared backend keeps its own clock), so the one test
that waits for a window to pass waits a fraction of a second.
"""

from __future__ import annotations

import anyio
import pytest

from agentkeel.runtime.coordination import LimitCounters

__all__ = ["CounterHandles", "LimitCountersConformance"]

CounterHandles = tuple[LimitCounters, LimitCounters]
"""Two handles on the same counters backend (two replicas)."""

_WINDOW = 0.3
"""Seconds: long enough that a loaded machine makes its calls inside it."""
_LONG = 60.0


@pytest.mark.anyio
class LimitCountersConformance:
    """`LimitCounters`: slots held and released, windows counted, across handles, atomically."""

    @pytest.fixture
    def counters(self) -> CounterHandles:
        """Two handles on one fresh backend; a subclass must provide it."""
        raise NotImplementedError("a LimitCounters conformance test class provides `counters`")

    async def test_slots_fill_up_to_the_limit_across_handles(
        self, counters: CounterHandles
    ) -> None:
        one, two = counters
        assert await one.hold("streams:alice", 2)
        assert await two.hold("streams:alice", 2)
        assert not await one.hold("streams:alice", 2)
        assert not await two.hold("streams:alice", 2)
        assert await one.hold("streams:bob", 2), "another name has slots of its own"

    async def test_a_released_slot_can_be_taken_again(self, counters: CounterHandles) -> None:
        one, two = counters
        assert await one.hold("s", 1)
        assert not await two.hold("s", 1)
        await two.release("s")
        assert await two.hold("s", 1)
        assert not await one.hold("s", 1)

    async def test_a_refused_hold_takes_nothing(self, counters: CounterHandles) -> None:
        one, _ = counters
        assert await one.hold("s", 1)
        for _ in range(5):
            assert not await one.hold("s", 1)
        await one.release("s")
        assert await one.hold("s", 1), "the refusals must not have counted"

    async def test_concurrent_holds_never_overshoot(self, counters: CounterHandles) -> None:
        one, two = counters
        granted: list[bool] = []

        async def take(handle: LimitCounters) -> None:
            granted.append(await handle.hold("race", 5))

        async with anyio.create_task_group() as group:
            for index in range(20):
                group.start_soon(take, one if index % 2 else two)
        assert granted.count(True) == 5

    async def test_hits_are_counted_up_to_the_limit(self, counters: CounterHandles) -> None:
        one, two = counters
        assert await one.hit("turns:alice", 3, _LONG) == 0.0
        assert await two.hit("turns:alice", 3, _LONG) == 0.0
        assert await one.hit("turns:alice", 3, _LONG) == 0.0
        wait = await two.hit("turns:alice", 3, _LONG)
        assert 0.0 < wait <= _LONG
        assert await one.hit("turns:bob", 3, _LONG) == 0.0, "another name counts alone"

    async def test_refused_hits_are_not_counted(self, counters: CounterHandles) -> None:
        one, _ = counters
        assert await one.hit("t", 1, _WINDOW) == 0.0
        for _ in range(5):
            assert await one.hit("t", 1, _WINDOW) > 0.0
        await anyio.sleep(_WINDOW * 1.5)
        assert await one.hit("t", 1, _WINDOW) == 0.0, "the window passed; refusals kept nothing"

    async def test_retry_after_says_when_the_window_frees(self, counters: CounterHandles) -> None:
        one, _ = counters
        assert await one.hit("t", 1, _WINDOW) == 0.0
        wait = await one.hit("t", 1, _WINDOW)
        assert 0.0 < wait <= _WINDOW
        await anyio.sleep(wait + 0.05)
        assert await one.hit("t", 1, _WINDOW) == 0.0

    async def test_concurrent_hits_never_overshoot(self, counters: CounterHandles) -> None:
        one, two = counters
        waits: list[float] = []

        async def hit(handle: LimitCounters) -> None:
            waits.append(await handle.hit("race", 4, _LONG))

        async with anyio.create_task_group() as group:
            for index in range(20):
                group.start_soon(hit, one if index % 2 else two)
        assert waits.count(0.0) == 4

    async def test_sweep_keeps_what_is_still_in_its_window(self, counters: CounterHandles) -> None:
        one, two = counters
        assert await one.hit("kept", 1, _LONG) == 0.0
        assert await one.hit("gone", 1, _WINDOW) == 0.0
        await anyio.sleep(_WINDOW * 1.5)
        one.sweep()
        two.sweep()
        assert await two.hit("kept", 1, _LONG) > 0.0, "a sweep must not forget a live window"
        assert await two.hit("gone", 1, _WINDOW) == 0.0
