"""The coordination conformance suites, run against the in-process implementations."""

from __future__ import annotations

import pytest

from agentkeel.runtime.channels import RetainedStreams
from agentkeel.runtime.coordination import IdempotencyStore, StreamFanout
from agentkeel.runtime.idempotency import IdempotencyClaims
from agentkeel.runtime.lease import InProcessRunLease
from agentkeel.storage import InMemoryStorage
from agentkeel.testing.coordination import (
    IdempotencyConformance,
    LeaseHandles,
    RunLeaseConformance,
    StreamFanoutConformance,
)


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
