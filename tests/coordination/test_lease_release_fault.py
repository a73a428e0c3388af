"""A turn whose lease cannot be released is still answered, and its context freed.

The PostgreSQL lease's pool has one connection here, which the test holds while the
turn ends: the release waits for a connection, gives up (PoolTimeout, as on a loaded
machine, or with PostgreSQL gone) and raises. The turn was committed; its request must
be answered, the server must keep serving, and the context comes free when the grant's
ttl runs out, as after a replica's death.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

from agentkeel import Agent, ScriptedModel, ScriptedTurn
from agentkeel.framework import AgentDefinition, Framework
from agentkeel.runtime.coordination import Coordination, in_process_coordination
from agentkeel.runtime.pg_lease import PostgresRunLease
from agentkeel.runtime.runs import RunJob, ServerRuntime
from agentkeel.runtime.wire import parse_send_request
from agentkeel.storage import InMemoryStorage, SessionKey
from agentkeel.storage.postgres_pool import PostgresPool

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]

KEY = SessionKey(definition="chat", context_id="ctx-release")
TTL = 1.5


@pytest.fixture
async def runtime(pg_database: str, pg_schema: str) -> AsyncIterator[ServerRuntime]:
    storage = InMemoryStorage()

    def build(context_id: str) -> Agent:
        del context_id
        turn = ScriptedTurn(text="answered", delay=0.3)  # ends after the test holds the pool
        return Agent(ScriptedModel([turn], repeat=True), name="chat")

    framework = Framework(
        definitions={"chat": AgentDefinition(name="chat", factory=build)}, storage=storage
    )
    base: Coordination[RunJob] = in_process_coordination(
        storage, retention=framework.retention.events
    )
    pool = PostgresPool(pg_database, schema=pg_schema, pool_size=1, connect_timeout=0.5)
    lease = PostgresRunLease(pool)
    shared: Coordination[RunJob] = Coordination(
        lease=lease, fanout=base.fanout, idempotency=base.idempotency, lease_ttl=TTL
    )
    async with lease.running():
        served = ServerRuntime(framework, shared)
        async with served.running():
            yield served


async def test_a_failed_release_still_answers_and_the_lease_expires(
    runtime: ServerRuntime,
) -> None:
    lease = runtime.coordination.lease
    assert isinstance(lease, PostgresRunLease)
    with anyio.fail_after(20):
        request = parse_send_request({"message": "one", "contextId": KEY.context_id})
        job = await runtime.submit(KEY, request)
        async with lease.pool._connection():  # the pool's only connection: no release
            await job.finished.wait()
            ended = anyio.current_time()
        assert job.result is not None and job.result["status"] == "completed"
        again = parse_send_request({"message": "two", "contextId": KEY.context_id})
        second = await runtime.submit(KEY, again)  # waits out the unreleased grant's ttl
        await second.finished.wait()
    assert second.result is not None and second.result["status"] == "completed"
    assert anyio.current_time() - ended > TTL / 2  # it waited for the grant to expire
