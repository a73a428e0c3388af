"""PartWriter: each native frame as the UI message stream parts AI SDK 6 and 7 parse."""

from __future__ import annotations

import json

from agentkeel.bindings.ai_sdk.parts import PartWriter
from ai_sdk.kit import Part, parse

RUN = "run-0123"


def _event(event: Part, **extra: object) -> Part:
    return {"contextId": "c", "runId": RUN, "event": event, **extra}


def _done(status: str = "completed", **extra: object) -> Part:
    usage = {"inputTokens": 3, "outputTokens": 4}
    return {"contextId": "c", "runId": RUN, "done": True, "status": status, "usage": usage, **extra}


def _write(*frames: Part, writer: PartWriter | None = None) -> list[Part]:
    writer = writer or PartWriter()
    out = b"".join(
        writer.done(frame, last=True) if frame.get("done") else writer.frame(frame)
        for frame in frames
    )
    return parse(out.decode("utf-8"))


def test_thinking_then_tokens_are_two_blocks_inside_a_step() -> None:
    parts = _write(
        _event({"type": "status", "status": "running"}),
        _event({"type": "step", "step": 1}),
        _event({"type": "thinking", "text": "hm"}),
        _event({"type": "token", "text": "a"}),
        _event({"type": "token", "text": "b"}),
        _done(),
    )
    assert parts == [
        {"type": "start", "messageId": RUN},
        {"type": "start-step"},
        {"type": "reasoning-start", "id": "reasoning-1"},
        {"type": "reasoning-delta", "id": "reasoning-1", "delta": "hm"},
        {"type": "reasoning-end", "id": "reasoning-1"},
        {"type": "text-start", "id": "text-2"},
        {"type": "text-delta", "id": "text-2", "delta": "a"},
        {"type": "text-delta", "id": "text-2", "delta": "b"},
        {"type": "text-end", "id": "text-2"},
        {"type": "finish-step"},
        {
            "type": "finish",
            "messageMetadata": {
                "runId": RUN,
                "status": "completed",
                "usage": {"inputTokens": 3, "outputTokens": 4},
            },
            "finishReason": "stop",
        },
    ]


def test_a_delta_template_escapes_whatever_the_text_holds() -> None:
    awkward = 'quote " backslash \\ newline \n tab \t unicode ✓ \u2028 end'
    parts = _write(_event({"type": "token", "text": awkward}), _done())
    assert [p["delta"] for p in parts if p["type"] == "text-delta"] == [awkward]


def test_a_new_step_closes_the_open_block_and_the_step() -> None:
    parts = _write(
        _event({"type": "step", "step": 1}),
        _event({"type": "token", "text": "x"}),
        _event({"type": "step", "step": 2}),
        _done(),
    )
    kinds = [p["type"] for p in parts]
    assert kinds == [
        *("start", "start-step", "text-start", "text-delta", "text-end", "finish-step"),
        *("start-step", "finish-step", "finish"),
    ]


def test_tools_show_their_name_and_null_input_and_output_unless_exposed() -> None:
    parts = _write(
        _event({"type": "tool_call", "id": "call-1", "name": "lookup"}),
        _event({"type": "tool_result", "id": "call-1", "name": "lookup", "status": "success"}),
        _event({"type": "tool_call", "id": "call-2", "name": "weather", "input": {"city": "Oslo"}}),
        _event(
            {
                "type": "tool_result",
                "id": "call-2",
                "name": "weather",
                "status": "success",
                "output": {"celsius": 4},
            }
        ),
        _done(),
    )
    assert parts[1:5] == [
        {
            "type": "tool-input-available",
            "toolCallId": "call-1",
            "toolName": "lookup",
            "input": None,
        },
        {"type": "tool-output-available", "toolCallId": "call-1", "output": None},
        {
            "type": "tool-input-available",
            "toolCallId": "call-2",
            "toolName": "weather",
            "input": {"city": "Oslo"},
        },
        {"type": "tool-output-available", "toolCallId": "call-2", "output": {"celsius": 4}},
    ]


def test_a_failed_tool_says_so_without_its_output_unless_exposed() -> None:
    parts = _write(
        _event({"type": "tool_call", "id": "call-1", "name": "lookup"}),
        _event({"type": "tool_result", "id": "call-1", "name": "lookup", "status": "error"}),
        _event({"type": "tool_call", "id": "call-2", "name": "shown", "input": {}}),
        _event(
            {
                "type": "tool_result",
                "id": "call-2",
                "name": "shown",
                "status": "error",
                "output": "no",
            }
        ),
        _done(),
    )
    errors = [p for p in parts if p["type"] == "tool-output-error"]
    assert errors == [
        {"type": "tool-output-error", "toolCallId": "call-1", "errorText": "the tool call failed"},
        {"type": "tool-output-error", "toolCallId": "call-2", "errorText": "no"},
    ]


def test_an_approval_is_a_tool_part_named_by_the_interrupt_and_its_request() -> None:
    interrupt = {
        "type": "interrupt",
        "id": "int-1",
        "kind": "approval",
        "tool": "delete_file",
        "prompt": "Run delete_file: a.txt",
    }
    parts = _write(_event(interrupt), _done("suspended"))
    assert parts[1:3] == [
        {
            "type": "tool-input-available",
            "toolCallId": "int-1",
            "toolName": "delete_file",
            "input": None,
            "providerMetadata": {"agentkeel": {"prompt": "Run delete_file: a.txt"}},
        },
        {"type": "tool-approval-request", "approvalId": "int-1", "toolCallId": "int-1"},
    ]
    assert parts[-1]["finishReason"] == "tool-calls"


def test_the_resumed_call_of_an_approval_keeps_the_part_the_client_holds() -> None:
    writer = PartWriter({"call-9": "int-1"})
    parts = _write(
        _event({"type": "tool_call", "id": "call-9", "name": "delete_file"}),
        _event({"type": "tool_result", "id": "call-9", "name": "delete_file", "status": "success"}),
        _done(),
        writer=writer,
    )
    assert parts[1] == {"type": "tool-output-available", "toolCallId": "int-1", "output": None}
    assert not any(p["type"] == "tool-input-available" for p in parts)


def test_a_question_to_the_person_is_a_data_part() -> None:
    question = {
        "type": "interrupt",
        "id": "int-2",
        "kind": "input",
        "tool": "ask",
        "prompt": "Why?",
    }
    parts = _write(_event(question), _done("suspended"))
    assert parts[1] == {
        "type": "data-interrupt",
        "id": "int-2",
        "data": {"id": "int-2", "kind": "input", "prompt": "Why?", "tool": "ask"},
    }


def test_a_failed_run_has_one_error_part_and_finishes_with_error() -> None:
    error = {"code": "model_error", "message": "the model failed"}
    with_frame = _write(_event({"type": "error", **error}), _done("failed", error=error))
    without_frame = _write(_done("failed", error=error))
    for parts in (with_frame, without_frame):
        assert [p for p in parts if p["type"] == "error"] == [
            {"type": "error", "errorText": "the model failed"}
        ]
        assert parts[-1]["finishReason"] == "error"


def test_a_cancelled_run_aborts() -> None:
    parts = _write(_event({"type": "token", "text": "par"}), _done("cancelled"))
    assert [p["type"] for p in parts] == ["start", "text-start", "text-delta", "text-end", "abort"]


def test_a_swarm_member_taking_over_is_message_metadata() -> None:
    parts = _write(
        _event({"type": "token", "text": "a"}, agent="triage"),
        _event({"type": "token", "text": "b"}, agent="triage"),
        _event({"type": "token", "text": "c"}, agent="billing"),
        _done(),
    )
    agents = [p["messageMetadata"] for p in parts if p["type"] == "message-metadata"]
    assert agents == [{"agent": "triage"}, {"agent": "billing"}]


def test_a_done_frame_that_is_not_the_last_only_closes_what_is_open() -> None:
    writer = PartWriter()
    raw = writer.frame(_event({"type": "token", "text": "a"})) + writer.done(
        _done("suspended"), last=False
    )
    events = [json.loads(line[6:]) for line in raw.decode().split("\n\n") if line]
    assert [e["type"] for e in events] == ["start", "text-start", "text-delta", "text-end"]
