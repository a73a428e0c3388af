"""ProtoJSON of the two shapes every A2A turn writes, without the generic encoder.

protobuf's ``MessageToDict`` walks descriptors in Python and ``Timestamp.ToJsonString``
goes through datetime arithmetic on each call; together they were a large part of an
A2A turn's CPU beside a native one. A turn's user message is almost always ids, a role
and text parts, and its status times are plain UTC instants: those are written here
directly, to the same JSON the generic encoder gives (tests/a2a_binding compares them);
anything else (data or file parts, metadata, extensions) still goes through it.
"""

from __future__ import annotations

import datetime

from a2a.types.a2a_pb2 import Message, Role
from google.protobuf.json_format import MessageToDict
from google.protobuf.timestamp_pb2 import Timestamp

from agentkeel.messages import JSONObject, JSONValue

__all__ = ["message_json", "timestamp_json"]

_EPOCH = datetime.datetime(1970, 1, 1)
_MIN_SECONDS = -62135596800
"""0001-01-01T00:00:00Z, the earliest instant ProtoJSON allows."""
_MAX_SECONDS = 253402300799
"""9999-12-31T23:59:59Z, the latest."""
_STRING_FIELDS = {"message_id": "messageId", "context_id": "contextId", "task_id": "taskId"}
"""The string fields of a Message, by their ProtoJSON names."""


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
