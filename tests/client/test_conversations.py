"""The clients' conversation methods (SPEC section 3) against a wire fixture on loopback.

The fixture (`conversation_server`) speaks the context list and summary, the
transcript, cancel, fork, and ``replace``/``regenerate``/``multitask`` on turns, over
real HTTP and SSE; the tests check what the client sends and what it makes of the
answers, including every error code as its typed exception.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from datetime import datetime

import anyio
import pytest

from agentkeel.client import (
    AgentClient,
    AsyncAgentClient,
    CancelResult,
    ContextSummary,
    SendResult,
    ServerError,
    TranscriptMessage,
)
from agentkeel.errors import (
    ContextExistsError,
    ContextNotFoundError,
    InvalidRequestError,
    MessageNotFoundError,
    NoActiveRunError,
)
from agentkeel.events import TokenEvent

from .conversation_server import ConversationWire, serve_conversations

pytestmark = pytest.mark.anyio
MESSAGE_ID = re.compile(r"^msg-[0-9a-f]{24}$")


@pytest.fixture
def wire() -> Iterator[tuple[str, ConversationWire]]:
    with serve_conversations() as served:
        yield served


@pytest.fixture
async def client(wire: tuple[str, ConversationWire]) -> AsyncIterator[AsyncAgentClient]:
    async with AsyncAgentClient(wire[0], agent="demo", max_retries=0) as agent_client:
        yield agent_client


async def texts(client: AsyncAgentClient, context_id: str | None = None) -> list[str]:
    return [message.text async for message in client.messages(context_id)]


async def test_the_transcript_has_typed_messages_with_stable_ids_page_after_page(
    client: AsyncAgentClient, wire: tuple[str, ConversationWire]
) -> None:
    await client.send("one")
    await client.send("two")
    page = await client.messages_page()
    assert [(m.role, m.text) for m in page.messages] == [
        ("user", "one"),
        ("assistant", "Echo: one"),
        ("user", "two"),
        ("assistant", "Echo: two"),
    ]
    assert page.next_cursor is None
    first = page.messages[0]
    assert isinstance(first, TranscriptMessage)
    assert MESSAGE_ID.match(first.id)
    assert first.run_id is not None and first.run_id.startswith("run-")
    assert isinstance(first.created_at, datetime)

    seen = len(wire[1].requests)
    everything = [message async for message in client.messages(limit=1)]
    assert everything == list(page.messages)
    reads = [path for _, path, _ in wire[1].requests[seen:]]
    assert len(reads) == 4  # one page per message, each after the last id
    assert f"after={page.messages[0].id}" in reads[1]
    later = await client.messages_page(after=page.messages[1].id, limit=1)
    assert [m.text for m in later.messages] == ["two"]
    assert later.next_cursor is not None


async def test_the_context_list_pages_newest_first_and_a_summary_reads_one(
    wire: tuple[str, ConversationWire],
) -> None:
    url, _ = wire
    ids = []
    for text in ("first", "second", "third"):
        async with AsyncAgentClient(url, agent="demo") as one:
            ids.append((await one.send(text)).context_id)
    async with AsyncAgentClient(url, agent="demo") as reader:
        page = await reader.list_contexts(limit=2)
        assert [c.context_id for c in page.contexts] == [ids[2], ids[1]]
        assert page.next_cursor is not None
        rest = await reader.list_contexts(limit=2, cursor=page.next_cursor)
        assert [c.context_id for c in rest.contexts] == [ids[0]]
        assert [c.title async for c in reader.contexts(limit=1)] == ["third", "second", "first"]
        summary = await reader.get_context(ids[0])
        assert isinstance(summary, ContextSummary)
        assert (summary.title, summary.message_count, summary.status) == ("first", 2, "idle")
        assert summary.interrupt is None
        assert summary.updated_at >= summary.created_at
        with pytest.raises(InvalidRequestError):
            await reader.list_contexts(limit=0)
        with pytest.raises(ContextNotFoundError):
            await reader.get_context("ctx-nobody")
        with pytest.raises(InvalidRequestError, match="no conversation"):
            await reader.get_context()


async def test_replace_edits_a_user_message_and_regenerate_answers_again(
    client: AsyncAgentClient, wire: tuple[str, ConversationWire]
) -> None:
    await client.send("one")
    await client.send("two")
    messages = [m async for m in client.messages()]
    edited = await client.send("deux", replace=messages[2].id)
    assert edited.text == "Echo: deux"
    assert wire[1].requests[-1][2] == {
        "message": "deux",
        "replace": messages[2].id,
        "contextId": client.context_id,
    }
    assert await texts(client) == ["one", "Echo: one", "deux", "Echo: deux"]

    answer = [m async for m in client.messages()][-1]
    items = [item async for item in client.stream(regenerate=answer.id, multitask="rollback")]
    result = items[-1]
    assert isinstance(result, SendResult)
    assert result.text == "Echo again (1): deux"
    assert any(isinstance(item, TokenEvent) for item in items)
    assert wire[1].requests[-1][2] == {
        "regenerate": answer.id,
        "multitask": "rollback",
        "contextId": client.context_id,
    }
    assert await texts(client) == ["one", "Echo: one", "deux", "Echo again (1): deux"]


async def test_wrong_message_ids_are_typed_errors_and_bad_arguments_send_nothing(
    client: AsyncAgentClient, wire: tuple[str, ConversationWire]
) -> None:
    with pytest.raises(InvalidRequestError, match="no conversation"):
        await client.send("x", replace="msg-1")
    await client.send("one")
    user, assistant = [m async for m in client.messages()]
    with pytest.raises(MessageNotFoundError):
        await client.send(regenerate=user.id)  # a user message cannot be regenerated
    with pytest.raises(MessageNotFoundError):
        await client.send("x", replace=assistant.id)
    sent = len(wire[1].requests)
    with pytest.raises(InvalidRequestError):
        await client.send("x", regenerate=assistant.id)
    with pytest.raises(InvalidRequestError):
        await client.send()
    assert len(wire[1].requests) == sent
    assert await texts(client) == ["one", "Echo: one"]


async def test_cancel_stops_the_run_on_the_server_and_its_stream_ends_cancelled(
    client: AsyncAgentClient, wire: tuple[str, ConversationWire]
) -> None:
    await client.send("hello")
    items: list[object] = []
    started = anyio.Event()

    async def listen() -> None:
        async for item in client.stream("wait for it"):
            items.append(item)
            started.set()

    async with anyio.create_task_group() as group:
        group.start_soon(listen)
        await started.wait()
        assert (await client.get_context()).status == "running"
        answer = await client.cancel()
    assert isinstance(answer, CancelResult)
    result = items[-1]
    assert isinstance(result, SendResult)
    assert result.status == "cancelled"
    assert answer == CancelResult(run_id=result.run_id, status="cancelling")
    method, path, _ = next(
        r
        for r in wire[1].requests
        if r[1].startswith(f"/agents/demo/contexts/{client.context_id}/cancel")
    )
    assert method == "POST"
    with pytest.raises(NoActiveRunError):
        await client.cancel()
    assert (await client.send("again")).text == "Echo: again"


async def test_fork_copies_up_to_a_message_and_leaves_the_client_on_the_source(
    client: AsyncAgentClient, wire: tuple[str, ConversationWire]
) -> None:
    await client.send("one")
    await client.send("two")
    source = client.context_id
    first_answer = [m async for m in client.messages()][1]
    fork = await client.fork(first_answer.id, new_context_id="ctx-fork-1")
    assert fork == "ctx-fork-1"
    assert wire[1].requests[-1][2] == {"messageId": first_answer.id, "contextId": "ctx-fork-1"}
    assert client.context_id == source
    assert await texts(client, "ctx-fork-1") == ["one", "Echo: one"]
    whole = await client.fork()
    assert len(await texts(client, whole)) == 4
    with pytest.raises(ContextExistsError):
        await client.fork(new_context_id="ctx-fork-1")
    with pytest.raises(MessageNotFoundError):
        await client.fork("msg-000000000000000000000000")
    with pytest.raises(ContextNotFoundError):
        await client.fork(context_id="ctx-nobody")


async def test_a_transcript_turned_off_answers_404_as_a_server_error() -> None:
    with serve_conversations(transcript=False) as (url, _):
        async with AsyncAgentClient(url, agent="demo") as client:
            await client.send("one")
            assert (await client.get_context()).title == ""
            with pytest.raises(ServerError) as raised:
                await client.messages_page()
            assert (raised.value.code, raised.value.status_code) == ("not_found", 404)


def test_the_blocking_client_has_the_same_conversation_methods(
    wire: tuple[str, ConversationWire],
) -> None:
    with AgentClient(wire[0], agent="demo") as client:
        client.send("one")
        messages = list(client.messages())
        assert [m.text for m in messages] == ["one", "Echo: one"]
        assert client.messages_page(limit=1).next_cursor is not None
        assert client.send("uno", replace=messages[0].id).text == "Echo: uno"
        again = list(client.stream(regenerate=client.messages_page().messages[1].id))
        assert isinstance(again[-1], SendResult) and again[-1].text == "Echo again (1): uno"
        assert client.get_context().message_count == 2
        assert [c.context_id for c in client.contexts()] == [client.context_id]
        assert client.list_contexts(limit=1).contexts[0].title == "uno"
        copy = client.fork(new_context_id="ctx-copy")
        assert [m.text for m in client.messages(copy)] == ["uno", "Echo again (1): uno"]
        with pytest.raises(NoActiveRunError):
            client.cancel()
