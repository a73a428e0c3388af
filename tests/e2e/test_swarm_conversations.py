"""A swarm's conversation on the native wire: transcript, list, fork, edit, regenerate, rollback.

A real ``agentkeel serve`` process (restarted between the turns and the reads) serves
``e2e.swarm_desk:desk``, whose members answer with every prompt they remember, so each
test checks what a member remembers through what it answers, besides the transcript.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest

from agentkeel.client import AsyncAgentClient
from e2e import ServerProcess, write_framework
from e2e.test_run_control import rest_of, running_turn
from postgres.fixtures import pg_database, pg_schema, pg_url

__all__ = ["pg_database", "pg_schema", "pg_url"]  # the fixtures this module uses

pytestmark = pytest.mark.anyio
SEND = "/agents/desk/send"
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


def desk_server(folder: Path, storage: str | None = None) -> ServerProcess:
    document: dict[str, object] = {
        "agents": {"desk": {"factory": "e2e.swarm_desk:desk"}},
        "server": {"heartbeatSeconds": 1},
    }
    if storage is None:
        document["sessionDir"] = str(folder / "sessions")
        document["checkpointer"] = {"dir": str(folder / "checkpoints")}
    else:
        document["storage"] = storage
    return ServerProcess(write_framework(folder, document))


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    process = desk_server(tmp_path)
    process.start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def pg_server(tmp_path: Path, pg_url: str) -> Iterator[ServerProcess]:
    process = desk_server(tmp_path, pg_url)
    process.start()
    try:
        yield process
    finally:
        process.stop()


async def send(client: httpx.AsyncClient, context_id: str, **body: object) -> dict[str, object]:
    response = await client.post(SEND, json={"contextId": context_id, **body})
    assert response.status_code == 200, response.text
    answer: dict[str, object] = response.json()
    assert answer["status"] == "completed", answer
    return answer


async def transcript(client: httpx.AsyncClient, context_id: str) -> list[dict[str, object]]:
    response = await client.get(f"/agents/desk/contexts/{context_id}/messages")
    assert response.status_code == 200, response.text
    messages: list[dict[str, object]] = response.json()["messages"]
    return messages


def lines(messages: list[dict[str, object]]) -> list[tuple[object, object, object]]:
    """(role, agent, text) of each transcript message."""
    return [(m["role"], m.get("agent"), m["text"]) for m in messages]


async def two_turns(client: httpx.AsyncClient, context_id: str) -> None:
    await send(client, context_id, message="hello")
    handed = await send(client, context_id, message="to back hi there")
    assert handed["agent"] == "back" and handed["text"] == "back heard: hi there"


@pytest.fixture(params=["files", "postgresql"])
def either(request: pytest.FixtureRequest) -> ServerProcess:
    """The swarm served on files, then on PostgreSQL (its own schema)."""
    name = "server" if request.param == "files" else "pg_server"
    process: ServerProcess = request.getfixturevalue(name)
    return process


async def test_a_swarm_transcript_names_the_members_and_survives_a_restart(
    either: ServerProcess,
) -> None:
    server = either
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        await two_turns(client, "ctx-desk")
    server.stop()
    server.start()
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        messages = await transcript(client, "ctx-desk")
        assert lines(messages) == [
            ("user", None, "hello"),
            ("assistant", "front", "front heard: hello"),
            ("user", None, "to back hi there"),
            ("assistant", "front", ""),
            ("assistant", "back", "back heard: hi there"),
        ]
        assert messages[3]["toolCalls"] == ["handoff_to_agent"]
        assert all(ISO.match(str(m["createdAt"])) for m in messages)
        assert len({m["id"] for m in messages}) == 5
        assert messages[0]["runId"] == messages[1]["runId"] != messages[2]["runId"]
        assert messages[2]["runId"] == messages[3]["runId"] == messages[4]["runId"]
        page = await client.get(
            "/agents/desk/contexts/ctx-desk/messages",
            params={"after": str(messages[1]["id"]), "limit": 2},
        )
        assert [m["id"] for m in page.json()["messages"]] == [m["id"] for m in messages[2:4]]
        assert page.json()["nextCursor"] == messages[3]["id"]
        listed = (await client.get("/agents/desk/contexts")).json()["contexts"]
        assert [(c["contextId"], c["title"], c["messageCount"]) for c in listed] == [
            ("ctx-desk", "hello", 5)
        ]
        async with AsyncAgentClient(server.url, agent="desk") as typed:
            read = [message async for message in typed.messages("ctx-desk", limit=2)]
        assert [(m.id, m.agent) for m in read] == [(m["id"], m.get("agent")) for m in messages]
        assert all(m.created_at is not None and m.created_at.tzinfo is not None for m in read)
        summary = (await client.get("/agents/desk/contexts/ctx-desk")).json()
        assert summary["messageCount"] == 5 and summary["status"] == "idle"
        # the swarm goes on where it was: back answers, remembering its own prompts only
        later = await send(client, "ctx-desk", message="and now")
        assert later["text"] == "back heard: hi there|and now"


async def test_regenerate_and_edit_rewind_the_members_that_answered(
    server: ServerProcess,
) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        await two_turns(client, "ctx-edit")
        before = await transcript(client, "ctx-edit")
        again = await send(client, "ctx-edit", regenerate=before[4]["id"])
        assert again["text"] == "back heard: hi there"  # its first answer is forgotten
        regenerated = await transcript(client, "ctx-edit")
        assert lines(regenerated) == lines(before)
        assert [m["id"] for m in regenerated[:4]] == [m["id"] for m in before[:4]]
        assert regenerated[4]["id"] != before[4]["id"]
        assert regenerated[4]["runId"] == again["runId"]
        # edit the prompt that was handed to back: front answers it, back forgets its turn
        edited = await send(client, "ctx-edit", replace=before[2]["id"], message="again")
        assert edited["agent"] == "front" and edited["text"] == "front heard: hello|again"
        assert lines(await transcript(client, "ctx-edit")) == [
            ("user", None, "hello"),
            ("assistant", "front", "front heard: hello"),
            ("user", None, "again"),
            ("assistant", "front", "front heard: hello|again"),
        ]
        handed = await send(client, "ctx-edit", message="to back later")
        assert handed["text"] == "back heard: later"
        missing = await client.post(
            SEND, json={"contextId": "ctx-edit", "regenerate": before[2]["id"]}
        )
        assert missing.status_code == 404
        assert missing.json()["error"]["code"] == "message_not_found"


async def test_fork_copies_a_swarm_conversation_and_its_members(server: ServerProcess) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        await two_turns(client, "ctx-source")
        source = await transcript(client, "ctx-source")
        forked = await client.post(
            "/agents/desk/contexts/ctx-source/fork",
            json={"messageId": source[1]["id"], "contextId": "ctx-copy"},
        )
        assert forked.status_code == 201, forked.text
        assert forked.json() == {"contextId": "ctx-copy"}
        copy = await transcript(client, "ctx-copy")
        assert [m["id"] for m in copy] == [m["id"] for m in source[:2]]
        # front answers in the copy (it spoke last there) and remembers only what was copied
        answer = await send(client, "ctx-copy", message="next")
        assert answer["text"] == "front heard: hello|next"
        handed = await send(client, "ctx-copy", message="to back first")
        assert handed["text"] == "back heard: first"
        assert len(await transcript(client, "ctx-source")) == 5  # the source is unchanged
        whole = await client.post("/agents/desk/contexts/ctx-source/fork", json={})
        assert whole.status_code == 201
        assert len(await transcript(client, str(whole.json()["contextId"]))) == 5
        taken = await client.post(
            "/agents/desk/contexts/ctx-source/fork", json={"contextId": "ctx-copy"}
        )
        assert taken.status_code == 409 and taken.json()["error"]["code"] == "context_exists"
        unknown = await client.post(
            "/agents/desk/contexts/ctx-source/fork", json={"messageId": "msg-" + "0" * 24}
        )
        assert unknown.status_code == 404
        assert unknown.json()["error"]["code"] == "message_not_found"
        nobody = await client.post("/agents/desk/contexts/ctx-nobody/fork", json={})
        assert nobody.status_code == 404
        assert nobody.json()["error"]["code"] == "context_not_found"


async def test_rollback_on_a_swarm_drops_the_whole_turn(server: ServerProcess) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        await send(client, "ctx-roll", message="m0")
        body = {"message": "to back pause 30", "contextId": "ctx-roll"}
        async with running_turn(client, body, "tool_call", "/agents/desk/stream") as (_, rest):
            with anyio.fail_after(10):  # past front's handoff, into back's slow tool
                async for frame in rest:
                    if frame.data.get("agent") == "back" and frame.event["type"] == "tool_call":
                        break
            taken = await client.post(
                SEND, json={"contextId": "ctx-roll", "message": "who", "multitask": "rollback"}
            )
            ended = await rest_of(rest)
        assert ended[-1].data["status"] == "cancelled"
        assert taken.status_code == 200, taken.text
        # front, where the dropped turn started, answers; it forgot the handoff turn
        assert taken.json()["agent"] == "front"
        assert taken.json()["text"] == "front heard: m0|who"
        assert lines(await transcript(client, "ctx-roll")) == [
            ("user", None, "m0"),
            ("assistant", "front", "front heard: m0"),
            ("user", None, "who"),
            ("assistant", "front", "front heard: m0|who"),
        ]
        handed = await send(client, "ctx-roll", message="to back x")
        assert handed["text"] == "back heard: x"  # back's cancelled turn left nothing
