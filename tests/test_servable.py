"""Agent and Swarm behind one Servable surface: the run id a caller chose, the start signal."""

from __future__ import annotations

import pytest

from agentkeel import (
    Agent,
    InMemoryStorage,
    ScriptedModel,
    ScriptedToolCall,
    ScriptedTurn,
    Servable,
    SessionHome,
    Swarm,
    tool,
)
from agentkeel.checkpoint.memory import InMemoryCheckpointer
from agentkeel.events import RunEvent, StatusEvent
from agentkeel.interrupts import Approve
from agentkeel.keys import SessionKey
from agentkeel.result import RunResultFront

pytestmark = pytest.mark.anyio


@tool
def refund(order_id: str) -> str:
    """Refund an order."""
    return f"refunded {order_id}"


def _agent(name: str = "agent", *turns: ScriptedTurn | str) -> Agent:
    return Agent(
        ScriptedModel(list(turns) or ["done"]), name=name, tools=[refund], approve=["refund"]
    )


def _swarm() -> Swarm:
    return Swarm([_agent("first"), _agent("second")], name="team")


def test_an_agent_and_a_swarm_are_servable_and_reach_their_agents() -> None:
    agent, swarm = _agent(), _swarm()
    assert isinstance(agent, Servable) and isinstance(swarm, Servable)
    assert agent.agents == (agent,)
    assert [member.name for member in swarm.agents] == ["first", "second"]


async def test_a_run_takes_the_id_its_caller_chose_and_is_told_when_it_starts() -> None:
    for served in (_agent(), _swarm()):
        seen: list[str] = []

        def on_event(event: RunEvent, seen: list[str] = seen) -> None:
            seen.append("status" if isinstance(event, StatusEvent) else "event")

        def on_start(seen: list[str] = seen) -> None:
            seen.append("start")

        result: RunResultFront = await served.invoke_async(
            "hello", run_id="run-chosen", on_event=on_event, on_start=on_start
        )
        assert result.run_id == "run-chosen"
        assert result.status == "completed"
        assert seen[0] == "start" and seen.count("start") == 1, served
        assert "status" in seen


async def test_a_resumed_run_keeps_the_suspended_run_id() -> None:
    agent = _agent(
        "agent",
        ScriptedTurn(tool_calls=[ScriptedToolCall("refund", {"order_id": "A-1"})]),
        "refunded",
    )
    assert agent.suspended_run_id is None
    suspended = await agent.invoke_async("refund A-1", run_id="run-kept")
    assert suspended.status == "suspended"
    assert agent.suspended_run_id == "run-kept"
    interrupt = suspended.interrupt
    assert interrupt is not None
    resumed = await agent.resume_async(interrupt.id, Approve())
    assert resumed.run_id == "run-kept" and resumed.status == "completed"
    assert agent.suspended_run_id is None


async def test_attach_session_gives_an_agent_and_a_swarm_their_stored_memory() -> None:
    storage, checkpointer = InMemoryStorage(), InMemoryCheckpointer()
    agent, swarm = _agent(), _swarm()
    agent_key = SessionKey(definition="chat", context_id="ctx-1", principal="alice")
    swarm_key = SessionKey(definition="team", context_id="ctx-1", principal="alice")
    agent.attach_session(SessionHome(agent_key, storage, checkpointer))
    swarm.attach_session(SessionHome(swarm_key, storage, checkpointer))
    assert agent.context_id == swarm.context_id == "ctx-1"
    await agent.invoke_async("remember me")
    await swarm.invoke_async("remember us")
    stored = await storage.load(agent_key)
    assert stored is not None and [m.text for m in stored.messages][0] == "remember me"
    assert swarm.session is not None
    member = await storage.load(swarm.session.member_key("first"))
    assert member is not None and [m.text for m in member.messages][0] == "remember us"
