"""A swarm declared in framework.json is served on the native wire exactly like an agent."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agentkeel import ConfigurationError
from agentkeel.framework import load_framework

from . import Frame, ServerProcess, stream_turn, write_framework

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "framework.json"


def example_framework(folder: Path) -> Path:
    document = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    document["sessionDir"] = str(folder / "sessions")
    document["checkpointer"] = {"dir": str(folder / "checkpoints")}
    return write_framework(folder, document)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    process = ServerProcess(example_framework(tmp_path))
    process.start()
    try:
        yield process
    finally:
        process.stop()


def agents_of(frames: list[Frame]) -> list[object]:
    return [f.data.get("agent") for f in frames if not f.done]


@pytest.mark.anyio
async def test_a_swarm_turn_streams_frames_tagged_with_the_member(server: ServerProcess) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        listing = (await client.get("/agents")).json()["agents"]
        helpdesk = next(a for a in listing if a["name"] == "helpdesk")
        assert "current_time" in helpdesk["skills"] and "handoff_to_agent" not in helpdesk["skills"]
        frames = await stream_turn(client, "helpdesk", {"message": "What time is it?"})
        done = frames[-1]
        assert done.done and done.data["status"] == "completed"
        assert str(done.data["text"]).startswith("It is ")
        tagged = agents_of(frames)
        assert set(tagged) == {"triage", "demo"}
        assert tagged.index("demo") > tagged.index("triage")
        calls = [f.event for f in frames if not f.done and f.event["type"] == "tool_call"]
        assert [(c["name"], f) for c, f in zip(calls, ["triage", "demo"], strict=True)] == [
            ("handoff_to_agent", "triage"),
            ("current_time", "demo"),
        ]
        assert all(f.data["contextId"] == done.data["contextId"] for f in frames)
        context_id = done.data["contextId"]
        second = await client.post(
            "/agents/helpdesk/send",
            json={"message": "Remember that my favourite colour is blue", "contextId": context_id},
        )
        assert second.status_code == 200
        assert second.json()["text"] == "I'll remember that your favourite colour is blue."


@pytest.mark.anyio
async def test_an_approval_inside_a_member_survives_a_restart(server: ServerProcess) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        frames = await stream_turn(client, "helpdesk", {"message": "Delete notes.txt"})
        done = frames[-1].data
        assert done["status"] == "suspended"
        interrupt = done["interrupt"]
        assert isinstance(interrupt, dict) and interrupt["tool"] == "delete_file"
        interrupts = [f for f in frames if not f.done and f.event["type"] == "interrupt"]
        assert interrupts[0].data["agent"] == "demo"
        context_id = done["contextId"]
    server.stop()
    server.start()
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        refused = await client.post(
            "/agents/helpdesk/send", json={"message": "hello", "contextId": context_id}
        )
        assert refused.status_code == 409
        assert refused.json()["error"]["code"] == "interrupt_pending"
        resumed = await client.post(
            "/agents/helpdesk/send",
            json={
                "contextId": context_id,
                "resume": {"interruptId": interrupt["id"], "decision": {"approved": True}},
            },
        )
        assert resumed.status_code == 200, resumed.text
        body = resumed.json()
        assert body["status"] == "completed" and body["runId"] == done["runId"]
        assert body["text"].startswith("Done: deleted notes.txt")
        deleted = await client.delete(f"/agents/helpdesk/contexts/{context_id}")
        assert deleted.status_code == 204
        gone = await client.delete(f"/agents/helpdesk/contexts/{context_id}")
        assert gone.status_code == 404


def test_a_swarm_naming_an_unknown_member_stops_the_start(tmp_path: Path) -> None:
    document = {
        "agents": {
            "desk": {"swarm": {"members": ["nobody"]}},
        }
    }
    with pytest.raises(ConfigurationError) as info:
        load_framework(write_framework(tmp_path, document))
    assert "agents.desk.swarm.members[0]" in str(info.value)
    assert str(tmp_path / "framework.json") in str(info.value)
