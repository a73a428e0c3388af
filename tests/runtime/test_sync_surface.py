"""The blocking surface of Agent and Swarm: one event loop for the object's life.

Also: plain ``for`` over an async stream says what to write instead, and
`pending_interrupts` is never silently empty before a session was loaded.
"""

from __future__ import annotations

import asyncio
import gc
import threading
from pathlib import Path

import pytest

from agentkeel import (
    Agent,
    AgentResult,
    Approve,
    InvalidRequestError,
    LocalFileStorage,
    RestoreRequiredError,
    ScriptedModel,
    ScriptedToolCall,
    ScriptedTurn,
    SessionManager,
    Swarm,
    tool,
)
from agentkeel.checkpoint import InMemoryCheckpointer
from agentkeel.events import TokenEvent, ToolCallEvent
from agentkeel.multiagent import SwarmResult, SwarmSession
from agentkeel.storage import InMemoryStorage

loops: list[asyncio.AbstractEventLoop] = []
threads: list[threading.Thread] = []


@tool
async def where_am_i() -> str:
    """Record the event loop (and its thread) the run uses."""
    loops.append(asyncio.get_running_loop())
    threads.append(threading.current_thread())
    return "here"


@tool
def blocking_work() -> str:
    """A sync tool: it runs in one of the loop's worker threads."""
    threads.append(threading.current_thread())
    return "worked"


@tool(requires_approval=True)
def deploy(target: str) -> str:
    """Needs approval."""
    return f"deployed {target}"


@pytest.fixture(autouse=True)
def _reset() -> None:
    loops.clear()
    threads.clear()


def using(tool_name: str, turns: int) -> ScriptedModel:
    script: list[ScriptedTurn | str] = []
    for index in range(turns):
        script += [ScriptedTurn(tool_calls=[ScriptedToolCall(tool_name, {})]), f"answer {index}"]
    return ScriptedModel(script)


def agent_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "agentkeel-agent"]


def test_two_sync_calls_run_on_one_loop() -> None:
    with Agent(using("where_am_i", 2), tools=[where_am_i]) as agent:
        assert agent("one").text == "answer 0"
        assert agent("two").text == "answer 1"
        assert len(loops) == 2 and loops[0] is loops[1]
        assert threads[0] is threads[1] and threads[0] is not threading.main_thread()
        assert agent_threads() == [threads[0]]
    assert not threads[0].is_alive()  # the context manager stopped the loop


def test_session_attached_sync_calls_reuse_the_loop_and_its_worker(tmp_path: Path) -> None:
    def make() -> Agent:
        session = SessionManager("assistant:ctx-sync", LocalFileStorage(tmp_path))
        return Agent(using("blocking_work", 3), tools=[blocking_work], session_manager=session)

    agent = make()
    results = [agent(f"turn {index}") for index in range(3)]
    assert [result.text for result in results] == ["answer 0", "answer 1", "answer 2"]
    assert len(threads) == 3 and threads[0] is threads[1] is threads[2]  # no thread per call
    agent.close()

    again = make()  # a new Agent over the same files (as after a restart)
    assert again("turn 3").text == "answer 0"
    assert [m.text for m in again.messages if m.role == "assistant" and m.text] == [
        "answer 0",
        "answer 1",
        "answer 2",
        "answer 0",
    ]
    again.close()


def test_close_stops_the_loop_and_refuses_later_blocking_calls() -> None:
    agent = Agent(ScriptedModel(["hi", "still here"]))
    assert agent("hello").text == "hi"
    (thread,) = agent_threads()
    agent.close()
    agent.close()  # idempotent
    assert not thread.is_alive()
    with pytest.raises(InvalidRequestError, match="closed"):
        agent("again")

    async def main() -> AgentResult:
        return await agent.invoke_async("async still works")

    assert asyncio.run(main()).text == "still here"


def test_a_forgotten_agent_stops_its_loop_when_collected() -> None:
    agent = Agent(ScriptedModel(["hi"]))
    agent("hello")
    (thread,) = agent_threads()
    del agent
    gc.collect()
    thread.join(timeout=5)
    assert not thread.is_alive()


def test_plain_for_over_stream_says_what_to_use() -> None:
    agent = Agent(ScriptedModel(["hi"]))
    with pytest.raises(TypeError, match=r"async for item in agent\.stream") as caught:
        for _ in agent.stream("hello"):
            pass
    assert "agent.stream_sync(" in str(caught.value)
    swarm = Swarm([Agent(ScriptedModel(["hi"]), name="solo")])
    with pytest.raises(TypeError, match=r"swarm\.resume_stream_sync\("):
        iter(swarm.resume_stream("int-x", Approve()))


def test_stream_sync_yields_events_then_the_result_and_resumes() -> None:
    deploying = ScriptedTurn(tool_calls=[ScriptedToolCall("deploy", {"target": "prod"})])
    model = ScriptedModel([deploying, "Done."])
    with Agent(model, tools=[deploy]) as agent:
        items = list(agent.stream_sync("deploy prod"))
        suspended = items[-1]
        assert isinstance(suspended, AgentResult) and suspended.interrupt is not None
        assert [item.type for item in items[:-1]][-1] == "interrupt"  # type: ignore[union-attr]
        resumed = list(agent.resume_stream_sync(suspended.interrupt.id, Approve()))
        final = resumed[-1]
        assert isinstance(final, AgentResult) and final.text == "Done."
        assert any(isinstance(item, ToolCallEvent) for item in resumed)
        assert any(isinstance(item, TokenEvent) for item in resumed)


def test_leaving_stream_sync_early_leaves_the_agent_usable() -> None:
    with Agent(ScriptedModel(["a long answer in many chunks", "next"], chunk_size=2)) as agent:
        for item in agent.stream_sync("go"):
            if isinstance(item, TokenEvent):
                break
        assert not agent.busy
        assert agent("again").text == "next"


def test_a_swarm_keeps_one_loop_too() -> None:
    member = Agent(using("where_am_i", 2), tools=[where_am_i], name="solo")
    with Swarm([member]) as swarm:
        assert swarm("one").text == "answer 0"
        items = list(swarm.stream_sync("two"))
        assert isinstance(items[-1], SwarmResult) and items[-1].text == "answer 1"
        assert len(loops) == 2 and loops[0] is loops[1]
    assert not threads[0].is_alive()


def suspended_session(tmp_path: Path) -> tuple[SessionManager, str]:
    storage = LocalFileStorage(tmp_path)
    checkpoints = InMemoryCheckpointer()

    def session() -> SessionManager:
        return SessionManager("ops:ctx-1", storage, checkpointer=checkpoints)

    deploying = ScriptedTurn(tool_calls=[ScriptedToolCall("deploy", {"target": "x"})])
    model = ScriptedModel([deploying])
    with Agent(model, tools=[deploy], session_manager=session()) as first:
        result = first("deploy x")
    assert result.interrupt is not None
    return session(), result.interrupt.id


@pytest.mark.anyio
async def test_pending_interrupts_before_restore_is_an_error_in_async_code(
    tmp_path: Path,
) -> None:
    session, interrupt_id = await asyncio.to_thread(suspended_session, tmp_path)
    agent = Agent(ScriptedModel(["Deployed."]), tools=[deploy], session_manager=session)
    with pytest.raises(RestoreRequiredError, match=r"await agent\.restore\(\)"):
        agent.pending_interrupts  # noqa: B018
    await agent.restore()
    assert [item.id for item in agent.pending_interrupts] == [interrupt_id]
    assert Agent(ScriptedModel([])).pending_interrupts == ()  # no session: nothing to load


def test_pending_interrupts_loads_the_session_in_sync_code(tmp_path: Path) -> None:
    session, interrupt_id = suspended_session(tmp_path)
    with Agent(ScriptedModel(["Deployed."]), tools=[deploy], session_manager=session) as agent:
        assert [item.id for item in agent.pending_interrupts] == [interrupt_id]
        assert agent.resume(interrupt_id, Approve()).text == "Deployed."


@pytest.mark.anyio
async def test_a_swarm_says_to_restore_first_too() -> None:
    storage, checkpointer = InMemoryStorage(), InMemoryCheckpointer()
    swarm = Swarm(
        [Agent(ScriptedModel([]), name="solo")],
        session=SwarmSession("team", "ctx-1", storage, checkpointer),
    )
    with pytest.raises(RestoreRequiredError, match=r"await swarm\.restore\(\)"):
        swarm.pending_interrupts  # noqa: B018
    await swarm.restore()
    assert swarm.pending_interrupts == ()


@pytest.mark.anyio
async def test_closing_an_async_stream_early_cancels_the_run_cleanly() -> None:
    agent = Agent(ScriptedModel(["a long answer in many chunks", "next"], chunk_size=2))
    stream = agent.stream("go")
    async for item in stream:
        if isinstance(item, TokenEvent):
            break
    await stream.aclose()  # no exception group, no cancel scope left open
    assert not agent.busy
    assert (await agent.invoke_async("again")).text == "next"
