"""The native event vocabulary in A2A's words (docs/a2a.md's table), frame by frame."""

from __future__ import annotations

import json

from a2a.types import (
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a.utils import proto_utils
from google.protobuf.json_format import MessageToDict

from agentkeel.a2a.mapping import Event, Mapped, StreamMapper, TextChunk, status_time
from agentkeel.a2a.stream import event_result
from agentkeel.messages import JSONObject


def frame(kind: str, agent: str | None = None, **fields: str | int) -> JSONObject:
    event: JSONObject = {"type": kind, **fields}
    data: JSONObject = {"contextId": "ctx-1", "runId": "run-1", "event": event}
    if agent is not None:
        data["agent"] = agent
    return data


def done(status: str, text: str, **fields: JSONObject) -> JSONObject:
    data: JSONObject = {"contextId": "ctx-1", "runId": "run-1", "done": True, "status": status}
    data["text"] = text
    data.update(fields)
    return data


def shown(events: list[Mapped]) -> list[JSONObject]:
    """The events as a client reads them, without timestamps."""
    results = [event_result(event) for event in events]
    for result in results:
        update = result.get("statusUpdate")
        if isinstance(update, dict) and isinstance(update["status"], dict):
            update["status"].pop("timestamp", None)
    return results


def chunk(text: str, *, append: bool = False, last: bool = False) -> JSONObject:
    update: JSONObject = {
        "taskId": "run-1",
        "contextId": "ctx-1",
        "artifact": {"artifactId": "response", "name": "response", "parts": [{"text": text}]},
    }
    if append:
        update["append"] = True
    if last:
        update["lastChunk"] = True
    return {"artifactUpdate": update}


def working(details: JSONObject | None = None) -> JSONObject:
    update: JSONObject = {
        "taskId": "run-1",
        "contextId": "ctx-1",
        "status": {"state": "TASK_STATE_WORKING"},
    }
    if details is not None:
        update["metadata"] = {"agentkeel": details}
    return {"statusUpdate": update}


def test_a_run_with_thinking_a_tool_and_two_model_steps() -> None:
    mapper = StreamMapper("run-1", "ctx-1")
    first = mapper.batch(
        [
            frame("status", status="running"),
            frame("step", step=1),
            frame("thinking", text="hmm"),
            frame("token", text="Let me "),
            frame("token", text="look."),
            frame("tool_call", id="call-1", name="get_weather"),
        ]
    )
    second = mapper.batch(
        [
            frame("tool_result", id="call-1", name="get_weather", status="success"),
            frame("step", step=2),
            frame("token", text="It is "),
            frame("token", text="4 °C."),
            done("completed", "It is 4 °C."),
        ]
    )
    assert json.loads(json.dumps(shown(first))) == [
        working(),
        working({"type": "thinking", "text": "hmm"}),
        chunk("Let me look."),
        working({"type": "tool_call", "id": "call-1", "name": "get_weather"}),
    ]
    completed = {
        "taskId": "run-1",
        "contextId": "ctx-1",
        "status": {"state": "TASK_STATE_COMPLETED"},
    }
    assert shown(second) == [
        working(
            {"type": "tool_result", "id": "call-1", "name": "get_weather", "status": "success"}
        ),
        chunk("It is 4 °C.", last=True),  # a new model step replaces the text
        {"statusUpdate": completed},
    ]


def test_chunks_append_and_the_end_repairs_a_changed_text() -> None:
    mapper = StreamMapper("run-1", "ctx-1")
    assert shown(mapper.batch([frame("token", text="a")])) == [chunk("a")]
    assert shown(mapper.batch([frame("token", text="b")])) == [chunk("b", append=True)]
    end = shown(mapper.batch([done("completed", "ab!")]))
    assert end[0] == chunk("ab!", last=True)  # append unset: it replaces the artifact


def test_suspended_failed_and_swarm_frames() -> None:
    interrupt: JSONObject = {
        "id": "int-1",
        "kind": "approval",
        "tool": "delete_file",
        "prompt": "Run delete_file: Delete the file notes.txt",
    }
    events = StreamMapper("run-1", "ctx-1").batch(
        [
            frame("tool_call", id="c", name="delete_file", agent="ops"),
            done("suspended", "", interrupt=interrupt),
        ]
    )
    assert shown(events)[0] == working(
        {"type": "tool_call", "id": "c", "name": "delete_file", "agent": "ops"}
    )
    final = events[-1]
    assert isinstance(final, TaskStatusUpdateEvent)
    assert final.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    parts = MessageToDict(final.status.message)["parts"]
    question = "Run delete_file: Delete the file notes.txt\nApprove? Answer yes or no."
    assert parts == [{"text": question}, {"data": {"interrupt": interrupt}}]

    failed = StreamMapper("run-1", "ctx-1").batch(
        [done("failed", "", error={"code": "model_error", "message": "the model is down"})]
    )
    assert isinstance(failed[-1], TaskStatusUpdateEvent)
    assert failed[-1].status.state == TaskState.TASK_STATE_FAILED
    assert failed[-1].status.message.parts[0].text == "the model is down"


def test_the_direct_encoding_is_the_sdks() -> None:
    chunks = [
        TextChunk("run-1", "ctx-1", "é", True, True),
        TextChunk("run-1", "ctx-1", "", False, False),
    ]
    events: list[Event] = [chunk.to_event() for chunk in chunks]
    events += [
        TaskStatusUpdateEvent(
            task_id="run-1",
            context_id="ctx-1",
            status=TaskStatus(state=TaskState.TASK_STATE_WORKING, timestamp=status_time()),
            metadata={"agentkeel": {"type": "tool_call", "id": "c", "name": "x"}},
        ),
        TaskStatusUpdateEvent(
            task_id="run-1",
            context_id="ctx-1",
            status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED, timestamp=status_time(1.5)),
        ),
    ]
    direct: list[Mapped] = [*chunks, *events[2:]]
    for fast, event in zip(direct, events, strict=True):
        sdk = MessageToDict(
            proto_utils.to_stream_response(event), preserving_proto_field_name=False
        )
        assert event_result(fast) == sdk
