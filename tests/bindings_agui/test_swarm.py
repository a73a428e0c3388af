"""A swarm over AG-UI: its members are subagents, parsed with ``ag-ui-protocol``'s models."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from ag_ui.core import Event, EventType
from pydantic import TypeAdapter

from agentkeel.server import create_app
from e2e import serve_in_thread, write_framework

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "framework.json"
EVENT = TypeAdapter(Event)


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    document = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    document["sessionDir"] = str(tmp_path / "sessions")
    document["checkpointer"] = {"dir": str(tmp_path / "checkpoints")}
    with serve_in_thread(create_app(write_framework(tmp_path, document))) as served:
        yield served


def run(url: str, thread: str, messages: list[dict[str, Any]], **extra: Any) -> list[Any]:
    body = {"threadId": thread, "runId": f"r-{len(messages)}", "messages": messages, **extra}
    with httpx.stream("POST", f"{url}/agents/helpdesk/ag-ui", json=body, timeout=30) as response:
        lines = [line for line in response.iter_lines() if line.startswith("data: ")]
    return [EVENT.validate_python(json.loads(line[6:])) for line in lines]


def test_swarm_members_are_subagents(url: str) -> None:
    events = run(url, "swarm-time", [{"id": "u1", "role": "user", "content": "What time is it?"}])
    assert events[-1].type == EventType.RUN_FINISHED and events[-1].outcome.type == "success"
    started = [e for e in events if e.type == EventType.SUBAGENT_STARTED]
    assert [e.name for e in started] == ["triage", "demo"]
    finished = [e for e in events if e.type == EventType.SUBAGENT_FINISHED]
    assert [e.subagent_run_id for e in finished] == [e.subagent_run_id for e in started]
    calls = [e for e in events if e.type == EventType.TOOL_CALL_START]
    member = {e.subagent_run_id: e.name for e in started}
    assert [(c.tool_call_name, member[c.subagent_run_id]) for c in calls] == [
        ("handoff_to_agent", "triage"),
        ("current_time", "demo"),
    ]


def test_an_approval_inside_a_member_suspends_the_subagent(url: str) -> None:
    events = run(
        url, "swarm-approve", [{"id": "u1", "role": "user", "content": "Delete notes.txt"}]
    )
    outcome = events[-1].outcome
    assert outcome.type == "interrupt"
    interrupt = outcome.interrupts[0]
    (suspended,) = [
        e for e in events if e.type == EventType.SUBAGENT_FINISHED and e.outcome.type == "suspended"
    ]
    assert suspended.outcome.interrupt_ids == [interrupt.id]
    assert interrupt.subagent_run_id == suspended.subagent_run_id
    resume = [{"interruptId": interrupt.id, "status": "resolved", "payload": True}]
    resumed = run(url, "swarm-approve", [], resume=resume)
    assert resumed[-1].type == EventType.RUN_FINISHED and resumed[-1].outcome.type == "success"
    kinds = [e.type for e in resumed]
    assert kinds[2] == EventType.SUBAGENT_STARTED and resumed[2].name == "demo"
    assert kinds[-2:] == [EventType.SUBAGENT_FINISHED, EventType.RUN_FINISHED]
    assert EventType.REASONING_MESSAGE_CONTENT in kinds  # the demo model thinks aloud
    text = "".join(e.delta for e in resumed if e.type == EventType.TEXT_MESSAGE_CONTENT)
    assert text.startswith("Done: deleted notes.txt")
    member = resumed[2].subagent_run_id
    attributed = [e for e in resumed if e.type.value.startswith(("TEXT_", "REASONING_", "TOOL_"))]
    assert {e.subagent_run_id for e in attributed} == {member}


def test_a_new_client_on_a_swarm_thread_gets_its_transcript(url: str) -> None:
    first = run(
        url, "swarm-snapshot", [{"id": "u1", "role": "user", "content": "What time is it?"}]
    )
    assert first[-1].type == EventType.RUN_FINISHED
    events = run(url, "swarm-snapshot", [])
    assert [e.type for e in events] == [
        EventType.RUN_STARTED,
        EventType.MESSAGES_SNAPSHOT,
        EventType.RUN_FINISHED,
    ]
    shown = events[1].messages
    native = httpx.get(f"{url}/agents/helpdesk/contexts/swarm-snapshot/messages", timeout=10)
    transcript = [m for m in native.json()["messages"] if m["text"]]
    assert [(m.id, m.role, m.content) for m in shown] == [
        (m["id"], m["role"], m["text"]) for m in transcript
    ]
    assert shown[0].role == "user" and shown[0].content == "What time is it?"
    assert shown[-1].role == "assistant" and shown[-1].content.startswith("It is ")
    assert transcript[-1]["agent"] == "demo"
