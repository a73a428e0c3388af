"""Follow a run through the facade and write it as UI message stream parts.

A POST's stream reads from where its turn's frames start up to that segment's done
frame. A resume (``GET .../stream``) replays the running run from its first frame, the
way `DefaultChatTransport` expects (it resets the message at the replay's ``start``),
and goes on past a suspension that was answered, so the replayed message shows the
approval and what followed it.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from contextlib import aclosing

from agentkeel.bindings.ai_sdk.parts import PartWriter
from agentkeel.errors import AgentkeelError
from agentkeel.runtime.coordination import RunStream
from agentkeel.runtime.facade import RunFacade
from agentkeel.sse import encode_comment
from agentkeel.storage.base import SessionKey

__all__ = ["approved_calls", "ui_parts"]

logger = logging.getLogger(__name__)

_HEARTBEAT = encode_comment("keep-alive")
_LOST = "the stream was cut short on the server; the details are in its log"


async def approved_calls(
    runtime: RunFacade, key: SessionKey, run_id: str, interrupt_id: str
) -> dict[str, str]:
    """The tool call that interrupt `interrupt_id` of run `run_id` holds, mapped to it.

    The client knows an approval's tool part by the interrupt id; the resumed run's
    frames name the call by its own id. Empty when the run record does not say.
    """
    record = await runtime.run_record(key, run_id)
    if record is None:
        return {}
    return {item.call_id: item.id for item in record.interrupts if item.id == interrupt_id}


async def ui_parts(
    runtime: RunFacade,
    stream: RunStream,
    after: int,
    writer: PartWriter,
    *,
    replay: bool = False,
    head: bytes = b"",
) -> AsyncGenerator[bytes, None]:
    """The parts of `stream`'s frames after id `after`, ending with ``[DONE]``.

    Args:
        runtime: The facade the frames are followed through.
        stream: The run.
        after: The frame id after which to start.
        writer: The response's part writer.
        replay: Go on past done frames that later segments follow (a resume).
        head: Parts written after ``start`` and before the first frame's.
    """
    pending = writer.start(stream.run_id) + head  # sent with the first frames: one write
    try:
        while True:
            last_done = None
            async with aclosing(runtime.follow(stream, after)) as batches:
                async for batch in batches:
                    if not batch:
                        yield pending + _HEARTBEAT
                        pending = b""
                        continue
                    out = [pending]
                    pending = b""
                    for frame in batch:
                        if not frame.done:
                            out.append(writer.frame(frame.data))
                            continue
                        last_done = frame
                        more = replay and (stream.active or stream.last_id > frame.id)
                        out.append(writer.done(frame.data, last=not more))
                    yield b"".join(out)
            if last_done is None:
                logger.warning(
                    "run_id=<%s> | the run's frames ended without a done frame", stream.run_id
                )
                yield pending + writer.failure(_LOST)
                return
            if not (replay and (stream.active or stream.last_id > last_done.id)):
                return
            interrupt = last_done.data.get("interrupt")
            if isinstance(interrupt, dict) and isinstance(interrupt.get("id"), str):
                writer.shown.update(
                    await approved_calls(runtime, stream.key, stream.run_id, str(interrupt["id"]))
                )
            after = last_done.id
    except AgentkeelError as exc:
        logger.error("code=<%s> | an AI SDK stream failed: %s", exc.code, exc.message)
        yield pending + writer.failure(_LOST)
