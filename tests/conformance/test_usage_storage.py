"""UsageStorage conformance: token totals per context and per principal and day."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest

from agentkeel.messages import Message
from agentkeel.result import Usage
from agentkeel.storage import SessionKey, SessionStorage
from agentkeel.storage.usage import UsageStorage

pytestmark = pytest.mark.anyio

StorageFactory = Callable[[], SessionStorage]
DAY = "2026-12-01"
ALICE_1 = SessionKey(definition="chat", context_id="ctx-1", principal="alice")
ALICE_2 = SessionKey(definition="other", context_id="ctx-2", principal="alice")
BOB = SessionKey(definition="chat", context_id="ctx-1", principal="bob")
NOBODY = SessionKey(definition="chat", context_id="ctx-1")


def usage_storage(factory: StorageFactory) -> UsageStorage:
    storage = factory()
    assert isinstance(storage, UsageStorage)
    return storage


async def test_totals_start_at_zero(reopen_storage: StorageFactory) -> None:
    storage = usage_storage(reopen_storage)
    assert await storage.context_usage(ALICE_1) == Usage()
    assert await storage.principal_usage("alice", DAY) == Usage()


async def test_calls_add_up_per_context_and_per_principal_day(
    reopen_storage: StorageFactory,
) -> None:
    storage = usage_storage(reopen_storage)
    call = Usage(input_tokens=100, output_tokens=20, cached_tokens=60, reasoning_tokens=5)
    await storage.add_usage(ALICE_1, call, day=DAY)
    await storage.add_usage(ALICE_1, call, day=DAY)
    await storage.add_usage(ALICE_2, Usage(input_tokens=1, output_tokens=1), day=DAY)
    await storage.add_usage(ALICE_2, Usage(input_tokens=7), day="2026-12-02")
    await storage.add_usage(BOB, Usage(output_tokens=3), day=DAY)
    await storage.add_usage(NOBODY, Usage(output_tokens=4), day=DAY)
    reopened = usage_storage(reopen_storage)  # a file backend reads its files again
    assert await reopened.context_usage(ALICE_1) == call + call
    assert await reopened.context_usage(ALICE_2) == Usage(input_tokens=8, output_tokens=1)
    assert await reopened.principal_usage("alice", DAY) == Usage(
        input_tokens=201, output_tokens=41, cached_tokens=120, reasoning_tokens=10
    )
    assert await reopened.principal_usage("alice", "2026-12-02") == Usage(input_tokens=7)
    assert await reopened.context_usage(BOB) == Usage(output_tokens=3)  # same id, own total
    assert await reopened.principal_usage("bob", DAY) == Usage(output_tokens=3)
    assert await reopened.principal_usage(None, DAY) == Usage(output_tokens=4)
    assert await reopened.context_usage(NOBODY) == Usage(output_tokens=4)


async def test_usage_does_not_create_a_session(reopen_storage: StorageFactory) -> None:
    storage = usage_storage(reopen_storage)
    await storage.add_usage(ALICE_1, Usage(input_tokens=5), day=DAY)
    session_storage = reopen_storage()
    assert await session_storage.load(ALICE_1) is None


async def test_deleting_a_context_forgets_its_total_but_not_the_principal_day(
    reopen_storage: StorageFactory,
) -> None:
    storage = usage_storage(reopen_storage)
    sessions = reopen_storage()
    await sessions.append(ALICE_1, [Message.user("hi")], None)
    await storage.add_usage(ALICE_1, Usage(input_tokens=50), day=DAY)
    assert await sessions.delete(ALICE_1)
    assert await storage.context_usage(ALICE_1) == Usage()
    assert await storage.principal_usage("alice", DAY) == Usage(input_tokens=50)


async def test_concurrent_additions_are_all_counted(reopen_storage: StorageFactory) -> None:
    storage = usage_storage(reopen_storage)

    async def add() -> None:
        await storage.add_usage(ALICE_1, Usage(input_tokens=1, output_tokens=2), day=DAY)

    async with anyio.create_task_group() as group:
        for _ in range(40):
            group.start_soon(add)
    assert await storage.context_usage(ALICE_1) == Usage(input_tokens=40, output_tokens=80)
    assert await storage.principal_usage("alice", DAY) == Usage(input_tokens=40, output_tokens=80)
