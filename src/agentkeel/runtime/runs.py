"""Turns run in the server's task group, not in the request that asked for them.

`ServerRuntime` is what every HTTP binding shares: the context cache, the retained
streams, the metrics and the task group of the app's lifespan. `submit` queues a turn on
its context and returns a `RunJob` as soon as the run has started (or failed before
starting, which the request then answers as an HTTP error). From there the run goes on
by itself: a client that disconnects does not cancel it; it finishes, is saved, and its
frames stay retained for a reconnect. The ``done`` frame is published only after the
Agent saved the turn and the frames were persisted.

Idempotency: a request with an ``Idempotency-Key`` is remembered for
``retention.events`` (in this process, at most `IDEMPOTENCY_CAPACITY` keys) under
(principal, definition, contextId as sent, key); a retry gets the original job back.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial

import anyio
from anyio.abc import TaskGroup

from agentkeel.errors import (
    AgentkeelError,
    ContextNotFoundError,
    InterruptNotFoundError,
    InterruptPendingError,
)
from agentkeel.events import ErrorEvent, RunEvent, TokenEvent, ToolResultEvent
from agentkeel.framework import Framework
from agentkeel.interrupts import CancelRun, Decision, decision_from_json
from agentkeel.messages import JSONObject, JSONValue
from agentkeel.multiagent import SwarmResult
from agentkeel.result import AgentResult
from agentkeel.runtime.channels import RetainedStreams, RunChannel
from agentkeel.runtime.contexts import ContextCache, ContextEntry, TurnTicket
from agentkeel.runtime.errors import IdempotencyKeyReusedError, ShuttingDownError
from agentkeel.runtime.metrics import ServerMetrics
from agentkeel.runtime.wire import (
    SendRequest,
    done_frame,
    event_frame,
    failed_done_frame,
    send_result,
)
from agentkeel.storage.base import SessionKey

__all__ = ["IDEMPOTENCY_CAPACITY", "RunJob", "ServerRuntime"]

logger = logging.getLogger(__name__)

IDEMPOTENCY_CAPACITY = 10_000
"""Most idempotency keys remembered at once (oldest forgotten first)."""
_SWEEP_SECONDS = 30.0
_CANCEL_GRACE_SECONDS = 5.0
_IdempotencyScope = tuple[str | None, str, str | None, str]


@dataclass(eq=False, slots=True)
class RunJob:
    """One submitted turn: how it started, where its frames go, and how it ended."""

    key: SessionKey
    fingerprint: str
    started: anyio.Event = field(default_factory=anyio.Event)
    finished: anyio.Event = field(default_factory=anyio.Event)
    error: Exception | None = None
    """Why the turn never started (set before `started` is)."""
    channel: RunChannel | None = None
    start_after: int = 0
    """The id after which this turn's frames start in the run's channel."""
    result: JSONObject | None = None
    """The SendResult, once `finished`."""
    began_at: float = field(default_factory=time.monotonic)
    first_token: bool = False
    buffered: list[RunEvent] = field(default_factory=list)


class ServerRuntime:
    """The server's shared state: contexts, streams, metrics and the running turns."""

    def __init__(self, framework: Framework) -> None:
        self.framework = framework
        self.metrics = ServerMetrics()
        self.cache = ContextCache(
            {name: item.factory for name, item in framework.definitions.items()},
            framework.storage,
            framework.checkpointer,
            max_contexts=framework.max_contexts,
            policy=framework.server.concurrency,
            on_evict=self.metrics.evictions.inc,
            swarms=frozenset(
                name for name, item in framework.definitions.items() if item.kind == "swarm"
            ),
        )
        self.streams = RetainedStreams(framework.storage, framework.retention.events)
        self.metrics.cached_contexts.read = lambda: float(len(self.cache))
        self.metrics.queued_turns.read = lambda: float(self.cache.queued_turns)
        self.draining = False
        self._group: TaskGroup | None = None
        self._idempotent: OrderedDict[_IdempotencyScope, tuple[RunJob, float]] = OrderedDict()
        self._running = 0
        self._idle = anyio.Event()
        self._idle.set()

    # -- lifecycle ----------------------------------------------------------------------

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Own the task group turns run in; on exit, drain them (see `shutdown`)."""
        self._idle = anyio.Event()  # bound to the serving event loop, not the building one
        self._idle.set()
        async with anyio.create_task_group() as group:
            self._group = group
            group.start_soon(self._sweep_forever)
            try:
                yield
            finally:
                with anyio.CancelScope(shield=True):
                    await self.shutdown()
                group.cancel_scope.cancel()
                self._group = None

    async def shutdown(self) -> None:
        """Take no new turns; let running ones finish, then cancel what is left.

        Turns get ``server.shutdownTimeoutSeconds``; after that each running Agent is
        cancelled, which ends its run ``cancelled`` with a valid, saved history.
        """
        self.draining = True
        with anyio.move_on_after(self.framework.server.shutdown_timeout_seconds):
            await self._idle.wait()
        if self._running:
            logger.warning(
                "running=<%d> | cancelling turns still running at shutdown", self._running
            )
            for entry in self.cache.entries():
                entry.agent.cancel()
            with anyio.move_on_after(_CANCEL_GRACE_SECONDS):
                await self._idle.wait()

    async def _sweep_forever(self) -> None:
        while True:
            await anyio.sleep(_SWEEP_SECONDS)
            self.streams.sweep()
            self._forget_expired(time.monotonic())

    # -- submitting a turn --------------------------------------------------------------

    async def submit(
        self,
        key: SessionKey,
        request: SendRequest,
        *,
        idempotency_key: str | None = None,
        body: JSONValue = None,
    ) -> RunJob:
        """Queue a turn and return once it started; raise what stopped it from starting.

        Args:
            key: The context (definition, contextId, principal).
            request: The parsed request.
            idempotency_key: The client's Idempotency-Key header, if any.
            body: The raw request body, fingerprinted to detect a reused key.
        """
        scope, fingerprint = None, ""
        if idempotency_key is not None:
            encoded = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
            fingerprint = hashlib.sha256(encoded).hexdigest()
            sent = request.context_id if isinstance(request.context_id, str) else None
            scope = (key.principal, key.definition, sent, idempotency_key)
            previous = self._remembered(scope)
            if previous is not None:
                if previous.fingerprint != fingerprint:
                    raise IdempotencyKeyReusedError(
                        "this Idempotency-Key was used for a different request"
                    )
                await previous.started.wait()
                if previous.error is not None:
                    raise previous.error
                return previous
        if self._group is None:
            raise ShuttingDownError("the server is not running (was its lifespan started?)")
        if self.draining:
            raise ShuttingDownError("the server is shutting down and takes no new turns")
        if request.resume is not None and not await self.cache.exists(key):
            # a decision needs a conversation: for an unknown context (or another
            # principal's) answer like every other endpoint, and build nothing
            raise ContextNotFoundError(f"no context {key.context_id!r} for this agent")
        entry = await self.cache.acquire(key)
        try:
            ticket = self.cache.join(entry)
        finally:
            self.cache.release(entry)
        job = RunJob(key=key, fingerprint=fingerprint)
        if scope is not None:
            self._remember(scope, job)
        self._group.start_soon(self._execute, job, entry, ticket, request)
        await job.started.wait()
        if job.error is not None:
            if scope is not None:
                self._idempotent.pop(scope, None)
            raise job.error
        return job

    def _remembered(self, scope: _IdempotencyScope) -> RunJob | None:
        found = self._idempotent.get(scope)
        if found is None or found[1] < time.monotonic():
            return None
        return found[0]

    def _remember(self, scope: _IdempotencyScope, job: RunJob) -> None:
        ttl = self.framework.retention.events or 86_400.0
        self._idempotent[scope] = (job, time.monotonic() + ttl)
        self._idempotent.move_to_end(scope)
        while len(self._idempotent) > IDEMPOTENCY_CAPACITY:
            self._idempotent.popitem(last=False)

    def _forget_expired(self, now: float) -> None:
        for scope in [s for s, (_, expires) in self._idempotent.items() if expires < now]:
            del self._idempotent[scope]

    def forget_context(self, key: SessionKey) -> None:
        """Drop what is retained for a deleted context (frames, idempotency keys)."""
        self.streams.drop(key)
        for scope in [s for s, (job, _) in self._idempotent.items() if job.key == key]:
            del self._idempotent[scope]

    # -- running a turn -----------------------------------------------------------------

    async def _execute(
        self, job: RunJob, entry: ContextEntry, ticket: TurnTicket, request: SendRequest
    ) -> None:
        """The task of one turn; it never raises into the task group."""
        try:
            await ticket.ready.wait()
            if self.draining:
                raise ShuttingDownError("the server is shutting down and takes no new turns")
            self._running += 1
            if self._running == 1:
                self._idle = anyio.Event()
            self.metrics.active_runs.inc()
            try:
                await self._run(job, entry, request)
            finally:
                self._running -= 1
                self.metrics.active_runs.dec()
                if not self._running:
                    self._idle.set()
        except Exception as exc:
            if job.started.is_set():
                logger.exception("session=<%s> | a turn failed", job.key.session_id)
            else:
                job.error = exc
        finally:
            entry.on_run_started = None
            self.cache.leave(entry, ticket)
            if not job.started.is_set():
                job.error = job.error or ShuttingDownError("the turn was abandoned")
                job.started.set()
            channel = job.channel
            if channel is not None and channel.active:  # cancelled before its end
                data = failed_done_frame(
                    job.key.context_id,
                    channel.run_id,
                    "cancelled",
                    "the run was cancelled",
                    status="cancelled",
                )
                channel.append(channel.next_frame(data))
                job.result = job.result or _without_done(data)
            job.finished.set()

    def _action(
        self, entry: ContextEntry, request: SendRequest
    ) -> Callable[..., Awaitable[AgentResult | SwarmResult]]:
        """What to call on the Agent; refuses what cannot start, before anything runs."""
        agent = entry.agent
        pending = agent.pending_interrupts
        if request.resume is None:
            if pending:
                raise InterruptPendingError(
                    f"the conversation waits for a decision on interrupt {pending[0].id}; "
                    "resume it (or cancel it) first",
                    interrupt_id=pending[0].id,
                )
            return partial(agent.invoke_async, request.prompt())
        resume = request.resume
        match = next((item for item in pending if item.id == resume.interrupt_id), None)
        if match is None:
            raise InterruptNotFoundError(f"no pending interrupt has the id {resume.interrupt_id!r}")
        decision: Decision = (
            CancelRun() if resume.cancel else decision_from_json(match.kind, resume.decision)
        )
        return partial(agent.resume_async, resume.interrupt_id, decision)

    async def _run(self, job: RunJob, entry: ContextEntry, request: SendRequest) -> None:
        action = self._action(entry, request)
        definition = job.key.definition

        async def started(run_id: str) -> None:
            channel = await self.streams.run(job.key, run_id, resumed=request.resume is not None)
            job.start_after = channel.begin()
            job.channel = channel
            self.streams.put(channel)
            for event in job.buffered:
                self._publish(job, event)
            job.buffered.clear()
            job.began_at = time.monotonic()
            job.started.set()

        def on_event(event: RunEvent) -> None:
            if job.channel is None:
                job.buffered.append(event)
            else:
                self._publish(job, event)

        entry.on_run_started = started
        try:
            result = await action(on_event=on_event)
        except AgentkeelError as exc:
            if not job.started.is_set():
                raise
            await self._fail(job, entry, exc.code, "the turn could not be saved")
            return
        except Exception:
            if not job.started.is_set():
                raise
            logger.exception("session=<%s> | a turn failed unexpectedly", job.key.session_id)
            await self._fail(job, entry, "internal_error", "internal server error")
            return
        if not isinstance(result, AgentResult | SwarmResult) or job.channel is None:
            raise RuntimeError("internal error: a run ended without a result or a start")
        await self._finish(job, job.channel, done_frame(job.key.context_id, result))
        job.result = send_result(job.key.context_id, result)
        self.metrics.runs.inc(definition, result.status)
        self.metrics.turn_seconds.observe(time.monotonic() - job.began_at, definition)

    def _publish(self, job: RunJob, event: RunEvent) -> None:
        channel = job.channel
        if channel is None:
            return
        channel.publish(event_frame(job.key.context_id, channel.run_id, event))
        if isinstance(event, TokenEvent) and not job.first_token:
            job.first_token = True
            elapsed = time.monotonic() - job.began_at
            self.metrics.first_token_seconds.observe(elapsed, job.key.definition)
        elif isinstance(event, ToolResultEvent):
            self.metrics.tool_calls.inc(job.key.definition, event.name, event.status)

    async def _finish(self, job: RunJob, channel: RunChannel, data: JSONObject) -> None:
        done = channel.next_frame(data)
        await self.streams.persist(channel, done)
        channel.append(done)

    async def _fail(self, job: RunJob, entry: ContextEntry, code: str, message: str) -> None:
        """A started turn broke outside the Agent's own handling: end its stream cleanly.

        The Agent's memory may now differ from storage, so it is dropped from the cache
        and rebuilt from storage by the next request.
        """
        self.cache.discard(job.key)
        channel = job.channel
        if channel is None:
            return
        channel.publish(
            event_frame(job.key.context_id, channel.run_id, ErrorEvent(code=code, message=message))
        )
        data = failed_done_frame(job.key.context_id, channel.run_id, code, message)
        await self._finish(job, channel, data)
        job.result = _without_done(data)
        self.metrics.runs.inc(job.key.definition, "failed")


def _without_done(frame: JSONObject) -> JSONObject:
    """The SendResult fields of a done frame."""
    return {key: value for key, value in frame.items() if key != "done"}
