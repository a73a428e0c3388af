"""ProtoJSON of the shapes every A2A turn reads and writes, without the generic codec.

protobuf's ``MessageToDict`` and ``ParseDict`` walk descriptors in Python and
``Timestamp.ToJsonString`` goes through datetime arithmetic on each call; together they
were a large part of an A2A turn's CPU beside a native one. A turn's user message is
almost always ids, a role and text parts, its first Task that message and a status, and
its status times plain UTC instants: those are read and written here directly, to the
same values the generic codec gives (tests/a2a_binding compares them); anything else
(data or file parts, metadata, extensions, a configuration) still goes through it.
"""

from __future__ import annotations

import datetime

from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest, Task, TaskState
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.timestamp_pb2 import Timestamp

from agentkeel.messages import JSONObject, JSONValue

__all__ = ["message_json", "send_request", "task_json", "timestamp_json"]

_EPOCH = datetime.datetime(1970, 1, 1)
_MIN_SECONDS = -62135596800
"""0001-01-01T00:00:00Z, the earliest instant ProtoJSON allows."""
_MAX_SECONDS = 253402300799
"""9999-12-31T23:59:59Z, the latest."""
_STRING_FIELDS = {"message_id": "messageId", "context_id": "contextId", "task_id": "taskId"}
"""The string fields of a Message, by their ProtoJSON names."""
_READ_FIELDS = {
    **{name: name for name in (*_STRING_FIELDS, "role", "parts")},
    **{json_name: name for name, json_name in _STRING_FIELDS.items()},
}
"""The Message fields `send_request` reads itself, by both the names ProtoJSON accepts."""
_ROLES = frozenset(Role.keys())
_STATE_NAMES = {number: name for name, number in TaskState.items()}


def timestamp_json(stamp: Timestamp) -> str:
    """`stamp` in RFC 3339, Z-normalised, with 0, 3, 6 or 9 fractional digits."""
    seconds, nanos = stamp.seconds, stamp.nanos
    if not (_MIN_SECONDS <= seconds <= _MAX_SECONDS and 0 <= nanos < 1_000_000_000):
        return stamp.ToJsonString()  # raises the protobuf error for an invalid instant
    text = (_EPOCH + datetime.timedelta(seconds=seconds)).isoformat()
    if nanos == 0:
        return text + "Z"
    if nanos % 1_000_000 == 0:
        return f"{text}.{nanos // 1_000_000:03d}Z"
    if nanos % 1_000 == 0:
        return f"{text}.{nanos // 1_000:06d}Z"
    return f"{text}.{nanos:09d}Z"


def message_json(message: Message) -> JSONObject:
    """A Message as ProtoJSON (how task records keep them)."""
    data: JSONObject = {}
    for field, value in message.ListFields():
        name = field.name
        key = _STRING_FIELDS.get(name)
        if key is not None:
            data[key] = value
        elif name == "role":
            data["role"] = Role.Name(value)
        elif name == "parts":
            parts: list[JSONValue] = []
            for part in value:
                fields = part.ListFields()
                if len(fields) != 1 or fields[0][0].name != "text":
                    return _generic(message)
                parts.append({"text": fields[0][1]})
            data["parts"] = parts
        else:
            return _generic(message)
    return data


def _generic(message: Message) -> JSONObject:
    data: JSONObject = MessageToDict(message)
    return data


def task_json(task: Task) -> JSONObject:
    """A Task as ProtoJSON: ids, a plain status, text artifacts and simple messages."""
    data: JSONObject = {}
    for field, value in task.ListFields():
        name = field.name
        if name == "id":
            data["id"] = value
        elif name == "context_id":
            data["contextId"] = value
        elif name == "status" and not value.HasField("message"):
            status: JSONObject = {}
            if value.state:
                status["state"] = _STATE_NAMES[value.state]
            if value.HasField("timestamp"):
                status["timestamp"] = timestamp_json(value.timestamp)
            data["status"] = status
        elif name == "history":
            data["history"] = [message_json(item) for item in value]
        else:  # artifacts, metadata, a status with a message: rarer, left to protobuf
            generic: JSONObject = MessageToDict(task)
            return generic
    return data


def send_request(params: object) -> SendMessageRequest:
    """``SendMessageRequest`` params (ProtoJSON) parsed; ParseError like ``ParseDict``'s.

    A request of one message with ids, a role and text parts is read directly; any other
    goes through ``ParseDict`` (unknown fields ignored, as the SDK parses them).
    """
    message = params.get("message") if isinstance(params, dict) and len(params) == 1 else None
    fields: dict[str, object] = {}
    for key, value in message.items() if isinstance(message, dict) else [(None, None)]:
        name = _READ_FIELDS.get(key) if isinstance(key, str) else None
        if name is None or name in fields or value is None:
            return _parsed(params)
        fields[name] = value
    role, parts = fields.pop("role", "ROLE_UNSPECIFIED"), fields.pop("parts", [])
    if role not in _ROLES or not isinstance(parts, list):
        return _parsed(params)
    texts = [part.get("text") for part in parts if isinstance(part, dict) and len(part) == 1]
    strings = [*texts, *fields.values()]
    if len(texts) != len(parts) or not all(isinstance(item, str) for item in strings):
        return _parsed(params)
    parts_read = [Part(text=text) for text in texts]
    parsed = Message(role=str(role), parts=parts_read, **fields)  # type: ignore[arg-type]
    return SendMessageRequest(message=parsed)


def _parsed(params: object) -> SendMessageRequest:
    request = SendMessageRequest()
    ParseDict(params, request, ignore_unknown_fields=True)  # type: ignore[arg-type]
    return request
