"""Edit and regenerate (SPEC 3) through a real server, seen from the provider's side.

A declared agent talks to the fake OpenAI-compatible server, so each assertion is on
what the model was really sent: the history before the cut, then the new message; and
no message id ever reaches the provider. The Python client's conversation methods run
against the same server, and another principal gets ``404`` on every endpoint.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from agentkeel.client import AsyncAgentClient
from agentkeel.errors import ContextNotFoundError, MessageNotFoundError
from agentkeel.server import create_app
from e2e import serve_in_thread
from fakes.openai_server import FakeOpenAI, echo_responder

pytestmark = pytest.mark.anyio
KEY = "sk-e2e-edits"
ALICE = "alice-SECRET-KEY-edits-1"
BOB = "bob-SECRET-KEY-edits-2"


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI(api_key=KEY, responder=echo_responder)
    with fake.serve():
        yield fake


@pytest.fixture
def url(fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("E2E_OPENAI_KEY", KEY)
    monkeypatch.setenv("ALICE_API_KEY", ALICE)
    monkeypatch.setenv("BOB_API_KEY", BOB)
    document: dict[str, object] = {
        "agents": {
            "gpt": {
                "model": {
                    "provider": "openai",
                    "model": "gpt-e2e",
                    "baseUrl": fake_openai.base_url,
                    "apiKeyEnv": "E2E_OPENAI_KEY",
                    "maxRetries": 0,
                },
            }
        },
        "server": {
            "heartbeatSeconds": 1,
            "auth": {"apiKeys": {"alice": {"env": "ALICE_API_KEY"}, "bob": {"env": "BOB_API_KEY"}}},
        },
    }
    with serve_in_thread(create_app(document)) as served:
        yield served


def sent(fake: FakeOpenAI, index: int = -1) -> list[str]:
    """The contents of the messages of the provider request `index`."""
    messages = fake.requests[index].json["messages"]
    assert isinstance(messages, list)
    return [str(m["content"]) for m in messages if isinstance(m, dict)]


async def test_replace_and_regenerate_cut_what_the_model_sees(
    url: str, fake_openai: FakeOpenAI
) -> None:
    headers = {"Authorization": f"Bearer {ALICE}"}
    async with httpx.AsyncClient(base_url=url, timeout=20, headers=headers) as client:

        async def turn(body: dict[str, object]) -> httpx.Response:
            return await client.post("/agents/gpt/send", json=body)

        first = (await turn({"message": "one"})).json()
        context_id = first["contextId"]
        await turn({"message": "two", "contextId": context_id})
        await turn({"message": "three", "contextId": context_id})
        path = f"/agents/gpt/contexts/{context_id}/messages"
        before = (await client.get(path)).json()["messages"]
        edited = await turn({"contextId": context_id, "replace": before[2]["id"], "message": "2!"})
        after_edit = (await client.get(path)).json()["messages"]
        regenerated = await turn({"contextId": context_id, "regenerate": after_edit[3]["id"]})
        after_regenerate = (await client.get(path)).json()["messages"]
        wrong_role = await turn({"contextId": context_id, "regenerate": after_edit[0]["id"]})
        gone = await turn({"contextId": context_id, "replace": before[4]["id"], "message": "x"})
        refused = await turn({"contextId": context_id, "regenerate": "nope"})
        metrics = (await client.get("/metrics")).text
    assert edited.status_code == 200 and edited.json()["text"] == "echo: 2!"
    assert sent(fake_openai, 3) == ["one", "echo: one", "2!"]
    assert [m["text"] for m in after_edit] == ["one", "echo: one", "2!", "echo: 2!"]
    assert [m["id"] for m in after_edit[:2]] == [m["id"] for m in before[:2]]
    assert after_edit[2]["id"] not in {m["id"] for m in before}
    assert regenerated.status_code == 200
    assert sent(fake_openai, 4) == ["one", "echo: one", "2!"]  # the answer was cut off
    assert [m["text"] for m in after_regenerate] == ["one", "echo: one", "2!", "echo: 2!"]
    assert after_regenerate[3]["id"] != after_edit[3]["id"]
    assert len(fake_openai.requests) == 5  # the refused turns never reached the model
    assert [r.status_code for r in (wrong_role, gone)] == [404, 404]
    assert wrong_role.json()["error"]["code"] == gone.json()["error"]["code"] == "message_not_found"
    assert refused.status_code == 400
    assert all("msg-" not in str(request.json) for request in fake_openai.requests)
    assert 'agentkeel_history_edits_total{agent="gpt",kind="replace"} 1' in metrics
    assert 'agentkeel_history_edits_total{agent="gpt",kind="regenerate"} 1' in metrics


async def test_the_python_client_against_the_server(url: str, fake_openai: FakeOpenAI) -> None:
    async with AsyncAgentClient(url, agent="gpt", api_key=ALICE) as client:
        await client.send("hello")
        await client.send("again")
        messages = [message async for message in client.messages(limit=1)]
        summary = await client.get_context()
        listed = [item async for item in client.contexts(limit=1)]
        result = await client.send("edited", replace=messages[2].id)
        again = await client.send(None, regenerate=(await _last_id(client)))
        fork_id = await client.fork(messages[1].id)
        forked = [message async for message in client.messages(fork_id)]
        with pytest.raises(MessageNotFoundError):
            await client.fork("msg-" + "b" * 24)
    assert [m.text for m in messages] == ["hello", "echo: hello", "again", "echo: again"]
    assert summary.title == "hello" and summary.message_count == 4 and summary.status == "idle"
    assert [item.context_id for item in listed] == [summary.context_id]
    assert result.text == "echo: edited" and again.status == "completed"
    assert [m.id for m in forked] == [m.id for m in messages[:2]]
    assert sent(fake_openai) == ["hello", "echo: hello", "edited"]


async def _last_id(client: AsyncAgentClient) -> str:
    return [message async for message in client.messages()][-1].id


async def test_another_principal_finds_nothing(url: str) -> None:
    async with AsyncAgentClient(url, agent="gpt", api_key=ALICE) as alice:
        await alice.send("mine")
        context_id = alice.context_id
        assert context_id is not None
        message_id = [m async for m in alice.messages()][0].id
    headers = {"X-API-Key": BOB}
    base = f"/agents/gpt/contexts/{context_id}"
    async with httpx.AsyncClient(base_url=url, timeout=20, headers=headers) as bob:
        answers = [
            await bob.get(base),
            await bob.get(base + "/messages"),
            await bob.post(base + "/fork", json={}),
            await bob.post(
                "/agents/gpt/send",
                json={"contextId": context_id, "replace": message_id, "message": "x"},
            ),
            await bob.post(
                "/agents/gpt/send", json={"contextId": context_id, "regenerate": message_id}
            ),
        ]
        listed = (await bob.get("/agents/gpt/contexts")).json()
    codes = [(r.status_code, r.json()["error"]["code"]) for r in answers]
    assert codes == [(404, "context_not_found")] * 5
    assert listed == {"contexts": [], "nextCursor": None}
    async with AsyncAgentClient(url, agent="gpt", api_key=BOB, context_id=context_id) as client:
        with pytest.raises(ContextNotFoundError):
            await client.get_context()
