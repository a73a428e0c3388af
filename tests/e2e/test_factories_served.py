"""What a ``factory`` definition may build and refuse, and what DELETE then forgets.

The factories below are imported by framework.json as ``e2e.test_factories_served:…``,
exactly as a user's would be.
"""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette

from agentkeel import Agent, ConfigurationError, ContextRefusedError, ScriptedModel, Swarm
from agentkeel.framework import CATALOG_CONTEXT_ID, load_framework
from agentkeel.server import create_app
from e2e import brain, scripted_agent, serve_in_thread, stream_turn

pytestmark = pytest.mark.anyio
CALLS = "AGENTKEEL_E2E_FACTORY_CALLS"


def _member(name: str) -> Agent:
    return Agent(ScriptedModel([brain], repeat=True), name=name)


def desk_swarm(context_id: str) -> Swarm:
    """A factory that returns a Swarm (not declared as a swarm in framework.json)."""
    del context_id
    return Swarm([_member("front"), _member("back")], name="desk")


_SHARED = scripted_agent("shared")


def shared_agent(context_id: str) -> Agent:
    """A broken factory: one Agent for every context."""
    del context_id
    return _SHARED


def guarded_agent(context_id: str) -> Agent:
    """Refuses contexts that do not belong to alice; logs every call."""
    calls = os.environ.get(CALLS)
    if calls:
        with open(calls, "a", encoding="utf-8") as handle:
            handle.write(context_id + "\n")
    if not context_id.startswith("ctx-alice-"):
        raise ContextRefusedError(f"context {context_id!r} is not one of alice's")
    return scripted_agent(context_id)


def _app(tmp_path: Path, agents: dict[str, object]) -> Starlette:
    return create_app(load_framework({"agents": agents, "sessionDir": str(tmp_path / "sessions")}))


def _stored_names(tmp_path: Path) -> list[str]:
    return sorted(path.name for path in (tmp_path / "sessions").rglob("*"))


async def test_delete_forgets_every_member_of_a_swarm_a_factory_built(tmp_path: Path) -> None:
    app = _app(tmp_path, {"desk": {"factory": "e2e.test_factories_served:desk_swarm"}})
    with serve_in_thread(app) as url:
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            body = {"message": "remember me", "contextId": "ctx-desk"}
            first = await client.post("/agents/desk/send", json=body)
            assert first.json()["agent"] == "front"  # the SendResult names the member
            streamed = await stream_turn(client, "desk", {"message": "hi", "contextId": "ctx-desk"})
            assert streamed[-1].done and streamed[-1].data["agent"] == "front"  # and `done`
            assert any("desk--front" in name for name in _stored_names(tmp_path))
            deleted = await client.delete("/agents/desk/contexts/ctx-desk")
            assert deleted.status_code == 204
            assert not [n for n in _stored_names(tmp_path) if "ctx-desk" in n]
            again = await client.post(
                "/agents/desk/send", json={"message": "history", "contextId": "ctx-desk"}
            )
    assert again.json()["text"] == "history"  # nothing of the old conversation came back


async def test_delete_of_a_swarm_after_a_restart_forgets_its_members(tmp_path: Path) -> None:
    agents: dict[str, object] = {"desk": {"factory": "e2e.test_factories_served:desk_swarm"}}
    with serve_in_thread(_app(tmp_path, agents)) as url:
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            await client.post("/agents/desk/send", json={"message": "hi", "contextId": "ctx-r"})
    with serve_in_thread(_app(tmp_path, agents)) as url:
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            deleted = await client.delete("/agents/desk/contexts/ctx-r")
    assert deleted.status_code == 204
    assert not [name for name in _stored_names(tmp_path) if "ctx-r" in name]


async def test_a_factory_that_shares_one_agent_is_refused(tmp_path: Path) -> None:
    app = _app(tmp_path, {"broken": {"factory": "e2e.test_factories_served:shared_agent"}})
    with serve_in_thread(app) as url:
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            first = await client.post(
                "/agents/broken/send", json={"message": "my secret", "contextId": "ctx-a"}
            )
            second = await client.post(
                "/agents/broken/send", json={"message": "history", "contextId": "ctx-b"}
            )
    assert first.status_code == 200
    assert second.status_code == 500
    error = second.json()["error"]
    assert error["code"] == "agent_shared" and "'broken'" in error["message"]
    assert "my secret" not in second.text


async def test_a_factory_refuses_a_context_with_403_and_may_refuse_the_catalog_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = tmp_path / "calls.log"
    monkeypatch.setenv(CALLS, str(calls))
    app = _app(tmp_path, {"guarded": {"factory": "e2e.test_factories_served:guarded_agent"}})
    # checked at start with the reserved id only, whose refusal does not stop the start
    assert calls.read_text(encoding="utf-8").splitlines() == [CATALOG_CONTEXT_ID]
    with serve_in_thread(app) as url:
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            assert (await client.get("/agents")).json()["agents"][0]["skills"] == []
            refused = await client.post(
                "/agents/guarded/send", json={"message": "hi", "contextId": "ctx-bob-1"}
            )
            served = await client.post(
                "/agents/guarded/send", json={"message": "hi", "contextId": "ctx-alice-1"}
            )
            listed = (await client.get("/agents")).json()["agents"]
    assert refused.status_code == 403
    assert refused.json()["error"] == {
        "code": "context_forbidden",
        "message": "context 'ctx-bob-1' is not one of alice's",
    }
    assert served.status_code == 200 and served.json()["text"] == "echo: hi"
    assert calls.read_text(encoding="utf-8").splitlines() == [
        CATALOG_CONTEXT_ID,
        "ctx-bob-1",
        "ctx-alice-1",
    ]
    [guarded] = listed
    assert guarded["skills"] == ["delete_file", "lookup", "pause"]  # learned from a real build


DEMO = {"model": {"provider": "demo"}}


@pytest.mark.parametrize(
    ("agents", "key", "words"),
    [
        (
            {"desk": {"swarm": {"members": [{"name": "front", **DEMO}]}}, "desk--front": DEMO},
            "agents.desk--front",
            "session of member 'front' of 'desk'",
        ),
        (  # a factory may return a swarm: its definition's member names are taken too
            {"desk": {"factory": "e2e.test_factories_served:desk_swarm"}, "desk--back": DEMO},
            "agents.desk--back",
            "session of member 'back' of 'desk'",
        ),
        ({"a2a-task-index": DEMO}, "agents.a2a-task-index", "reserved"),
    ],
)
def test_a_name_that_would_share_sessions_stops_load_framework(
    agents: dict[str, object], key: str, words: str
) -> None:
    with pytest.raises(ConfigurationError) as info:
        load_framework({"agents": agents})
    assert f"<framework>: {key}: " in str(info.value) and words in str(info.value)
