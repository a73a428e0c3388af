"""Two ServerRuntimes on one storage and one coordination, standing in for two replicas.

Each runtime has its own context cache (its own Agents), as two processes would; they
share the session storage and the in-process coordination (lease, fan-out,
idempotency claims), as replicas would share a database and a Redis.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import anyio
import pytest

from agentkeel import Agent, ScriptedModel, ScriptedTurn
from agentkeel.framework import AgentDefinition, Framework
from agentkeel.models.base import ModelRequest
from agentkeel.runtime.coordination import Coordination, in_process_coordination
from agentkeel.runtime.runs import RunJob, ServerRuntime
from agentkeel.runtime.wire import parse_send_request
from agentkeel.storage import InMemoryStorage, SessionKey

pytestmark = pytest.mark.anyio

KEY = SessionKey(definition="chat", context_id="ctx-replicas")


def _answer(request: ModelRequest) -> ScriptedTurn:
    """Say which user turns the model was shown: a forked history shows up in the text."""
    seen = [message.text for message in request.messages if message.role == "user"]
    return ScriptedTurn(text="saw " + "|".join(seen), delay=0.01)


def _framework(storage: InMemoryStorage) -> Framework:
    def build(context_id: str) -> Agent:
        del context_id
        return Agent(ScriptedModel([_answer], repeat=True), name="chat")

    definition = AgentDefinition(name="chat", factory=build)
    return Framework(definitions={"chat": definition}, storage=storage)


@pytest.fixture
async def replicas() -> AsyncIterator[tuple[ServerRuntime, ServerRuntime]]:
    storage = InMemoryStorage()
    framework = _framework(storage)
    shared: Coordination[RunJob] = in_process_coordination(
        storage, retention=framework.retention.events
    )
    first, second = ServerRuntime(framework, shared), ServerRuntime(framework, shared)
    async with first.running(), second.running():
        yield first, second


async def _turn(runtime: ServerRuntime, text: str) -> RunJob:
    request = parse_send_request({"message": text, "contextId": KEY.context_id})
    return await runtime.submit(KEY, request)


async def test_turns_of_one_context_never_overlap_across_replicas(
    replicas: tuple[ServerRuntime, ServerRuntime],
) -> None:
    """A turn sent to the second replica waits for the first replica's turn to end."""
    first, second = replicas
    spans: list[tuple[str, float, float]] = []

    async def run(runtime: ServerRuntime, text: str) -> None:
        job = await _turn(runtime, text)
        began = time.monotonic()
        await job.finished.wait()
        spans.append((text, began, time.monotonic()))

    with anyio.fail_after(20):
        async with anyio.create_task_group() as group:
            group.start_soon(run, first, "one " * 10)  # ten chunks, 10 ms apart
            await anyio.sleep(0.005)
            group.start_soon(run, second, "two")
            await anyio.sleep(0.005)
            group.start_soon(run, first, "three")
    assert [text.strip() for text, _, _ in spans] == [
        "one one one one one one one one one one",
        "two",
        "three",
    ]
    for (_, _, ended), (_, began, _) in zip(spans, spans[1:], strict=False):
        assert ended <= began, "a turn started on one replica while the other ran one"


async def test_a_cancel_sent_to_one_replica_stops_the_run_on_the_other(
    replicas: tuple[ServerRuntime, ServerRuntime],
) -> None:
    """The cancel control message goes through coordination to the lease's holder."""
    first, second = replicas
    with anyio.fail_after(20):
        job = await _turn(first, "a long answer " * 40)
        assert job.channel is not None
        assert await second.cancel(KEY, job.channel.run_id)
        await job.finished.wait()
    assert job.result is not None and job.result["status"] == "cancelled"
    assert not await second.cancel(KEY, job.channel.run_id)  # nothing runs it any more


async def test_alternating_turns_never_fork_the_history(
    replicas: tuple[ServerRuntime, ServerRuntime],
) -> None:
    """Turns alternate between the replicas; each sees the other's, nothing forks."""
    texts = [f"turn {index}" for index in range(1, 5)]
    answers = []
    with anyio.fail_after(20):
        for index, text in enumerate(texts):
            job = await _turn(replicas[index % 2], text)
            await job.finished.wait()
            assert job.result is not None and job.result["status"] == "completed"
            answers.append(job.result["text"])
    assert answers == ["saw " + "|".join(texts[: index + 1]) for index in range(len(texts))]
    stored = await replicas[0].framework.storage.load(KEY)
    assert stored is not None
    assert [m.text for m in stored.messages if m.role == "user"] == texts


async def test_a_long_turn_keeps_renewing_its_lease() -> None:
    """With a lease ttl far shorter than a turn, the turn renews it: no takeover."""
    storage = InMemoryStorage()
    framework = _framework(storage)
    shared: Coordination[RunJob] = in_process_coordination(storage, retention=None, lease_ttl=0.06)
    first, second = ServerRuntime(framework, shared), ServerRuntime(framework, shared)
    async with first.running(), second.running():
        with anyio.fail_after(20):
            long = await _turn(first, "x" * 120)  # 30 chunks, 10 ms apart: 5 ttls
            queued = await _turn(second, "next")  # returns once its turn started
            assert long.finished.is_set(), "the queued turn took over a renewed lease"
            await queued.finished.wait()
    assert long.result is not None and long.result["status"] == "completed"
    assert queued.result is not None and queued.result["status"] == "completed"
    assert long.grant is not None and queued.grant is not None
    assert queued.grant.fence > long.grant.fence
