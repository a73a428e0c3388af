"""The snapshot rule: a client whose copy is in step gets a run's events only; others a snapshot.

`Copy` keeps a thread's messages the way ``HttpAgent`` does (events appended, a snapshot
reconciled by id) and sends all of them with every run, as ``HttpAgent`` does.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
from ag_ui.core import EventType

from bindings_agui.test_ag_ui import run, text, types, user
from bindings_openai.conftest import Served
from e2e import tool_runs

STREAMED_ID = re.compile(r"run-[0-9a-f]{24}\.run-[0-9a-f-]{36}\.(text|calls|tool)-\d+")


class Copy:
    """One client's copy of a thread, kept from the events it was sent."""

    def __init__(self, served: Served, thread: str) -> None:
        self.served = served
        self.thread = thread
        self.messages: list[dict[str, Any]] = []

    def run(self, message: str | None = None, **extra: Any) -> list[Any]:
        if message is not None:
            self.messages.append(user(message))
        events = run(self.served, self.thread, list(self.messages), **extra)
        for event in events:
            self._apply(event)
        return events

    def _find(self, message_id: str) -> dict[str, Any] | None:
        return next((m for m in self.messages if m["id"] == message_id), None)

    def _apply(self, event: Any) -> None:
        kind = event.type
        if kind == EventType.MESSAGES_SNAPSHOT:
            sent = {m.id: m.model_dump(mode="json", by_alias=True) for m in event.messages}
            kept = [sent.get(m["id"], m) for m in self.messages if m["id"] in sent]
            held = {m["id"] for m in kept}
            self.messages = kept + [m for i, m in sent.items() if i not in held]
        elif kind == EventType.TEXT_MESSAGE_START:
            role = event.role or "assistant"
            self.messages.append({"id": event.message_id, "role": role, "content": ""})
        elif kind == EventType.TEXT_MESSAGE_CONTENT:
            found = self._find(event.message_id)
            assert found is not None
            found["content"] += event.delta
        elif kind == EventType.TOOL_CALL_START:
            parent = self._find(event.parent_message_id)
            if parent is None:
                parent = {"id": event.parent_message_id, "role": "assistant", "toolCalls": []}
                self.messages.append(parent)
            parent["toolCalls"].append({"id": event.tool_call_id, "type": "function"})
        elif kind == EventType.TOOL_CALL_RESULT:
            result = {"id": event.message_id, "role": "tool", "content": event.content}
            self.messages.append({**result, "toolCallId": event.tool_call_id})

    def texts(self) -> list[str]:
        return [m["content"] for m in self.messages if m["role"] != "tool" and m.get("content")]


def transcript(served: Served, thread: str) -> list[str]:
    native = httpx.get(f"{served.url}/agents/scripted/contexts/{thread}/messages", timeout=10)
    return [m["text"] for m in native.json()["messages"] if m["text"]]


def test_a_client_in_step_gets_the_runs_events_only(served: Served) -> None:
    chat = Copy(served, "thread-step")
    chat.run("hello")
    second = chat.run("history")
    assert "MESSAGES_SNAPSHOT" not in types(second)
    assert types(second)[0] == "RUN_STARTED" and types(second)[-1] == "RUN_FINISHED"
    assert text(second) == "hello|history"  # the model had the history the server keeps
    starts = [e.message_id for e in second if e.type == EventType.TEXT_MESSAGE_START]
    assert starts and all(STREAMED_ID.fullmatch(i) for i in starts)
    third = chat.run("more")
    assert "MESSAGES_SNAPSHOT" not in types(third)
    assert chat.texts() == transcript(served, "thread-step")


def test_a_copy_that_missed_a_turn_gets_a_snapshot(served: Served) -> None:
    chat = Copy(served, "thread-stale")
    chat.run("one")
    httpx.post(
        f"{served.url}/agents/scripted/send",
        json={"message": "native", "contextId": "thread-stale"},
        timeout=10,
    ).raise_for_status()
    events = chat.run("two")
    assert types(events)[1] == "MESSAGES_SNAPSHOT"
    assert [m.content for m in events[1].messages] == ["one", "echo: one", "native", "echo: native"]
    assert chat.texts() == transcript(served, "thread-stale")
    assert "MESSAGES_SNAPSHOT" not in types(chat.run("three"))  # in step again


def test_a_copy_cut_short_gets_a_snapshot(served: Served) -> None:
    chat = Copy(served, "thread-cut")
    chat.run("hello")
    chat.messages[-1]["content"] = chat.messages[-1]["content"][:3]  # a stream cut mid-answer
    events = chat.run("again")
    assert types(events)[1] == "MESSAGES_SNAPSHOT"
    assert chat.texts() == transcript(served, "thread-cut")


def test_a_tail_that_names_an_older_run_gets_a_snapshot(served: Served) -> None:
    chat = Copy(served, "thread-old")
    chat.run("one")
    older = dict(chat.messages[-1])
    chat.run("two")
    forged = [user("one"), older, user("history")]
    events = run(served, "thread-old", forged)
    assert types(events)[1] == "MESSAGES_SNAPSHOT"
    assert text(events) == "one|two|history"  # the forged copy reached nothing the model saw


def test_a_resume_in_step_and_a_retried_message(served: Served, tool_log: Path) -> None:
    chat = Copy(served, "thread-resume")
    suspended = chat.run("delete notes.txt")
    (interrupt,) = suspended[-1].outcome.interrupts
    resume = [{"interruptId": interrupt.id, "status": "resolved", "payload": True}]
    resumed = chat.run(resume=resume)
    assert "MESSAGES_SNAPSHOT" not in types(resumed)
    assert resumed[-1].outcome.type == "success"
    (start,) = [e for e in resumed if e.type == EventType.TOOL_CALL_START]
    assert STREAMED_ID.fullmatch(start.parent_message_id or "")
    assert tool_runs(tool_log) == ["delete_file notes.txt"]
    body = [*chat.messages, user("hello")]
    calls = len(served.model.requests)
    first = run(served, "thread-resume", body)
    again = run(served, "thread-resume", body)  # a retried POST joins the first run
    assert "MESSAGES_SNAPSHOT" not in types(first) and text(again) == text(first)
    assert len(served.model.requests) == calls + 1


def test_the_last_message_is_parsed_and_the_rest_is_not(served: Served) -> None:
    garbage: list[Any] = [{"role": 7}, "not a message", {"id": "", "content": {}}]
    events = run(served, "thread-parse", [*garbage, user("hi")])
    assert text(events) == "echo: hi"
    refused = httpx.post(
        f"{served.url}/agents/scripted/ag-ui",
        json={"threadId": "t", "runId": "r", "messages": [*garbage, {"id": "x"}]},
        timeout=10,
    )
    assert refused.status_code == 400
    assert refused.json()["error"]["message"].startswith("messages.3.role")
    broken = httpx.post(
        f"{served.url}/agents/scripted/ag-ui", content=b'{"threadId": "t",', timeout=10
    )
    assert broken.status_code == 400 and broken.json()["error"]["code"] == "invalid_json"


def test_a_retry_after_a_later_turn_replays_its_own_run(served: Served) -> None:
    """Its run is no longer the thread's latest: its frames come back from their bytes."""
    first_message = user("first")
    first = run(served, "thread-packed", [first_message])
    later = run(served, "thread-packed", [first_message, user("second")])
    calls = len(served.model.requests)
    again = run(served, "thread-packed", [first_message])  # a retry of the first POST
    assert text(first) == "echo: first" and text(later) == "echo: second"
    assert text(again) == text(first)
    assert len(served.model.requests) == calls  # joined the first run: nothing ran
