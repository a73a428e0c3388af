"""The A2A executor: A2A turns run on the server's shared runtime, like native ones.

Nothing here runs an Agent itself. A turn is a `SendRequest` submitted through the
runtime's `RunFacade`, as the native wire does, so it gets the same context cache (one Agent per
(principal, definition, contextId), LRU), the same sessions and checkpoints, the same
concurrency rule (wait in line, or ``reject``) and the same retained run channel; an A2A
stream is one more reader of that channel. That is why a conversation moves freely
between the two wires: they are two views of the same contexts and runs.

The current `A2ATurn` is entered just around `RunFacade.submit`, which creates the
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
from agentkeel.runtime.coordination import RunStream
from agentkeel.runtime.errors import IdempotencyKeyReusedError
from agentkeel.runtime.facade import RunFacade
from agentkeel.runtime.runs import RunJob
from agentkeel.runtime.wire import SendRequest
from agentkeel.storage.base import RunRecord, SessionKey

__all__ = ["A2AExecutor", "a2a_error", "translated"]

logger = logging.getLogger(__name__)

_CANCEL_WAIT_SECONDS = 30.0


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
        runtime: The runtime's facade (``app.state.runtime``).
        definition: The agent definition served.
        deduplicate: Let a message sent again (same transport, `messageId` and content)
            join the first one's task, as an Idempotency-Key does; off, every message runs.
    """

    def __init__(self, runtime: RunFacade, definition: str, *, deduplicate: bool = True) -> None:
        self.runtime = runtime
        self.definition = definition
        self.deduplicate = deduplicate

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
                idempotency_key=message_id if self.deduplicate else None,
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
            return await self.runtime.run_record(key, run_id)
        except AgentkeelError as exc:
            raise a2a_error(exc) from None

    async def live(self, key: SessionKey, run_id: str) -> RunStream | None:
        """The run's stream while a segment of it runs, else None."""
        return await self.runtime.live(key, run_id)

    async def frames(self, stream: RunStream, after: int) -> AsyncIterator[list[JSONObject]]:
        """The frame data after id `after`, in batches as they arrive, up to a done frame.

        The frames are taken from the stream as data, so nothing is decoded twice. An
        empty batch means nothing came for ``server.heartbeatSeconds`` (a stream sends
        its keep-alive comment then, as the native wire does).
        """
        async with aclosing(self.runtime.follow(stream, after)) as batches:
            async for batch in batches:
                yield [frame.data for frame in batch]

    async def next_segment(self, key: SessionKey, run_id: str) -> tuple[RunStream, int] | None:
        """Wait until a suspended run resumes: its stream and the id its new frames follow.

        The runtime wakes this when the run's next segment starts (no polling); a run
        that ended without a new segment (say, its context was deleted) gives None.
        """
        try:
            return await self.runtime.resumed(key, run_id)
        except AgentkeelError as exc:
            raise a2a_error(exc) from None

    async def cancel_running(self, key: SessionKey, stream: RunStream) -> None:
        """Cancel the run of `stream` (it ends ``cancelled``, saved) and wait for its end."""
        after = stream.last_id
        await self.runtime.cancel(key, stream.run_id)
        with anyio.move_on_after(_CANCEL_WAIT_SECONDS):
            async for _ in self.frames(stream, after):
                pass
