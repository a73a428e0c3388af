"""A binding needs nothing but RunFacade: submit, follow from an id, cancel, read a record."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

from agentkeel import Agent, ScriptedModel
from agentkeel.framework import AgentDefinition, Framework
from agentkeel.messages import JSONObject
from agentkeel.runtime.coordination import RunStream
from agentkeel.runtime.facade import RunFacade
from agentkeel.runtime.runs import ServerRuntime
from agentkeel.runtime.wire import parse_send_request
from agentkeel.storage import InMemoryStorage, SessionKey

pytestmark = pytest.mark.anyio

KEY = SessionKey(definition="chat", context_id="ctx-facade")


@pytest.fixture
async def facade() -> AsyncIterator[RunFacade]:
    def build(context_id: str) -> Agent:
        del context_id
        return Agent(ScriptedModel(["hello there, binding"], repeat=True), name="chat")

    framework = Framework(
        definitions={"chat": AgentDefinition(name="chat", factory=build)},
        storage=InMemoryStorage(),
    )
    runtime = ServerRuntime(framework)
    async with runtime.running():
        yield runtime


async def _frames(facade: RunFacade, stream: RunStream, after: int) -> list[JSONObject]:
    got: list[JSONObject] = []
    with anyio.fail_after(10):
        async for batch in facade.follow(stream, after):
            got.extend(frame.data for frame in batch)
    return got


async def test_a_turn_through_the_facade(facade: RunFacade) -> None:
    request = parse_send_request({"message": "hi", "contextId": KEY.context_id})
    job = await facade.submit(KEY, request)
    assert job.channel is not None
    frames = await _frames(facade, job.channel, job.start_after)
    text = "".join(
        str(event.get("text", ""))
        for frame in frames
        if isinstance(event := frame.get("event"), dict) and event.get("type") == "token"
    )
    assert text == "hello there, binding"
    assert frames[-1]["done"] is True and frames[-1]["status"] == "completed"
    run_id = job.channel.run_id

    replay = await _frames(facade, job.channel, 2)  # from an id: what came after it
    assert replay == frames[2:]
    latest = await facade.latest(KEY)
    assert latest is not None and latest.run_id == run_id and not latest.active
    assert await facade.live(KEY, run_id) is None
    assert await facade.exists(KEY)
    record = await facade.run_record(KEY, run_id)
    assert record is not None and record.status == "completed"
    assert not await facade.cancel(KEY, run_id)  # it no longer runs


async def test_an_unknown_context_has_nothing(facade: RunFacade) -> None:
    other = SessionKey(definition="chat", context_id="ctx-none")
    assert await facade.latest(other) is None
    assert not await facade.exists(other)
    assert await facade.run_record(other, "run-none") is None
