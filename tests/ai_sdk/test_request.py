"""parse_chat_request: what a DefaultChatTransport body asks for, read from its last message."""

from __future__ import annotations

import pytest

from agentkeel.bindings.ai_sdk.request import (
    ApprovalAnswer,
    NewMessage,
    Regenerate,
    parse_chat_request,
)
from agentkeel.errors import InvalidRequestError
from ai_sdk.kit import Part, body, user


def _assistant(*parts: Part) -> Part:
    return {"id": "run-1", "role": "assistant", "parts": list(parts)}


def _approval(approval_id: str, state: str = "approval-responded", **approval: object) -> Part:
    return {
        "type": "tool-delete_file",
        "toolCallId": approval_id,
        "state": state,
        "approval": {"id": approval_id, **approval},
    }


def test_the_new_message_is_the_last_one_and_only_its_text_is_read() -> None:
    message: Part = {
        "id": "u-2",
        "role": "user",
        "metadata": {"any": "thing"},
        "parts": [
            {"type": "text", "text": "one "},
            {"type": "step-start"},
            {"type": "text", "text": "two"},
        ],
    }
    garbage: Part = {"not": "a message at all"}
    parsed = parse_chat_request(body("chat", [garbage, message], extra="ignored"))
    assert parsed.chat_id == "chat"
    assert parsed.action == NewMessage("u-2", "one two")


def test_an_approval_response_is_read_from_the_last_assistant_message() -> None:
    answered = _assistant(
        _approval("int-old", state="output-available", approved=True),
        _approval("int-new", approved=False, reason="no"),
    )
    parsed = parse_chat_request(body("chat", [user("x"), answered]))
    assert parsed.action == ApprovalAnswer("int-new", approved=False, reason="no")


def test_regenerate_needs_no_message_and_keeps_the_message_id() -> None:
    parsed = parse_chat_request(
        {"id": "chat", "messages": [], "trigger": "regenerate-message", "messageId": "run-1"}
    )
    assert parsed.action == Regenerate("run-1")
    bare = parse_chat_request({"id": "chat", "messages": [], "trigger": "regenerate-message"})
    assert bare.action == Regenerate(None)


@pytest.mark.parametrize(
    ("payload", "complaint"),
    [
        ([], "JSON object"),
        ({"messages": [user("x")]}, "id"),
        ({"id": "", "messages": [user("x")]}, "id"),
        ({"id": "c", "messages": "x"}, "messages"),
        ({"id": "c", "messages": []}, "no message"),
        ({"id": "c", "messages": [user("x")], "trigger": "resume-stream"}, "trigger"),
        ({"id": "c", "messages": [{"id": "s", "role": "system", "parts": []}]}, "neither"),
        ({"id": "c", "messages": [{"id": "u", "role": "user"}]}, "parts"),
        (
            {"id": "c", "messages": [{"id": "u", "role": "user", "parts": [{"type": "file"}]}]},
            "text",
        ),
        ({"id": "c", "messages": [user("   ")]}, "text"),
        ({"id": "c", "messages": [_assistant({"type": "text", "text": "hi"})]}, "neither"),
        ({"id": "c", "messages": [_assistant(_approval("int-1"))]}, "approved"),
        ({"id": "c", "messages": [user("x")], "messageId": "u-0"}, "editing"),
    ],
)
def test_what_cannot_be_a_turn_is_refused_with_the_reason(payload: object, complaint: str) -> None:
    with pytest.raises(InvalidRequestError, match=complaint):
        parse_chat_request(payload)
