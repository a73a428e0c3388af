"""An AG-UI body is decoded without building the client's copy of the thread.

Only the top-level keys and the last two messages become Python values; every earlier
message is validated as JSON and left as an empty placeholder. What the fast decoder
does not take is decoded whole, so the route refuses exactly what the server's own
decoder refuses, in AG-UI's error shape.
"""

from __future__ import annotations

import json
import tracemalloc
import uuid
from typing import Any

import httpx
import pytest
from ag_ui.core import AssistantMessage, RunAgentInput, UserMessage

from agentkeel.bindings.agui.body import decode_run_input
from agentkeel.bindings.agui.request import parse_run_input
from agentkeel.json_decode import decode_json
from bindings_agui.test_ag_ui import EVENT, text, user
from bindings_openai.conftest import Served

ROUTE = "/agents/scripted/ag-ui"


def long_thread(count: int, size: int = 200) -> list[Any]:
    """A client's copy of `count` messages, as ag-ui-protocol's models serialize them."""
    messages: list[Any] = []
    for index in range(count):
        words = f"message {index} " + "x" * size
        if index % 2:
            messages.append(AssistantMessage(id=f"a-{index}", content=words))
        else:
            messages.append(UserMessage(id=f"u-{index}", content=words))
    return messages


def posted(messages: list[Any], new: str) -> bytes:
    """What a client posts: a RunAgentInput built and serialized by ag-ui-protocol."""
    thread = [*messages, UserMessage(id=f"u-{uuid.uuid4()}", content=new)]
    body = RunAgentInput(
        thread_id=f"thread-{uuid.uuid4()}",
        run_id=f"run-{uuid.uuid4()}",
        state={},
        messages=thread,
        tools=[],
        context=[],
        forwarded_props={},
    )
    return body.model_dump_json(by_alias=True, exclude_none=True).encode()


def test_only_the_last_two_messages_are_decoded() -> None:
    body = posted(long_thread(50), "the new turn")
    decoded = decode_run_input(body)
    assert isinstance(decoded, dict)
    whole = json.loads(body)
    assert {key: value for key, value in decoded.items() if key != "messages"} == {
        key: value for key, value in whole.items() if key != "messages"
    }
    sent = decoded["messages"]
    assert len(sent) == 51
    assert list(sent[-2:]) == whole["messages"][-2:]
    assert all(item == {} for item in sent[:-2])
    parsed = parse_run_input(decoded)
    assert parsed.last_user is not None and parsed.last_user.text() == "the new turn"
    assert parsed.tail is not None and parsed.tail.id == "a-49"


def test_earlier_messages_never_become_python_objects() -> None:
    """Decoding allocates a fraction of what the copy would take as Python values."""
    body = posted(long_thread(1000, size=2000), "go")
    whole, lazy = _allocated(decode_json, body), _allocated(decode_run_input, body)
    assert whole > len(body)  # the whole decode builds every message's text
    assert lazy < len(body) / 10, (lazy, len(body))


def _allocated(decode: Any, body: bytes) -> int:
    tracemalloc.start()
    try:
        decode(body)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


ACCEPTED = [
    b'{"threadId": "t", "messages": []}',
    b'{"messages": [{"id": "a"}]}',
    b'{"messages": [1, {"id": "a"}, {"id": "b"}]}',  # an earlier element not an object
    b'{"messages": "x"}',
    b'{"messages": null, "a": 1e400}',
    b'\xef\xbb\xbf{"messages": [{}, {}, {}]}',
    b'{"messages": [{"c": "\\ud800"}, {}, {}]}',
    b'{"messages": [{"c": "NaN is a word"}, {}, {}]}',
    b'{"messages": [{"a": 1}], "messages": [{}, {"b": 2}, {"c": 3}]}',
    b'{"state": ' + b"[" * 300 + b"]" * 300 + b', "messages": [{}, {}, {}]}',
    b"[1, 2]",
]
REFUSED = [
    b"",
    b'{"messages": [{"c": NaN}, {}, {}]}',
    b'{"messages": [{"c": Infinity}, {}, {}]}',
    b'{"messages": [{"c": "x"]}, {}, {}]}',
    b'{"messages": [{"c": "a\x01b"}, {}, {}]}',
    b'{"messages": [{"c": "\xff"}, {}, {}]}',
    b'{"messages": [{}, {}, {}]}x',
    b'{"messages": [{}, {}, {},]}',
    b'{"threadId": "t",',
]


@pytest.mark.parametrize("body", ACCEPTED)
def test_accepted_as_the_whole_decoder_accepts(body: bytes) -> None:
    decoded, whole = decode_run_input(body), decode_json(body)
    if isinstance(whole, dict) and isinstance(decoded, dict):
        sent, kept = whole.get("messages"), decoded.get("messages")
        if isinstance(sent, list) and isinstance(kept, tuple):
            assert len(kept) == len(sent) and list(kept[-2:]) == sent[-2:]
            whole, decoded = {**whole, "messages": 0}, {**decoded, "messages": 0}
    assert decoded == whole


@pytest.mark.parametrize("body", REFUSED)
def test_refused_as_the_whole_decoder_refuses(body: bytes) -> None:
    with pytest.raises(ValueError):
        decode_json(body)
    with pytest.raises(ValueError):
        decode_run_input(body)


def test_a_long_thread_runs_its_last_message_only(served: Served) -> None:
    thread = long_thread(700)
    body = posted(thread, "hi")
    with httpx.stream(
        "POST",
        f"{served.url}{ROUTE}",
        content=body,
        timeout=30,
        headers={"content-type": "application/json"},
    ) as response:
        assert response.status_code == 200
        lines = [line for line in response.iter_lines() if line.startswith("data: ")]
    events = [EVENT.validate_python(json.loads(line[6:])) for line in lines]
    assert text(events) == "echo: hi"
    seen = served.model.requests[-1].messages
    assert [m.text for m in seen if "message" in m.text] == []  # nor does the copy


def test_malformed_long_bodies_get_ag_uis_error_shape(served: Served) -> None:
    good = posted(long_thread(700), "hi")
    start = good.index(b'"message 350 ')
    end = good.index(b'"', start + 1) + 1
    assert json.loads(good[:start] + b'"text"' + good[end:])  # a value can go there
    bodies = {
        "cut short": good[: len(good) // 2],
        "NaN in an early message": good[:start] + b"NaN" + good[end:],
        "a broken early message": good[:start] + b'"text"}' + good[end:],
    }
    for why, body in bodies.items():
        refused = httpx.post(f"{served.url}{ROUTE}", content=body, timeout=30)
        assert refused.status_code == 400, why
        assert refused.json() == {"error": {"code": "invalid_json", "message": "not JSON"}}, why
    odd = json.loads(posted(long_thread(10), "hi"))
    odd["messages"][-2] = {"id": "x"}  # the client's tail is a hint: dropped when odd
    assert httpx.post(f"{served.url}{ROUTE}", json=odd, timeout=30).status_code == 200
    last_bad = json.loads(posted(long_thread(10), "hi"))
    last_bad["messages"][-1] = {"id": "x"}
    refused = httpx.post(f"{served.url}{ROUTE}", json=last_bad, timeout=30)
    assert refused.status_code == 400
    assert refused.json()["error"]["message"].startswith("messages.10.role")


def test_the_body_size_limit_still_applies(served: Served) -> None:
    body = posted(long_thread(3000, size=400), "hi")
    assert len(body) > 1_048_576
    refused = httpx.post(f"{served.url}{ROUTE}", content=body, timeout=30)
    assert refused.status_code == 413
    assert refused.json()["error"]["code"] == "payload_too_large"


def test_run_input_is_read_as_before() -> None:
    """The last two messages keep every check parse_run_input made of them."""
    for body in (posted(long_thread(4), "again"), posted([], "first")):
        assert parse_run_input(decode_run_input(body)) == parse_run_input(json.loads(body))
    resume = json.dumps({"threadId": "t", "runId": "r", "messages": [user("x")], "resume": []})
    assert parse_run_input(decode_run_input(resume.encode())).resume == []
