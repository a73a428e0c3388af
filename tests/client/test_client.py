"""AsyncAgentClient and AgentClient against a real agentkeel server on loopback."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from agentkeel.client import (
    AgentClient,
    AsyncAgentClient,
    ClientStreamItem,
    ConnectionLostError,
    SendResult,
    ServerError,
    approve,
    cancel,
    reject,
)
from agentkeel.errors import (
    AgentkeelError,
    ContextNotFoundError,
    InterruptNotFoundError,
    InterruptPendingError,
    InvalidContextIdError,
    InvalidRequestError,
    RunInProgressError,
)
from agentkeel.events import (
    InterruptEvent,
    StatusEvent,
    StepEvent,
    ThinkingEvent,
    TokenEvent,
    ToolCallEvent,
    ToolResultEvent,
)

from . import CuttingProxy, Served, at_response_start, free_port, in_frame, serve

pytestmark = pytest.mark.anyio
CONTEXT_ID = re.compile(r"^ctx-[0-9a-f]{36}$")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serve(tmp_path_factory.mktemp("server")) as served:
        yield served


@pytest.fixture(scope="module")
def rejecting_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serve(tmp_path_factory.mktemp("rejecting"), concurrency="reject") as served:
        yield served


@pytest.fixture
async def client(server: Served) -> AsyncIterator[AsyncAgentClient]:
    async with AsyncAgentClient(server.url, agent="demo") as agent_client:
        yield agent_client


async def collect(items: AsyncIterator[ClientStreamItem]) -> tuple[list[object], SendResult]:
    events: list[object] = []
    async for item in items:
        events.append(item)
    result = events.pop()
    assert isinstance(result, SendResult)
    assert not any(isinstance(event, SendResult) for event in events)
    return events, result


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


# -- turns and conversations ------------------------------------------------------------------


async def test_send_mints_a_context_and_continues_it(server: Served) -> None:
    seen: list[str] = []
    async with AsyncAgentClient(server.url, agent="demo", on_context=seen.append) as client:
        assert client.context_id is None
        first = await client.send("Remember that my favourite colour is blue")
        assert first.status == "completed"
        assert first.tool_calls == ("write_state",)
        assert first.text == "I'll remember that your favourite colour is blue."
        assert CONTEXT_ID.match(first.context_id)
        assert client.context_id == first.context_id
        assert first.interrupt is None and first.error is None

        second = await client.send("What is my favourite colour?")
        assert second.context_id == first.context_id
        assert second.run_id != first.run_id
        assert second.text == "You told me your favourite colour is blue."
        assert seen == [first.context_id]  # called once, when the id became known


async def test_stream_yields_typed_events_in_order_then_the_result(
    client: AsyncAgentClient,
) -> None:
    events, result = await collect(client.stream("What time is it?"))

    assert events[:2] == [StatusEvent(), StepEvent(step=1)]
    thinking = "".join(e.text for e in events if isinstance(e, ThinkingEvent))
    assert thinking.startswith("The user wants to know the time, so I will call current_time.")
    calls = [e for e in events if isinstance(e, ToolCallEvent | ToolResultEvent)]
    assert [type(e) for e in calls] == [ToolCallEvent, ToolResultEvent]
    assert calls[0].name == calls[1].name == "current_time"
    assert isinstance(calls[1], ToolResultEvent) and calls[1].status == "success"
    assert StepEvent(step=2) in events
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    assert events.index(tokens[0]) > events.index(calls[1])  # the answer comes after the tool
    assert "".join(t.text for t in tokens) == result.text
    assert re.fullmatch(r"It is \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00\.", result.text)
    assert result.status == "completed" and result.tool_calls == ("current_time",)
    assert result.context_id == client.context_id


async def test_reset_starts_a_new_conversation(server: Served) -> None:
    seen: list[str] = []
    async with AsyncAgentClient(server.url, agent="demo", on_context=seen.append) as client:
        first = await client.send("Remember that my favourite colour is blue")
        client.reset()
        assert client.context_id is None
        second = await client.send("What is my favourite colour?")
        assert second.context_id != first.context_id
        assert "blue" not in second.text  # the new conversation has no history
        assert seen == [first.context_id, second.context_id]
        assert server.session_exists(first.context_id)  # reset is local only


async def test_a_context_id_of_ones_own_is_kept(server: Served) -> None:
    async with AsyncAgentClient(server.url, agent="demo", context_id="ctx-user-42") as client:
        result = await client.send("My name is Ada")
        assert result.context_id == client.context_id == "ctx-user-42"
    async with AsyncAgentClient(server.url, agent="demo", context_id="ctx-user-42") as again:
        assert "Ada" in (await again.send("Recall name")).text


async def test_delete_context_deletes_it_on_the_server(server: Served) -> None:
    async with AsyncAgentClient(server.url, agent="demo") as client:
        context_id = (await client.send("Remember that my pet is a cat")).context_id
        assert server.session_exists(context_id)
        await client.delete_context()
        assert client.context_id is None
        assert not server.session_exists(context_id)
        await client.delete_context()  # nothing to delete any more: no request

    async with AsyncAgentClient(server.url, agent="demo", context_id=context_id) as stale:
        with pytest.raises(ContextNotFoundError) as raised:
            await stale.delete_context()
        assert raised.value.code == "context_not_found"
        assert stale.context_id == context_id  # a failed delete forgets nothing
        with pytest.raises(ContextNotFoundError):
            await collect(stale.follow())


# -- human in the loop ------------------------------------------------------------------------


async def test_approval_approved_then_rejected(client: AsyncAgentClient) -> None:
    suspended = await client.send("Delete notes.txt")
    assert suspended.status == "suspended"
    pending = suspended.interrupt
    assert isinstance(pending, InterruptEvent)
    assert (pending.kind, pending.tool) == ("approval", "delete_file")
    assert pending.id.startswith("int-")

    with pytest.raises(InterruptPendingError) as raised:
        await client.send("Hello?")
    assert raised.value.interrupt_id == pending.id
    assert raised.value.code == "interrupt_pending"

    done = await client.resume(pending.id, approve())
    assert done.status == "completed" and done.run_id == suspended.run_id
    assert done.tool_calls == ("delete_file",)
    assert done.text == "Done: deleted notes.txt (demo: nothing was really deleted)."

    again = await client.send("Delete notes.txt")
    assert again.interrupt is not None
    events, refused = await collect(client.resume_stream(again.interrupt.id, reject("I need it")))
    assert refused.status == "completed" and refused.tool_calls == ()
    assert refused.text == "OK, I did not delete notes.txt. Reason: I need it."
    assert "".join(e.text for e in events if isinstance(e, TokenEvent)) == refused.text
    assert not any(isinstance(e, ToolCallEvent) for e in events)


async def test_input_interrupt_is_answered_with_text(client: AsyncAgentClient) -> None:
    events, suspended = await collect(client.stream("Ask me about my day"))
    assert suspended.status == "suspended" and suspended.interrupt is not None
    assert events[-1] == suspended.interrupt  # the interrupt event ends the segment
    assert suspended.interrupt.kind == "input"
    assert suspended.interrupt.prompt == "What can you tell me about your day?"

    answered = await client.resume(suspended.interrupt.id, "sunny")
    assert answered.text == "Thanks! You told me: sunny."
    assert answered.tool_calls == ("ask_user",)


async def test_cancel_abandons_the_suspended_run(client: AsyncAgentClient) -> None:
    suspended = await client.send("Delete notes.txt")
    assert suspended.interrupt is not None
    cancelled = await client.resume(suspended.interrupt.id, cancel())
    assert cancelled.status == "cancelled" and cancelled.tool_calls == ()
    assert (await client.send("What time is it?")).status == "completed"


async def test_follow_picks_up_a_run_nobody_listened_to(client: AsyncAgentClient) -> None:
    stream = client.stream("Delete notes.txt")
    assert await anext(stream) == StatusEvent()
    await stream.aclose()  # stop listening: the run goes on on the server

    events, result = await collect(client.follow())
    assert result.status == "suspended" and result.interrupt is not None
    assert events[-1] == result.interrupt
    assert (await client.resume(result.interrupt.id, approve())).status == "completed"


# -- a flaky network ----------------------------------------------------------------------------


async def reference_run(server: Served) -> list[object]:
    async with AsyncAgentClient(server.url, agent="demo") as direct:
        events, _ = await collect(direct.stream("What time is it?"))
    return events


def comparable(events: list[object]) -> list[object]:
    """The events without the tokens, which hold the time of day."""
    return [e for e in events if not isinstance(e, TokenEvent)]


@pytest.mark.parametrize("frame", [1, 3, 12, 20])
async def test_a_stream_cut_mid_frame_reconnects_without_loss_or_repeat(
    server: Served, frame: int
) -> None:
    proxy = CuttingProxy(port_of(server.url), [in_frame(frame)])
    try:
        async with AsyncAgentClient(proxy.url, agent="demo", max_retries=3) as client:
            events, result = await collect(client.stream("What time is it?"))
    finally:
        proxy.close()

    if frame == 1:  # nothing of the run arrived: the POST is sent again, same key
        assert proxy.request_lines() == ["POST /agents/demo/stream"] * 2
        assert proxy.headers("last-event-id") == []
    else:  # reconnect after the last whole frame
        assert proxy.request_lines() == [
            "POST /agents/demo/stream",
            f"GET /agents/demo/contexts/{result.context_id}/stream",
        ]
        assert proxy.headers("last-event-id") == [str(frame - 1)]
    assert comparable(events) == comparable(await reference_run(server))
    assert "".join(e.text for e in events if isinstance(e, TokenEvent)) == result.text
    assert len(server.runs(result.context_id)) == 1


async def test_a_post_dropped_before_any_frame_is_retried_with_the_same_key(
    server: Served,
) -> None:
    proxy = CuttingProxy(port_of(server.url), [at_response_start])
    try:
        async with AsyncAgentClient(proxy.url, agent="demo") as client:
            events, result = await collect(client.stream("What time is it?"))
    finally:
        proxy.close()

    assert proxy.request_lines() == ["POST /agents/demo/stream"] * 2
    keys = proxy.headers("idempotency-key")
    assert len(keys) == 2 and keys[0] == keys[1]
    assert len(server.runs(result.context_id)) == 1  # re-attached, not run twice
    assert comparable(events) == comparable(await reference_run(server))


async def test_a_retried_send_does_not_run_the_turn_twice(server: Served) -> None:
    async with AsyncAgentClient(server.url, agent="demo") as direct:
        context_id = (await direct.send("Remember that my favourite colour is blue")).context_id
    proxy = CuttingProxy(port_of(server.url), [at_response_start])
    try:
        async with AsyncAgentClient(proxy.url, agent="demo", context_id=context_id) as client:
            result = await client.send("Remember that my favourite colour is green")
    finally:
        proxy.close()

    assert result.text == "I'll remember that your favourite colour is green."
    keys = proxy.headers("idempotency-key")
    assert len(keys) == 2 and keys[0] == keys[1]
    assert len(server.runs(context_id)) == 2  # the first turn and this one, once
    history = (server.sessions / f"demo:{context_id}" / "messages.jsonl").read_text()
    assert history.count("Remember that my favourite colour is green") == 1


async def test_every_turn_gets_its_own_key_and_the_credential_is_sent(server: Served) -> None:
    proxy = CuttingProxy(port_of(server.url), [])
    try:
        async with AsyncAgentClient(proxy.url, agent="demo", api_key="secret-key") as client:
            await client.send("What time is it?")
            await collect(client.stream("What time is it?"))
    finally:
        proxy.close()
    keys = proxy.headers("idempotency-key")
    assert len(keys) == 2 and keys[0] != keys[1]
    assert proxy.headers("authorization") == ["Bearer secret-key"] * 2


async def test_an_unreachable_server_raises_connection_lost() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    async with AsyncAgentClient(url, agent="demo", max_retries=1) as client:
        with pytest.raises(ConnectionLostError) as raised:
            await client.send("Hello")
        assert raised.value.code == "connection_lost"
        with pytest.raises(ConnectionLostError):
            await collect(client.stream("Hello"))


# -- typed errors -------------------------------------------------------------------------------


async def test_an_invalid_context_id_is_refused(server: Served) -> None:
    async with AsyncAgentClient(server.url, agent="demo", context_id="../../etc") as client:
        with pytest.raises(InvalidContextIdError) as raised:
            await client.send("Hello")
    assert raised.value.code == "invalid_context_id"


async def test_a_malformed_decision_and_an_unknown_interrupt(client: AsyncAgentClient) -> None:
    suspended = await client.send("Delete notes.txt")
    assert suspended.interrupt is not None
    with pytest.raises(InvalidRequestError) as bad:
        await client.resume(suspended.interrupt.id, "yes please")
    assert bad.value.code == "invalid_request"
    with pytest.raises(InterruptNotFoundError) as unknown:
        await client.resume("int-0000", approve())
    assert unknown.value.code == "interrupt_not_found"
    assert (await client.resume(suspended.interrupt.id, approve())).status == "completed"


class CorruptingTransport(httpx.AsyncBaseTransport):
    """Sends every request body as invalid JSON, as a broken client would."""

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        headers = {k: v for k, v in request.headers.items() if k.lower() != "content-length"}
        broken = httpx.Request(request.method, request.url, headers=headers, content=b"{")
        return await self._inner.handle_async_request(broken)

    async def aclose(self) -> None:
        await self._inner.aclose()


async def test_invalid_json_is_an_invalid_request_error(server: Served) -> None:
    async with httpx.AsyncClient(transport=CorruptingTransport()) as http:
        client = AsyncAgentClient(server.url, agent="demo", http_client=http)
        with pytest.raises(InvalidRequestError) as raised:
            await client.send("Hello")
        assert type(raised.value) is InvalidRequestError
        assert "JSON" in raised.value.message


async def test_a_busy_context_is_refused_under_the_reject_policy(rejecting_server: Served) -> None:
    async with AsyncAgentClient(rejecting_server.url, agent="slow") as client:
        stream = client.stream("What time is it?")
        assert await anext(stream) == StatusEvent()
        with pytest.raises(RunInProgressError) as raised:
            await client.send("What time is it?")
        assert raised.value.code == "context_busy"
        _, result = await collect(stream)
        assert result.status == "completed"


async def test_an_unknown_agent_is_a_server_error(server: Served) -> None:
    async with AsyncAgentClient(server.url, agent="nobody") as client:
        with pytest.raises(ServerError) as raised:
            await client.send("Hello")
        assert (raised.value.code, raised.value.status_code) == ("agent_not_found", 404)
        assert isinstance(raised.value, AgentkeelError)
        assert [info.name for info in await client.agents()] == ["demo", "slow"]


async def test_resume_without_a_conversation_fails_locally() -> None:
    client = AsyncAgentClient("http://127.0.0.1:9", agent="demo")
    with pytest.raises(InvalidRequestError):
        await client.resume("int-1", approve())
    with pytest.raises(InvalidRequestError):
        client.follow()
    with pytest.raises(InvalidRequestError):
        AsyncAgentClient("http://127.0.0.1:9", agent="demo", api_key="a", token="b")
    await client.aclose()


# -- the blocking client ------------------------------------------------------------------------


def test_the_blocking_client_has_the_same_behaviour(server: Served) -> None:
    seen: list[str] = []
    with AgentClient(server.url, agent="demo", on_context=seen.append) as client:
        assert [info.name for info in client.agents()] == ["demo", "slow"]
        first = client.send("Remember that my favourite colour is blue")
        items = list(client.stream("What is my favourite colour?"))
        result = items[-1]
        assert isinstance(result, SendResult)
        assert result.text == "You told me your favourite colour is blue."
        assert isinstance(items[0], StatusEvent)

        suspended = client.send("Delete notes.txt")
        assert suspended.interrupt is not None
        resumed = list(client.resume_stream(suspended.interrupt.id, approve()))
        assert isinstance(resumed[-1], SendResult) and resumed[-1].tool_calls == ("delete_file",)

        asked = client.send("Ask me about my day")
        assert asked.interrupt is not None
        assert client.resume(asked.interrupt.id, "fine").text == "Thanks! You told me: fine."

        assert seen == [first.context_id] and client.context_id == first.context_id
        client.delete_context()
        assert client.context_id is None
        with pytest.raises(InvalidRequestError):
            list(client.follow())
        client.reset()


def test_the_blocking_client_stops_early_without_hanging(server: Served) -> None:
    with AgentClient(server.url, agent="demo") as client:
        for item in client.stream("What time is it?"):
            assert isinstance(item, StatusEvent)
            break
        # the run went on on the server; the next turn waits for it, then runs
        assert client.send("What time is it?").status == "completed"
