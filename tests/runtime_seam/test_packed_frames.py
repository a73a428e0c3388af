"""A run that is no context's latest keeps its frames as bytes, and reads them back the same.

An idempotency claim holds its run's channel for as long as the claim lasts; packed, the
frames are no objects the garbage collector scans (the retry of an older AG-UI turn that
replays them: tests/bindings_agui/test_in_step.py).
"""

from __future__ import annotations

import gc

import anyio

from agentkeel.keys import SessionKey
from agentkeel.messages import JSONObject
from agentkeel.runtime.channels import RetainedStreams, RunChannel
from agentkeel.runtime.frames import Frame, Packed
from agentkeel.storage.memory import InMemoryStorage

KEY = SessionKey(definition="bench", context_id="ctx-packed", principal=None)


def _finished(run_id: str, tokens: list[str]) -> RunChannel:
    channel = RunChannel(KEY, run_id)
    channel.begin()
    for token in tokens:
        event: JSONObject = {"type": "token", "text": token}
        channel.publish({"contextId": KEY.context_id, "runId": run_id, "event": event})
    channel.publish({"contextId": KEY.context_id, "runId": run_id, "done": True})
    return channel


def test_a_replaced_run_is_packed_and_reads_back_the_same_frames() -> None:
    streams = RetainedStreams(InMemoryStorage(), retention=None)
    first = _finished("run-1", ["a", 'é "b"\n', ""])
    frames = list(first.frames)
    streams.put(first)
    assert isinstance(first.frames, list)  # the latest run stays as frames
    streams.put(_finished("run-2", ["c"]))
    assert isinstance(first.frames, Packed)
    assert list(first.frames) == frames and first.frames[1:3] == frames[1:3]
    assert first.last_id == frames[-1].id
    assert first.to_bytes().startswith(b"".join(frame.encoded for frame in frames))
    assert RunChannel.from_bytes(KEY, "run-1", first.to_bytes()).frames == frames
    gc.collect()
    assert not gc.is_tracked(first.frames._encoded)

    async def replay() -> list[Frame]:
        return [frame async for batch in first.batches(0, 1.0) for frame in batch]

    assert anyio.run(replay) == frames


def test_an_active_run_is_not_packed() -> None:
    channel = RunChannel(KEY, "run-live")
    channel.begin()
    channel.publish({"contextId": KEY.context_id, "runId": "run-live", "event": {}})
    channel.pack()
    assert isinstance(channel.frames, list)
