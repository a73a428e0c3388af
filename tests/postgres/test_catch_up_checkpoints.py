"""A catching-up Agent on PostgreSQL learns from its catch-up read whether a run waits.

Two Agents on one context over one PostgresStorage, with the PostgresCheckpointer of
that schema, stand in for two replicas. The checkpointer below counts its `latest`
reads (a real PostgresCheckpointer, its calls counted, not a mock): a turn that catches
up on a context with no suspended run never asks for a checkpoint, and one whose
context holds a suspended run still finds it, and resumes it.
"""

from __future__ import annotations

import pytest

from agentkeel import Agent, Approve, ScriptedModel, ScriptedToolCall, ScriptedTurn, tool
from agentkeel.checkpoint.base import Checkpoint
from agentkeel.checkpoint.postgres import PostgresCheckpointer
from agentkeel.keys import SessionKey
from agentkeel.session import SessionManager
from agentkeel.storage.postgres import PostgresStorage

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]

removed: list[str] = []


@tool(requires_approval=True)
def remove(path: str) -> str:
    """Remove a file (needs approval)."""
    removed.append(path)
    return f"removed {path}"


class CountingCheckpointer(PostgresCheckpointer):
    """PostgresCheckpointer counting the checkpoint lookups of a restore."""

    latests = 0

    async def latest(self, key: SessionKey) -> Checkpoint | None:
        self.latests += 1
        return await super().latest(key)


def replica(
    storage: PostgresStorage, checkpointer: PostgresCheckpointer, *turns: str | ScriptedTurn
) -> Agent:
    manager = SessionManager("chat:ctx-cp", storage, checkpointer=checkpointer)
    return Agent(ScriptedModel(list(turns)), tools=[remove], session_manager=manager)


async def test_catching_up_without_a_suspended_run_asks_for_no_checkpoint(
    pg_storage: PostgresStorage,
) -> None:
    storage = pg_storage
    checkpointer = CountingCheckpointer(storage.sharing())
    first = replica(storage, checkpointer, "first 0", "first 1")
    second = replica(storage, checkpointer, "second 0", "second 1")
    await first.invoke_async("one")
    await second.invoke_async("two")  # second loads the whole history, once
    checkpointer.latests = 0
    await first.invoke_async("three")  # behind by second's turn: catches up
    await second.invoke_async("four")  # behind by first's turn: catches up
    assert checkpointer.latests == 0
    expected = ["one", "first 0", "two", "second 0", "three", "first 1", "four", "second 1"]
    assert [m.text for m in second.messages] == expected


async def test_a_run_suspended_elsewhere_is_found_by_the_catch_up_and_resumes(
    pg_storage: PostgresStorage,
) -> None:
    storage = pg_storage
    removed.clear()
    checkpointer = CountingCheckpointer(storage.sharing())
    asks = ScriptedTurn(tool_calls=[ScriptedToolCall("remove", {"path": "a.txt"})])
    first = replica(storage, checkpointer, "first 0", "Removed.")
    second = replica(storage, checkpointer, "second 0", asks)
    await first.invoke_async("one")
    await second.invoke_async("two")  # first is behind by this turn from now on
    suspended = await second.invoke_async("remove a.txt")
    assert suspended.status == "suspended" and suspended.interrupt is not None
    checkpointer.latests = 0
    resumed = await first.resume_async(suspended.interrupt.id, Approve())  # catches up first
    assert checkpointer.latests == 1  # the catch-up said a checkpoint is there
    assert resumed.status == "completed" and resumed.text == "Removed."
    assert removed == ["a.txt"]
    assert [m.text for m in first.messages][:4] == ["one", "first 0", "two", "second 0"]
