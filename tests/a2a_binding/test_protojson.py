"""The direct ProtoJSON writers give exactly what protobuf's generic encoder gives."""

from __future__ import annotations

import pytest
from a2a.types.a2a_pb2 import (
    Artifact,
    Message,
    Part,
    Role,
    SendMessageRequest,
    Task,
    TaskState,
    TaskStatus,
)
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.struct_pb2 import Struct, Value
from google.protobuf.timestamp_pb2 import Timestamp

from agentkeel.a2a.mapping import status_time
from agentkeel.a2a.protojson import message_json, send_request, task_json, timestamp_json


def _struct() -> Struct:
    data = Struct()
    data.update({"city": "Lyon", "days": 3})
    return data


MESSAGES = [
    Message(
        message_id="m1",
        context_id="c1",
        task_id="t1",
        role=Role.ROLE_USER,
        parts=[Part(text="hello there")],
    ),
    Message(message_id="m2", role=Role.ROLE_AGENT, parts=[Part(text=""), Part(text="é ✓")]),
    Message(message_id="m3", parts=[Part(text="x", media_type="text/plain")]),
    Message(message_id="m4", parts=[Part(url="https://example.com/a.txt")]),
    Message(message_id="m5", parts=[Part(data=Value(struct_value=_struct()))]),
    Message(message_id="m6", metadata=_struct(), parts=[Part(text="a")]),
    Message(message_id="m7", extensions=["urn:x"], reference_task_ids=["t0"]),
    Message(parts=[Part()]),
    Message(),
]


@pytest.mark.parametrize("message", MESSAGES)
def test_message_json_is_the_generic_encoding(message: Message) -> None:
    ours = message_json(message)
    theirs = MessageToDict(message)
    assert ours == theirs
    assert list(ours) == list(theirs)  # the same key order, so the same bytes on the wire


@pytest.mark.parametrize(
    ("seconds", "nanos"),
    [
        (0, 0),
        (1_700_000_000, 0),
        (1_700_000_000, 123_000_000),
        (1_700_000_000, 123_456_000),
        (1_700_000_000, 123_456_789),
        (1_700_000_000, 1),
        (-1, 999_999_999),
        (-62135596800, 0),
        (253402300799, 999_999_999),
    ],
)
def test_timestamp_json_is_the_generic_encoding(seconds: int, nanos: int) -> None:
    stamp = Timestamp(seconds=seconds, nanos=nanos)
    assert timestamp_json(stamp) == stamp.ToJsonString()


def test_a_status_time_now_encodes_alike() -> None:
    stamp = status_time()
    assert timestamp_json(stamp) == stamp.ToJsonString()


def test_an_instant_out_of_range_is_refused_as_protobuf_refuses_it() -> None:
    stamp = Timestamp(seconds=253402300800, nanos=0)
    with pytest.raises(ValueError):
        stamp.ToJsonString()
    with pytest.raises(ValueError):
        timestamp_json(stamp)


TASKS = [
    Task(
        id="run-1",
        context_id="ctx-1",
        status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED, timestamp=status_time()),
        history=[MESSAGES[0]],
    ),
    Task(id="run-2", context_id="ctx-2", status=TaskStatus(state=TaskState.TASK_STATE_WORKING)),
    Task(id="run-3", status=TaskStatus(), history=MESSAGES[:6]),
    Task(
        id="run-4",
        status=TaskStatus(state=TaskState.TASK_STATE_INPUT_REQUIRED, message=MESSAGES[1]),
    ),
    Task(id="run-5", artifacts=[Artifact(artifact_id="a", parts=[Part(text="t")])]),
    Task(id="run-6", metadata=_struct()),
    Task(),
]


@pytest.mark.parametrize("task", TASKS)
def test_task_json_is_the_generic_encoding(task: Task) -> None:
    ours = task_json(task)
    theirs = MessageToDict(task)
    assert ours == theirs
    assert list(ours) == list(theirs)


PARAMS: list[object] = [
    {
        "message": {
            "role": "ROLE_USER",
            "messageId": "m",
            "contextId": "c",
            "parts": [{"text": "go"}],
        }
    },
    {"message": {"role": "ROLE_AGENT", "message_id": "m", "task_id": "t", "parts": [{"text": ""}]}},
    {"message": {"messageId": "m", "parts": []}},
    {"message": {}},
    {"message": {"messageId": "m", "message_id": "n"}},  # both spellings: ParseDict decides
    {"message": {"role": "ROLE_NONE", "messageId": "m"}},  # unknown enum: ignored, as the SDK
    {"message": {"role": 1, "messageId": "m"}},
    {"message": {"messageId": "m", "parts": [{"text": "a", "mediaType": "text/plain"}]}},
    {"message": {"messageId": "m", "metadata": {"k": 1}}, "configuration": {"historyLength": 2}},
    {"message": {"messageId": "m", "unknown": True}},
    {"message": {"messageId": None, "parts": [{"text": "a"}]}},
    {"message": "not an object"},  # ParseDict takes it as an empty message
]


@pytest.mark.parametrize("params", PARAMS)
def test_send_request_reads_what_parse_dict_reads(params: object) -> None:
    expected = SendMessageRequest()
    ParseDict(params, expected, ignore_unknown_fields=True)  # type: ignore[arg-type]
    assert send_request(params) == expected


@pytest.mark.parametrize(
    "params",
    [
        {"message": {"messageId": "m", "parts": [{"text": 3}]}},
        {"message": {"messageId": 5}},
        None,
    ],
)
def test_send_request_refuses_what_parse_dict_refuses(params: object) -> None:
    with pytest.raises(Exception) as ours:
        send_request(params)
    with pytest.raises(Exception) as theirs:
        ParseDict(params, SendMessageRequest(), ignore_unknown_fields=True)  # type: ignore[arg-type]
    assert type(ours.value) is type(theirs.value)
