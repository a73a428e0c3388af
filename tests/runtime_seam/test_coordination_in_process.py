"""The coordination conformance suites, run against the in-process implementations."""

from __future__ import annotations

import anyio
import pytest

from agentkeel.runtime.channels import RetainedStreams
from agentkeel.runtime.coordination import IdempotencyStore, StreamFanout
from agentkeel.runtime.idempotency import IdempotencyClaims
from agentkeel.runtime.lease import InProcessRunLease
from agentkeel.runtime.quotas import InProcessLimitCounters
from agentkeel.storage import InMemoryStorage
from agentkeel.testing.coordination import (
    IdempotencyConformance,
    LeaseHandles,
    RunLeaseConformance,
    StreamFanoutConformance,
)
from agentkeel.testing.limits import CounterHandles, LimitCountersConformance


class TestInProcessRunLease(RunLeaseConformance):
    @pytest.fixture
    def leases(self) -> LeaseHandles:
        lease = InProcessRunLease()
        return lease, lease  # two replicas in one process share the one object


class TestRetainedStreams(StreamFanoutConformance):
    @pytest.fixture
    def fanout(self) -> StreamFanout:
        return RetainedStreams(InMemoryStorage(), retention=None)


class TestIdempotencyClaims(IdempotencyConformance):
    @pytest.fixture
    def store(self) -> IdempotencyStore[str]:
        return IdempotencyClaims(ttl=60.0)


class TestInProcessLimitCounters(LimitCountersConformance):
    @pytest.fixture
    def counters(self) -> CounterHandles:
        counters = InProcessLimitCounters()
        return counters, counters


def test_in_process_sweep_forgets_empty_windows() -> None:
    now = [0.0]
    counters = InProcessLimitCounters(clock=lambda: now[0])
    anyio.run(counters.hit, "a", 1, 10.0)
    anyio.run(counters.hit, "b", 1, 100.0)
    now[0] = 50.0
    assert counters.sweep() == 1, "only the window that emptied goes"
    assert anyio.run(counters.hit, "b", 1, 100.0) > 0.0
