"""The A2A executor: A2A turns run on the server's shared runtime, like native ones.

Nothing here runs an Agent itself. A turn is a `SendRequest` submitted to the
`ServerRuntime` the native wire uses, so it gets the same context cache (one Agent per
(principal, definition, contextId), LRU), the same sessions and checkpoints, the same
concurrency rule (wait in line, or ``reject``) and the same retained run channel; an A2A
stream is one more reader of that channel. That is why a conversation moves freely
between the two wires: they are two views of the same contexts and runs.

The current `A2ATurn` is entered just around `ServerRuntime.submit`, which creates the
run's task; the task copies the context, so the run (and only it) sees the turn.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing, contextmanager

import anyio
from a2a.utils.errors import (
    A2AError,
    InternalError,
    InvalidParamsError,
    UnsupportedOperationError,
)

from agentkeel.a2a.segments import SegmentWatch
from agentkeel.a2a.turn import A2ATurn, enter_turn, exit_turn
from agentkeel.errors import (
    AgentkeelError,
    ConfigurationError,
    ContextRefusedError,
    InterruptError,
    InvalidRequestError,
    RunInProgressError,
    SharedAgentError,
    StorageError,
)
from agentkeel.ids import validate_context_id
from agentkeel.messages import JSONObject, JSONValue
from agentkeel.server.errors import IdempotencyKeyReusedError
from agentkeel.server.runs import RunJob, ServerRuntime
from agentkeel.server.streaming import RunChannel
from agentkeel.server.wire import SendRequest
from agentkeel.storage.base import RunRecord, SessionKey

__all__ = ["A2AExecutor", "a2a_error", "translated"]

logger = logging.getLogger(__name__)

_CANCEL_WAIT_SECONDS = 30.0
_RECHECK_SECONDS = 5.0


def a2a_error(exc: AgentkeelError) -> A2AError:
    """The A2A error for an agentkeel one; storage and configuration details stay in the log."""
    if isinstance(exc, InvalidRequestError | InterruptError | ContextRefusedError):
        return InvalidParamsError(message=exc.message)
    if isinstance(exc, SharedAgentError):
        logger.error("code=<%s> | an A2A request failed: %s", exc.code, exc.message)
        return InternalError(message=exc.message)
    if isinstance(exc, RunInProgressError):
        return UnsupportedOperationError(message=exc.message)
    if isinstance(exc, StorageError | ConfigurationError):
        logger.error("code=<%s> | an A2A request failed: %s", exc.code, exc.message)
        return InternalError(message="the server's storage failed; the details are in its log")
    if exc.code == "shutting_down":
        return InternalError(message=exc.message)
    logger.error("code=<%s> | an A2A request failed: %s", exc.code, exc.message)
    return InternalError(message="internal server error")


@contextmanager
def translated() -> Iterator[None]:
    """Raise agentkeel errors of the block as their A2A errors (see `a2a_error`)."""
    try:
        yield
    except AgentkeelError as exc:
        raise a2a_error(exc) from None


class A2AExecutor:
    """Starts, follows and cancels the runs of one agent definition on the shared runtime.

    Args:
        runtime: The server's runtime (``app.state.runtime``).
        definition: The agent definition served.
        segments: Wakes `next_segment` when a run resumes (one per runtime is enough).
    """

    def __init__(
        self, runtime: ServerRuntime, definition: str, segments: SegmentWatch | None = None
    ) -> None:
        self.runtime = runtime
        self.definition = definition
        self.segments = segments or SegmentWatch(runtime.streams)

    def key(self, principal: str | None, context_id: str) -> SessionKey:
        """The context's key; InvalidParamsError for an id the server does not accept."""
        try:
            return SessionKey(
                definition=self.definition,
                context_id=validate_context_id(context_id),
                principal=principal,
            )
        except InvalidRequestError as exc:
            raise InvalidParamsError(message=exc.message) from None

    async def submit(
        self,
        key: SessionKey,
        request: SendRequest,
        turn: A2ATurn,
        *,
        message_id: str | None = None,
        body: JSONValue = None,
        sent_context_id: str | None = None,
    ) -> tuple[RunJob, bool]:
        """Queue the turn on its context; returns once its run started (with its channel).

        A message id plays the part of an Idempotency-Key: a message sent again with
        the same id joins the first one's run (False: this request did not start it).
        """
        token = enter_turn(turn)
        try:
            job, is_new = await self.runtime.submit_claimed(
                key,
                request,
                idempotency_key=message_id,
                body=body,
                sent_context_id=sent_context_id,
            )
        except IdempotencyKeyReusedError as exc:
            raise InvalidParamsError(message=exc.message) from None
        except AgentkeelError as exc:
            raise a2a_error(exc) from None
        finally:
            exit_turn(token)
        if job.channel is None:
            raise InternalError(message="a started run has no channel")
        return job, is_new

    async def run_record(self, key: SessionKey, run_id: str) -> RunRecord | None:
        """The stored record of a run (None while its first segment runs)."""
        try:
            return await self.runtime.framework.storage.get_run(key, run_id)
        except AgentkeelError as exc:
            raise a2a_error(exc) from None

    async def live(self, key: SessionKey, run_id: str) -> RunChannel | None:
        """The run's channel while a segment of it runs, else None."""
        channel = await self.runtime.streams.latest(key)
        if channel is not None and channel.active and channel.run_id == run_id:
            return channel
        return None

    async def frames(self, channel: RunChannel, after: int) -> AsyncIterator[list[JSONObject]]:
        """The frame data after id `after`, in batches as they arrive, up to a done frame.

        `RunChannel.follow` paces the reading (it wakes when frames arrive); the frames
        are taken from the channel as data, so nothing is decoded twice.
        """
        frames = channel.frames
        index = next((i for i, frame in enumerate(frames) if frame.id > after), len(frames))
        heartbeat = self.runtime.framework.server.heartbeat_seconds
        async with aclosing(channel.follow(after, heartbeat)) as chunks:
            async for _ in chunks:
                batch: list[JSONObject] = []
                while index < len(frames):
                    frame = frames[index]
                    index += 1
                    batch.append(frame.data)
                    if frame.done:
                        yield batch
                        return
                if batch:
                    yield batch

    async def next_segment(self, key: SessionKey, run_id: str) -> tuple[RunChannel, int] | None:
        """Wait until a suspended run resumes: its channel and the id its new frames follow.

        `SegmentWatch` wakes this when the run's next segment starts; every
        `_RECHECK_SECONDS` without one, the run record says whether it still waits (a run
        that ended without a new segment here, say its context was deleted, gives None).
        """
        channel = await self.runtime.streams.latest(key)
        base = channel.last_id if channel is not None and channel.run_id == run_id else 0
        while True:
            event = self.segments.expect(run_id)
            channel = await self.runtime.streams.latest(key)
            if (
                channel is not None
                and channel.run_id == run_id
                and (channel.active or channel.last_id > base)
            ):
                return channel, base
            woke = False
            with anyio.move_on_after(_RECHECK_SECONDS):
                await event.wait()
                woke = True
            if not woke:
                self.segments.forget(run_id, event)
                run = await self.run_record(key, run_id)
                if run is None or run.status != "suspended":
                    return None

    async def cancel_running(self, key: SessionKey, channel: RunChannel) -> None:
        """Cancel the run of `channel` (it ends ``cancelled``, saved) and wait for its end."""
        after = channel.last_id
        entry = await self.runtime.cache.acquire(key)
        try:
            # no await since the check: the context's one running turn is this run
            if channel.active:
                entry.agent.cancel()
        finally:
            self.runtime.cache.release(entry)
        with anyio.move_on_after(_CANCEL_WAIT_SECONDS):
            async for _ in self.frames(channel, after):
                pass
