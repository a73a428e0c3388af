"""A cancel, an interrupt and a rollback sent to another replica than the one running the turn.

Two ServerRuntimes with their own context caches share one storage and one coordination,
as two processes share a database and a Redis: the cancel control message must reach
the replica that holds the context's lease, and stop the run there.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

from agentkeel import Agent, ScriptedModel, ScriptedToolCall, ScriptedTurn, tool
from agentkeel.errors import NoActiveRunError
from agentkeel.framework import AgentDefinition, Framework
from agentkeel.models.base import ModelRequest
from agentkeel.runtime.coordination import Coordination, in_process_coordination
from agentkeel.runtime.runs import RunJob, ServerRuntime
from agentkeel.runtime.wire import parse_send_request
from agentkeel.storage import InMemoryStorage, SessionKey

pytestmark = pytest.mark.anyio

KEY = SessionKey(definition="chat", context_id="ctx-cancel-replicas")
finished_tools: list[str] = []


@tool
async def wait_long() -> str:
    """Take a long time, as a slow tool would."""
    await anyio.sleep(60)
    finished_tools.append("wait_long")
    return "done"


def _answer(request: ModelRequest) -> ScriptedTurn:
    last = request.messages[-1]
    if last.text == "slow" and not last.tool_results:
        return ScriptedTurn(tool_calls=[ScriptedToolCall("wait_long", {})])
    seen = [m.text for m in request.messages if m.role == "user" and not m.tool_results]
    return ScriptedTurn(text="saw " + "|".join(seen))


@pytest.fixture
async def replicas() -> AsyncIterator[tuple[ServerRuntime, ServerRuntime]]:
    storage = InMemoryStorage()

    def build(context_id: str) -> Agent:
        del context_id
        return Agent(ScriptedModel([_answer], repeat=True), tools=[wait_long], name="chat")

    framework = Framework(
        definitions={"chat": AgentDefinition(name="chat", factory=build)}, storage=storage
    )
    shared: Coordination[RunJob] = in_process_coordination(
        storage, retention=framework.retention.events
    )
    first, second = ServerRuntime(framework, shared), ServerRuntime(framework, shared)
    async with first.running(), second.running():
        yield first, second


async def _turn(runtime: ServerRuntime, text: str, multitask: str | None = None) -> RunJob:
    body: dict[str, object] = {"message": text, "contextId": KEY.context_id}
    if multitask is not None:
        body["multitask"] = multitask
    return await runtime.submit(KEY, parse_send_request(body))


async def _tool_running(job: RunJob) -> None:
    """Wait until the job's stream shows its tool call (the tool is running)."""
    with anyio.fail_after(10):
        while job.channel is None or not any(
            b'"type":"tool_call"' in frame.encoded for frame in job.channel.frames
        ):
            await anyio.sleep(0.01)


async def _text(job: RunJob) -> object:
    with anyio.fail_after(10):
        await job.finished.wait()
    assert job.result is not None
    return job.result["text"]


async def test_a_cancel_on_the_other_replica_stops_the_run(
    replicas: tuple[ServerRuntime, ServerRuntime],
) -> None:
    first, second = replicas
    finished_tools.clear()
    await _text(await _turn(first, "m0"))
    running = await _turn(first, "slow")
    await _tool_running(running)
    run_id = await second.cancel_context(KEY)
    with anyio.fail_after(10):
        await running.finished.wait()
    assert running.result is not None and running.result["status"] == "cancelled"
    assert run_id == running.result["runId"]
    with pytest.raises(NoActiveRunError):
        await second.cancel_context(KEY)
    assert await _text(await _turn(second, "next")) == "saw m0|slow|next"
    assert finished_tools == []


@pytest.mark.parametrize(
    ("policy", "expected"), [("interrupt", "saw m0|slow|x"), ("rollback", "saw m0|x")]
)
async def test_a_turn_on_the_other_replica_takes_the_context_over(
    replicas: tuple[ServerRuntime, ServerRuntime], policy: str, expected: str
) -> None:
    first, second = replicas
    finished_tools.clear()
    await _text(await _turn(first, "m0"))
    running = await _turn(first, "slow")
    await _tool_running(running)
    taking = await _turn(second, "x", multitask=policy)
    assert await _text(taking) == expected
    assert running.result is not None and running.result["status"] == "cancelled"
    assert finished_tools == []
