"""Runs lost with their replica: reported ``failed`` in their record, never left open.

A replica killed mid-run never writes its run's record, and its stream never gets its
``done`` frame. Its turn is rolled back by storage (nothing of it was committed), and
its lease expires. The replica that next takes the context over (a grant marked
`LeaseGrant.taken_over`) looks at the fan-out's pointer: a run marked running there,
that runs on no replica now and has no record, is recorded ``failed``
(``concurrent_write``: the turn was not saved, and can be sent again), so the run's
record answers what became of an acknowledged turn. A retry of that turn with its
Idempotency-Key gets the same answer (`lost_result`).
"""

from __future__ import annotations

import logging
import time

from agentkeel.messages import JSONObject
from agentkeel.result import ErrorInfo
from agentkeel.runtime.channels import RunChannel
from agentkeel.runtime.coordination import StreamFanout
from agentkeel.runtime.remote_channel import RemoteRunChannel
from agentkeel.runtime.wire import failed_done_frame
from agentkeel.storage.base import RunRecord, SessionKey, SessionStorage

__all__ = ["LOST_CODE", "LOST_RUN", "lost_channel", "lost_result", "record_lost_run"]

logger = logging.getLogger(__name__)

LOST_CODE = "concurrent_write"
LOST_RUN = (
    "the server running this turn stopped before the turn was saved, so nothing of it "
    "was saved; send it again"
)


def lost_result(context_id: str, run_id: str) -> JSONObject:
    """The SendResult of a started turn whose replica died before saving it."""
    frame = failed_done_frame(context_id, run_id, LOST_CODE, LOST_RUN)
    return {key: value for key, value in frame.items() if key != "done"}


def lost_channel(key: SessionKey, run_id: str) -> RunChannel:
    """A finished stand-in for the lost run's stream: its failed done frame alone."""
    channel = RunChannel(key, run_id)
    done = failed_done_frame(key.context_id, run_id, LOST_CODE, LOST_RUN)
    channel.append(channel.next_frame(done))
    return channel


async def record_lost_run(
    streams: StreamFanout, storage: SessionStorage, key: SessionKey
) -> str | None:
    """Record the context's run its dead holder left open as ``failed``; its id, if any.

    Called by the new holder of the context's lease, before its own turn: nothing else
    runs on the context meanwhile.
    """
    stream = await streams.latest(key)
    if not isinstance(stream, RemoteRunChannel) or not stream.active:
        return None  # the last run ended (or ran here, and this process ended it)
    if await storage.get_run(key, stream.run_id) is not None:
        return None  # it had a record (a suspended run resumed: it is suspended again)
    now = time.time()
    record = RunRecord(
        run_id=stream.run_id,
        status="failed",
        input=None,
        started_at=now,
        ended_at=now,
        error=ErrorInfo(code=LOST_CODE, message=LOST_RUN),
        stop_reason="error",
    )
    await storage.put_run(key, record)
    logger.warning(
        "session=<%s>, run=<%s> | recorded failed: its server stopped mid-run",
        key.session_id,
        stream.run_id,
    )
    return stream.run_id
