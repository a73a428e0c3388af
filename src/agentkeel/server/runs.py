"""Turns run in the server's task group, not in the request that asked for them.

`ServerRuntime` is what every HTTP binding shares: the context cache, the retained
streams, the metrics and the task group of the app's lifespan. `submit` queues a turn on
its context and returns a `RunJob` as soon as the run has started (or failed before
starting, which the request then answers as an HTTP error). From there the run goes on
by itself: a client that disconnects does not cancel it; it finishes, is saved, and its
frames stay retained for a reconnect. The ``done`` frame is published only after the
Agent saved the turn and the frames were persisted.

Idempotency: a request with an ``Idempotency-Key`` claims it atomically
(`IdempotencyClaims`, kept for ``retention.events``); a retry, also one that arrives
at the same instant, gets the original job back and waits for it or follows its stream.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import anyio
from anyio.abc import TaskGroup

from agentkeel.agent import Agent
from agentkeel.errors import (
    AgentkeelError,
    BudgetExceededError,
    ContextNotFoundError,
    InterruptNotFoundError,
    InterruptPendingError,
)
from agentkeel.events import ErrorEvent, RunEvent, TokenEvent, ToolResultEvent
from agentkeel.framework import Framework
from agentkeel.hooks.events import AfterModelCallEvent, HookEvent
from agentkeel.hooks.registry import HookCallback
from agentkeel.interrupts import CancelRun, Decision, decision_from_json
from agentkeel.memory.attach import attach_memory
from agentkeel.messages import JSONObject, JSONValue
from agentkeel.multiagent import Swarm, SwarmResult
from agentkeel.result import AgentResult
from agentkeel.server.contexts import ContextCache, ContextEntry, TurnTicket
from agentkeel.server.errors import ShuttingDownError
from agentkeel.server.idempotency import IDEMPOTENCY_CAPACITY, IdempotencyClaims, IdempotencyScope
from agentkeel.server.metrics import ServerMetrics
from agentkeel.server.streaming import RetainedStreams, RunChannel
from agentkeel.server.toolsets import managed_toolsets, release_toolsets
from agentkeel.server.wire import (
    SendRequest,
    done_frame,
    event_frame,
    failed_done_frame,
    send_result,
)
from agentkeel.serving import Served, ServedFactory
from agentkeel.storage.base import SessionKey
from agentkeel.storage.usage import UsageStorage, utc_day
from agentkeel.usage import ModelPrice, seconds_until_utc_midnight

__all__ = ["IDEMPOTENCY_CAPACITY", "RunJob", "ServerRuntime"]

logger = logging.getLogger(__name__)

_SWEEP_SECONDS = 30.0
_CANCEL_GRACE_SECONDS = 5.0


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
    binding: object = None
    """What the binding whose request started the turn keeps with it (the A2A task
    record), for the requests that joined it with the same idempotency key."""
    bound: anyio.Event = field(default_factory=anyio.Event)
    """Set once `binding` is (or will never be) set."""
    began_at: float = field(default_factory=time.monotonic)
    first_token: bool = False
    buffered: list[RunEvent] = field(default_factory=list)


class ServerRuntime:
    """The server's shared state: contexts, streams, metrics and the running turns."""

    def __init__(self, framework: Framework) -> None:
        self.framework = framework
        self.metrics = ServerMetrics()
        self.cache = ContextCache(
            {
                name: self._metered(name, item.factory)
                for name, item in framework.definitions.items()
            },
            framework.storage,
            framework.checkpointer,
            max_contexts=framework.max_contexts,
            policy=framework.server.concurrency,
            on_evict=self.metrics.evictions.inc,
            on_drop=self._dropped,
            swarms=frozenset(
                name for name, item in framework.definitions.items() if item.kind == "swarm"
            ),
            on_built=self._built,
        )
        self.streams = RetainedStreams(framework.storage, framework.retention.events)
        self.metrics.cached_contexts.read = lambda: float(len(self.cache))
        self.metrics.queued_turns.read = lambda: float(self.cache.queued_turns)
        self.draining = False
        self.agent_hooks: list[tuple[type[HookEvent], HookCallback[Any]]] = []
        """Hook callbacks every served agent gets (bindings add theirs here)."""
        self._group: TaskGroup | None = None
        self.claims: IdempotencyClaims[RunJob] = IdempotencyClaims(
            framework.retention.events or 86_400.0
        )
        self._forgetters: list[Callable[[SessionKey], Awaitable[None]]] = []
        self._running = 0
        self._idle = anyio.Event()
        self._idle.set()

    def _built(self, key: SessionKey, served: Served) -> None:
        """A context's Agent was built: its definition learns its tools; it gets memory."""
        self.framework.definitions[key.definition].catalog.learn(served)
        if self.framework.memory is not None:
            attach_memory(served, key, self.framework.memory)

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
            self.claims.sweep()

    def _dropped(self, entry: ContextEntry) -> None:
        """A context left the cache: close what its Agent held for it alone (MCP)."""
        if self._group is not None and managed_toolsets(entry.agent):
            self._group.start_soon(
                release_toolsets, entry.agent, entry.key.principal, entry.key.context_id
            )

    # -- usage and budgets ---------------------------------------------------------------

    def _metered(self, definition: str, factory: ServedFactory) -> ServedFactory:
        """`factory`, its agents counting tokens in the metrics, under the budgets.

        An agent that sets budgets of its own keeps them; others get the framework's.
        """

        def count(event: AfterModelCallEvent) -> None:
            usage = event.usage
            for kind, amount in (
                ("input", usage.input_tokens),
                ("output", usage.output_tokens),
                ("cached", usage.cached_tokens),
                ("reasoning", usage.reasoning_tokens),
            ):
                if amount:
                    self.metrics.tokens.inc(definition, kind, amount=float(amount))

        def build(context_id: str) -> Served:
            served = factory(context_id)
            agents = served.members.values() if isinstance(served, Swarm) else (served,)
            for agent in agents:
                if not isinstance(agent, Agent):
                    continue  # the cache refuses what is not servable
                if not agent.budgets.any:
                    agent.budgets = self.framework.usage.budgets
                agent.hooks.add_callback(AfterModelCallEvent, count)
                for event_type, callback in self.agent_hooks:
                    agent.hooks.add_callback(event_type, callback)
            return served

        return build

    async def _check_daily_budget(self, key: SessionKey) -> None:
        """Refuse a new turn of a principal whose tokens for today are spent (429)."""
        limit = self.framework.usage.budgets.tokens_per_principal_per_day
        storage = self.framework.storage
        if limit is None or not isinstance(storage, UsageStorage):
            return
        now = time.time()
        spent = await storage.principal_usage(key.principal, utc_day(now))
        if spent.total_tokens >= limit:
            raise BudgetExceededError(
                f"today's budget of {limit} tokens is used; it renews at midnight UTC",
                retry_after=seconds_until_utc_midnight(now),
            )

    def _price(self, entry: ContextEntry) -> ModelPrice | None:
        agent = entry.agent
        return self.framework.usage.price(agent.model.name) if isinstance(agent, Agent) else None

    # -- submitting a turn --------------------------------------------------------------

    async def submit(
        self,
        key: SessionKey,
        request: SendRequest,
        *,
        idempotency_key: str | None = None,
        body: JSONValue = None,
        sent_context_id: str | None = None,
    ) -> RunJob:
        """Queue a turn and return once it started (see `submit_claimed`)."""
        job, _ = await self.submit_claimed(
            key,
            request,
            idempotency_key=idempotency_key,
            body=body,
            sent_context_id=sent_context_id,
        )
        return job

    async def submit_claimed(
        self,
        key: SessionKey,
        request: SendRequest,
        *,
        idempotency_key: str | None = None,
        body: JSONValue = None,
        sent_context_id: str | None = None,
    ) -> tuple[RunJob, bool]:
        """Queue a turn and return once it started; raise what stopped it from starting.

        Returns the job and whether this request started it (False: it joined the run
        of an earlier request with the same idempotency key).

        Args:
            key: The context (definition, contextId, principal).
            request: The parsed request.
            idempotency_key: The client's Idempotency-Key header, if any.
            body: The raw request body, fingerprinted to detect a reused key.
            sent_context_id: The contextId as the client sent it (None: a new one).
        """
        if idempotency_key is None:
            return await self._submit(RunJob(key=key, fingerprint=""), request), True
        encoded = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
        fingerprint = hashlib.sha256(encoded).hexdigest()
        scope = IdempotencyScope(key.principal, key.definition, sent_context_id, idempotency_key)
        job, is_new = self.claims.claim(
            scope, fingerprint, lambda: RunJob(key=key, fingerprint=fingerprint)
        )
        if not is_new:
            await job.started.wait()
            if job.error is not None:
                raise job.error
            return job, False
        try:
            return await self._submit(job, request), True
        except BaseException:
            self.claims.release(scope, job)  # it never ran: a retry may run it anew
            raise

    async def _submit(self, job: RunJob, request: SendRequest) -> RunJob:
        """Start `job`; what stops it before its run starts is raised (and told to waiters)."""
        key = job.key
        try:
            if self._group is None:
                raise ShuttingDownError("the server is not running (was its lifespan started?)")
            if self.draining:
                raise ShuttingDownError("the server is shutting down and takes no new turns")
            if request.resume is not None and not await self.cache.exists(key):
                # a decision needs a conversation: for an unknown context (or another
                # principal's) answer like every other endpoint, and build nothing
                raise ContextNotFoundError(f"no context {key.context_id!r} for this agent")
            if request.resume is None:
                await self._check_daily_budget(key)
            entry = await self.cache.acquire(key)
            try:
                ticket = self.cache.join(entry)
            finally:
                self.cache.release(entry)
        except BaseException as exc:
            job.error = exc if isinstance(exc, Exception) else ShuttingDownError("abandoned")
            job.started.set()
            job.finished.set()
            job.bound.set()
            raise
        self._group.start_soon(self._execute, job, entry, ticket, request)
        await job.started.wait()
        if job.error is not None:
            raise job.error
        return job

    def on_delete(self, forget: Callable[[SessionKey], Awaitable[None]]) -> None:
        """Have `forget` delete what a binding keeps for a context when it is deleted."""
        self._forgetters.append(forget)

    async def delete_context(self, key: SessionKey) -> bool:
        """Forget a context everywhere (SPEC guarantee 13); False if it is unknown.

        The bindings' records (A2A tasks) go first, then the sessions, runs and
        checkpoints (a swarm's members too), then the retained frames and the
        idempotency keys, so nothing of it comes back when the id is used again.

        Raises:
            RunInProgressError: A turn is running or queued on the context.
        """

        async def forget_bindings(target: SessionKey) -> None:
            for forget in self._forgetters:
                await forget(target)

        if not await self.cache.delete(key, before=forget_bindings):
            return False
        self.streams.drop(key)
        self.claims.forget(lambda job: job.key == key)
        return True

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
        price = self._price(entry)
        await self._finish(job, job.channel, done_frame(job.key.context_id, result, price=price))
        job.result = send_result(job.key.context_id, result, price=price)
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
