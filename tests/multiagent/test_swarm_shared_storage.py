"""Two Swarms on one context over one storage, standing in for two replicas (guarantee 9).

Each is a cached Swarm of its own process; turns alternate between them. Before each
turn a Swarm checks its members' stored versions (version reads, not history loads) and
reloads its record and members when the other replica moved the conversation on, so
neither a member's history nor the shared state forks, and the next prompt goes to the
member the other replica handed the conversation to.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentkeel import (
    Agent,
    ScriptedModel,
    ScriptedToolCall,
    ScriptedTurn,
    SharedState,
    tool,
)
from agentkeel.keys import SessionKey
from agentkeel.messages import JSONObject
from agentkeel.multiagent import HANDOFF_TOOL, Swarm, SwarmSession
from agentkeel.storage import InMemoryStorage, LocalFileStorage, SessionStorage

pytestmark = pytest.mark.anyio

PROMPTS = ("hello", "refund please", "thanks", "bye")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@tool
def count_turn(shared: SharedState) -> str:
    """Count one more turn in the team's shared state."""
    shared.set("turns", int(str(shared.get("turns", 0))) + 1)
    return "counted"


def call(name: str, arguments: JSONObject | None = None) -> ScriptedTurn:
    return ScriptedTurn(tool_calls=[ScriptedToolCall(name, arguments or {})])


def replica(
    storage: SessionStorage,
    triage: list[ScriptedTurn | str],
    helper: list[ScriptedTurn | str],
) -> Swarm:
    members = [
        Agent(ScriptedModel(triage), name="triage", tools=[count_turn]),
        Agent(ScriptedModel(helper), name="helper", tools=[count_turn]),
    ]
    return Swarm(members, session=SwarmSession("support", "ctx-shared", storage))


def model_of(agent: Agent) -> ScriptedModel:
    model = agent.model
    assert isinstance(model, ScriptedModel)
    return model


@pytest.mark.parametrize("backend", ["memory", "file"])
async def test_turns_alternating_between_two_swarms_never_fork(
    backend: str, tmp_path: Path
) -> None:
    storage: SessionStorage = (
        InMemoryStorage() if backend == "memory" else LocalFileStorage(tmp_path)
    )
    first = replica(
        storage,
        triage=[call("count_turn"), call(HANDOFF_TOOL, {"name": "helper", "message": "refund"})],
        helper=["helper answer 1", call("count_turn"), "helper answer 3"],
    )
    second = replica(
        storage,
        triage=[call("count_turn"), "triage answer 0"],
        helper=[call("count_turn"), "helper answer 2"],
    )
    results = [
        await second.invoke_async(PROMPTS[0]),
        await first.invoke_async(PROMPTS[1]),  # hands the conversation to helper
        await second.invoke_async(PROMPTS[2]),  # must go to helper, not its stale triage
        await first.invoke_async(PROMPTS[3]),
    ]
    assert [(r.status, r.agent, r.text) for r in results] == [
        ("completed", "triage", "triage answer 0"),
        ("completed", "helper", "helper answer 1"),
        ("completed", "helper", "helper answer 2"),
        ("completed", "helper", "helper answer 3"),
    ]
    await second.restore()  # the check each turn starts with: it catches up on turn 3
    # the shared state counted every turn: neither replica overwrote it with a stale copy
    assert first.shared_state.to_dict() == second.shared_state.to_dict() == {"turns": 4}
    record = await SwarmSession("support", "ctx-shared", storage).load()
    assert record is not None and record.shared == {"turns": 4} and record.active == "helper"
    for name in ("triage", "helper"):
        snapshot = await storage.load(SessionKey.parse(f"support--{name}:ctx-shared"))
        assert snapshot is not None
        stored = [m.text for m in snapshot.messages]
        # both replicas' members hold exactly the stored history, nothing forked off
        assert [m.text for m in first.members[name].messages] == stored
        assert [m.text for m in second.members[name].messages] == stored
    triage = await storage.load(SessionKey.parse("support--triage:ctx-shared"))
    assert triage is not None
    assert [m.text for m in triage.messages if m.role == "user" and m.text in PROMPTS] == [
        "hello",
        "refund please",
    ]
    # the second replica's helper was sent the first replica's helper turn
    sent = [m.text for m in model_of(second.members["helper"]).requests[0].messages]
    assert "helper answer 1" in sent and sent[-1] == "thanks"


async def test_a_turn_refused_by_storage_leaves_the_other_replicas_record() -> None:
    storage = InMemoryStorage()
    other = replica(storage, triage=[call("count_turn"), "answered elsewhere"], helper=[])

    @tool
    async def meanwhile() -> str:
        """Let the other replica run a turn on this conversation."""
        await other.invoke_async("elsewhere")
        return "done"

    stale = Swarm(
        [
            Agent(ScriptedModel([call("meanwhile"), "lost"]), name="triage", tools=[meanwhile]),
            Agent(ScriptedModel([]), name="helper"),
        ],
        session=SwarmSession("support", "ctx-shared", storage),
    )
    await stale.restore()
    result = await stale.invoke_async("collide")
    assert result.status == "failed"
    assert result.error is not None and result.error.code == "concurrent_write"
    record = await SwarmSession("support", "ctx-shared", storage).load()
    assert record is not None and record.shared == {"turns": 1}  # not overwritten by the stale
    snapshot = await storage.load(SessionKey.parse("support--triage:ctx-shared"))
    assert snapshot is not None and "collide" not in [m.text for m in snapshot.messages]
    await stale.restore()
    assert stale.shared_state.to_dict() == {"turns": 1}
