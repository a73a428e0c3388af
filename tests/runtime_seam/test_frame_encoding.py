"""Frames are encoded once, fast, and to the same bytes as the JSON encoder's output."""

from __future__ import annotations

import json
import math

import pytest

from agentkeel.events import StatusEvent, TokenEvent
from agentkeel.keys import SessionKey
from agentkeel.messages import JSONObject
from agentkeel.runtime.channels import Frame, RetainedStreams, RunChannel
from agentkeel.runtime.frames import Packed
from agentkeel.runtime.wire import event_frame, token_frame_json
from agentkeel.storage.memory import InMemoryStorage

REFERENCE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
TEXTS = ["tok ", "", 'a "quoted" \\ back', "line\nbreak\ttab\r", "\x00\x1f\x7f", "é 漢 😀 \u2028"]


@pytest.mark.parametrize("text", TEXTS)
def test_a_token_frame_built_around_its_text_is_the_encoders_json(text: str) -> None:
    event = TokenEvent(text=text)
    data = event_frame('ctx-é"1', "run-abc", event)
    built = token_frame_json('ctx-é"1', "run-abc", event)
    assert built == REFERENCE.encode(data)
    assert json.loads(built) == data
    frame = Frame.build(7, data, built)
    assert frame.encoded == Frame.build(7, data).encoded
    assert frame.encoded == b"id: 7\ndata: " + REFERENCE.encode(data).encode() + b"\n\n"


def test_only_a_plain_token_event_has_a_prebuilt_frame() -> None:
    assert token_frame_json("ctx-1", "run-1", TokenEvent(text="hi", agent="triage")) is None
    assert token_frame_json("ctx-1", "run-1", StatusEvent(status="running")) is None


def test_a_frame_that_fails_to_encode_leaves_the_encoder_as_it_was() -> None:
    inner: JSONObject = {"value": math.nan}
    with pytest.raises(ValueError, match="Out of range float"):
        Frame.build(1, {"inner": inner})
    inner["value"] = 1  # the same object, encoded again: not a circular reference
    assert Frame.build(2, {"inner": inner}).encoded == b'id: 2\ndata: {"inner":{"value":1}}\n\n'
    looped: JSONObject = {}
    looped["self"] = looped
    with pytest.raises(ValueError, match="Circular reference"):
        Frame.build(3, looped)


def test_published_frames_carry_the_prebuilt_text() -> None:
    channel = RunChannel(SessionKey(definition="chat", context_id="ctx-1"), "run-1")
    channel.begin()
    event = TokenEvent(text="hello")
    data = event_frame("ctx-1", "run-1", event)
    frame = channel.publish(data, token_frame_json("ctx-1", "run-1", event))
    assert frame.id == 1 and frame.data == data and not frame.done
    assert json.loads(frame.encoded.split(b"data: ", 1)[1]) == data


@pytest.mark.anyio
async def test_a_run_that_leaves_the_lru_keeps_its_frames_as_bytes() -> None:
    streams = RetainedStreams(InMemoryStorage(), None, capacity=1)
    first = RunChannel(SessionKey(definition="chat", context_id="ctx-1"), "run-1")
    first.begin()
    streams.put(first)
    for text in TEXTS:
        event = TokenEvent(text=text)
        first.publish(
            event_frame("ctx-1", "run-1", event), token_frame_json("ctx-1", "run-1", event)
        )
    first.publish({"contextId": "ctx-1", "runId": "run-1", "done": True, "status": "completed"})
    published = list(first.frames)
    # another context's run pushes ctx-1 out of the LRU: what still holds run-1 holds bytes
    streams.put(RunChannel(SessionKey(definition="chat", context_id="ctx-2"), "run-2"))
    assert isinstance(first.frames, Packed)
    assert first.last_id == len(TEXTS) + 1
    replayed = [frame async for batch in first.batches(0, heartbeat=1.0) for frame in batch]
    assert replayed == published  # ids, data, bytes and done flags, read back from the bytes
