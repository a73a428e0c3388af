"""Two Agents on one context over one storage, standing in for two replicas (guarantee 9).

Each is a cached Agent of its own process; turns alternate between them. Before each
turn an Agent checks the stored version (a version read, not a history load) and
reloads when the other moved the conversation on, so the history never forks.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentkeel import Agent, ConcurrentWriteError, ScriptedModel, SessionManager
from agentkeel.keys import SessionKey
from agentkeel.messages import Message
from agentkeel.storage import (
    InMemoryStorage,
    LocalFileStorage,
    RunRecord,
    SessionSnapshot,
    SessionStorage,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class CountingStorage(InMemoryStorage):
    """The reference storage, counting full loads (a real implementation, not a mock)."""

    def __init__(self) -> None:
        super().__init__()
        self.loads = 0

    async def load(self, key: SessionKey) -> SessionSnapshot | None:
        self.loads += 1
        return await super().load(key)


def replica(storage: SessionStorage, name: str, turns: int) -> Agent:
    model = ScriptedModel([f"{name} answer {n}" for n in range(turns)])
    return Agent(model, session_manager=SessionManager("chat:ctx-shared", storage))


@pytest.mark.parametrize("backend", ["memory", "file"])
async def test_turns_alternating_between_two_agents_never_fork(
    backend: str, tmp_path: Path
) -> None:
    storage: SessionStorage = (
        InMemoryStorage() if backend == "memory" else LocalFileStorage(tmp_path)
    )
    first, second = replica(storage, "first", 3), replica(storage, "second", 3)
    for index in range(3):
        await first.invoke_async(f"to first {index}")
        await second.invoke_async(f"to second {index}")
    expected = [
        text
        for index in range(3)
        for text in (
            f"to first {index}",
            f"first answer {index}",
            f"to second {index}",
            f"second answer {index}",
        )
    ]
    assert [message.text for message in second.messages] == expected
    snapshot = await storage.load(SessionKey.parse("chat:ctx-shared"))
    assert snapshot is not None and [m.text for m in snapshot.messages] == expected
    # the second replica's model was sent the first replica's turns
    model = second.model
    assert isinstance(model, ScriptedModel)
    assert [m.text for m in model.requests[-1].messages] == expected[:-1]


async def test_an_agent_nobody_else_writes_loads_its_history_once() -> None:
    storage = CountingStorage()
    agent = replica(storage, "only", 5)
    for index in range(5):
        await agent.invoke_async(f"turn {index}")
    assert storage.loads == 1  # the other four checks were version reads


async def test_a_save_on_a_conversation_moved_on_is_refused() -> None:
    storage = InMemoryStorage()
    stale = SessionManager("chat:ctx-shared", storage)
    await stale.restore()
    other = replica(storage, "other", 1)
    await other.invoke_async("meanwhile")
    with pytest.raises(ConcurrentWriteError):
        await stale.save_finished(
            record=RunRecord(run_id="run-stale", status="completed", input="x", started_at=1.0),
            new_messages=[Message.user("stale")],
            history=[Message.user("stale")],
            state=None,
            rewrite=False,
        )
    snapshot = await storage.load(stale.key)
    assert snapshot is not None and "stale" not in [m.text for m in snapshot.messages]
