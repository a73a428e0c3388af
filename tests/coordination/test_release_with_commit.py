"""A turn's commit releases its PostgreSQL lease, and a context's pointer never goes back.

The lease row lives in the storage's database, so the statement that stores a turn
also frees it (`RidingRelease`): one round trip fewer per turn. These tests use a real
PostgresStorage and PostgresRunLease on one schema (the lease counted, not mocked):

- a commit that carries the release frees the row, and wakes a waiter;
- so does the commit of an edit's cut, and a run saved without history (a suspension);
- a commit the checks refuse frees nothing;
- a storage on another schema gets no riding release;
- a turn served by a `ServerRuntime` makes no release call of its own, and its context
  is free once it ended.

Because the next turn may now start on another replica before this one's done frame
reached the fan-out, a pointer write from a run of a lower lease fence never replaces
a higher one's, on Redis and on PostgreSQL.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import anyio
import pytest

from agentkeel import Agent, ScriptedModel
from agentkeel.errors import ConcurrentWriteError, RunInProgressError
from agentkeel.framework import AgentDefinition, Framework
from agentkeel.messages import Message
from agentkeel.runtime.coordination import Coordination, LeaseGrant, in_process_coordination
from agentkeel.runtime.pg_fanout import PgStreams
from agentkeel.runtime.pg_lease import PostgresRunLease
from agentkeel.runtime.redis_fanout import RedisStreams
from agentkeel.runtime.runs import RunJob, ServerRuntime
from agentkeel.runtime.shared_streams import SharedStreams
from agentkeel.runtime.wire import parse_send_request
from agentkeel.storage import InMemoryStorage, RunRecord, SessionKey
from agentkeel.storage.bundled import CommitExtras
from agentkeel.storage.postgres import PostgresStorage
from agentkeel.storage.postgres_pool import PostgresPool

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]

KEY = SessionKey(definition="chat", context_id="ctx-ride")


class CountingLease(PostgresRunLease):
    """PostgresRunLease counting the releases asked of it."""

    releases = 0

    async def release(self, grant: LeaseGrant) -> bool:
        self.releases += 1
        return await super().release(grant)


@pytest.fixture
async def storage(pg_database: str, pg_schema: str) -> AsyncIterator[PostgresStorage]:
    store = PostgresStorage(pg_database, schema=pg_schema, pool_size=2)
    await store.open()
    yield store
    await store.close()


@pytest.fixture
async def lease(pg_database: str, pg_schema: str) -> AsyncIterator[CountingLease]:
    held = CountingLease(PostgresPool(pg_database, schema=pg_schema, pool_size=2))
    async with held.running():
        yield held


async def _commit(storage: PostgresStorage, lease: PostgresRunLease, grant: LeaseGrant) -> int:
    release = lease.riding_release(grant, storage)
    assert release is not None
    return await storage.append_bundled(
        KEY,
        [Message.user("hi"), Message.assistant("hello")],
        None,
        extras=CommitExtras(release=release),
        fence=grant.fence,
    )


async def test_a_commit_that_carries_the_release_frees_the_context(
    storage: PostgresStorage, lease: CountingLease
) -> None:
    grant = await lease.acquire(KEY, ttl=30)
    with pytest.raises(RunInProgressError):
        await lease.acquire(KEY, wait=False, ttl=30)
    await _commit(storage, lease, grant)
    lease.forget(grant)
    again = await lease.acquire(KEY, wait=False, ttl=30)  # free now, with no release call
    assert again.fence == grant.fence + 1 and not again.taken_over
    assert lease.releases == 0
    snapshot = await storage.load(KEY)
    assert snapshot is not None and [m.text for m in snapshot.messages] == ["hi", "hello"]


async def test_a_waiter_gets_the_context_when_the_commit_frees_it(
    storage: PostgresStorage, lease: CountingLease, pg_database: str, pg_schema: str
) -> None:
    grant = await lease.acquire(KEY, ttl=30)
    other = PostgresRunLease(PostgresPool(pg_database, schema=pg_schema, pool_size=2))
    got: list[LeaseGrant] = []
    async with other.running(), anyio.create_task_group() as group:

        async def wait() -> None:
            got.append(await other.acquire(KEY, ttl=30))

        group.start_soon(wait)
        await anyio.sleep(0.3)  # in the line by now
        assert not got
        await _commit(storage, lease, grant)
        with anyio.fail_after(5):
            while not got:
                await anyio.sleep(0.01)
        await other.release(got[0])
    assert got[0].fence == grant.fence + 1


async def test_an_edit_and_a_run_without_history_free_the_context_too(
    storage: PostgresStorage, lease: CountingLease
) -> None:
    """The cut's transaction and the run-only statement carry the release as well."""
    grant = await lease.acquire(KEY, ttl=30)
    await _commit(storage, lease, grant)
    lease.forget(grant)
    edit = await lease.acquire(KEY, wait=False, ttl=30)
    await storage.append_bundled(
        KEY,
        [Message.user("hi again"), Message.assistant("hello again")],
        None,
        extras=CommitExtras(release=lease.riding_release(edit, storage)),
        fence=edit.fence,
        cut=0,  # an edit of the first message: the whole history is replaced
    )
    lease.forget(edit)
    suspended = await lease.acquire(KEY, wait=False, ttl=30)
    record = RunRecord(run_id="run-wait", status="suspended", input="q", started_at=1.0)
    await storage.put_run_bundled(
        KEY, record, extras=CommitExtras(release=lease.riding_release(suspended, storage))
    )
    lease.forget(suspended)
    after = await lease.acquire(KEY, wait=False, ttl=30)  # free again, no release call made
    assert after.fence == suspended.fence + 1 == edit.fence + 2
    assert lease.releases == 0
    snapshot = await storage.load(KEY)
    assert snapshot is not None
    assert [m.text for m in snapshot.messages] == ["hi again", "hello again"]
    assert await storage.get_run(KEY, "run-wait") is not None


async def test_a_refused_commit_frees_nothing(
    storage: PostgresStorage, lease: CountingLease
) -> None:
    grant = await lease.acquire(KEY, ttl=30)
    await _commit(storage, lease, grant)  # version 1
    lease.forget(grant)
    second = await lease.acquire(KEY, ttl=30)
    release = lease.riding_release(second, storage)
    with pytest.raises(ConcurrentWriteError):
        await storage.append_bundled(
            KEY,
            [Message.user("late")],
            None,
            extras=CommitExtras(release=release),
            expected_version=0,  # behind the stored version: refused
            fence=second.fence,
        )
    with pytest.raises(RunInProgressError):  # still held: the refused commit freed nothing
        await lease.acquire(KEY, wait=False, ttl=30)
    assert await lease.release(second)


async def test_a_storage_on_another_schema_gets_no_riding_release(
    lease: CountingLease, pg_database: str
) -> None:
    grant = await lease.acquire(KEY, ttl=30)
    elsewhere = PostgresStorage(pg_database, schema="agentkeel_elsewhere")
    assert lease.riding_release(grant, elsewhere) is None
    assert lease.riding_release(grant, InMemoryStorage()) is None
    assert await lease.release(grant)


async def test_a_served_turn_is_released_by_its_commit(
    storage: PostgresStorage, lease: CountingLease
) -> None:
    def build(context_id: str) -> Agent:
        del context_id
        return Agent(ScriptedModel(["answered"], repeat=True), name="chat")

    framework = Framework(
        definitions={"chat": AgentDefinition(name="chat", factory=build)}, storage=storage
    )
    base: Coordination[RunJob] = in_process_coordination(storage, retention=None)
    shared: Coordination[RunJob] = Coordination(
        lease=lease, fanout=base.fanout, idempotency=base.idempotency, lease_ttl=30, fenced=True
    )
    runtime = ServerRuntime(framework, shared)
    with anyio.fail_after(20):
        async with runtime.running():
            for text in ("one", "two", "three"):
                request = parse_send_request({"message": text, "contextId": KEY.context_id})
                job = await runtime.submit(KEY, request)
                await job.finished.wait()
                assert job.result is not None and job.result["status"] == "completed"
                assert job.released
    assert lease.releases == 0  # every turn's commit released its lease
    free = await lease.acquire(KEY, wait=False, ttl=30)
    assert free.fence == 4  # three turns, three grants, then this one
    snapshot = await storage.load(KEY)
    assert snapshot is not None and len(snapshot.messages) == 6


async def _pointer_run(fanout: SharedStreams) -> str:
    raw = await fanout.read_pointer(KEY)
    assert raw is not None
    return str(json.loads(raw)["run"])


async def _check_the_pointer_keeps_the_highest_fence(fanout: SharedStreams) -> None:
    later = await fanout.run(KEY, "run-later", resumed=False)
    later.order = 3
    later.begin()
    fanout.put(later)  # the next turn started on this context first
    earlier = await fanout.run(KEY, "run-earlier", resumed=False)
    earlier.order = 2
    earlier.begin()
    earlier.append(earlier.next_frame({"done": True}))  # then the turn before ends
    await fanout.flush()
    assert await _pointer_run(fanout) == "run-later"
    newest = await fanout.run(KEY, "run-newest", resumed=False)
    newest.order = 4
    newest.begin()
    fanout.put(newest)
    await fanout.flush()
    assert await _pointer_run(fanout) == "run-newest"


async def test_a_redis_pointer_never_goes_back_to_a_lower_fence(
    redis_db_url: str, redis_prefix: str
) -> None:
    fanout = RedisStreams(redis_db_url, InMemoryStorage(), 3600.0, prefix=redis_prefix)
    async with fanout.running():
        await _check_the_pointer_keeps_the_highest_fence(fanout)


async def test_a_postgres_pointer_never_goes_back_to_a_lower_fence(
    pg_database: str, pg_schema: str
) -> None:
    pool = PostgresPool(pg_database, schema=pg_schema, pool_size=2)
    fanout = PgStreams(pool, InMemoryStorage(), 3600.0)
    async with fanout.running():
        await _check_the_pointer_keeps_the_highest_fence(fanout)
