"""Turns run in the server's task group, not in the request that asked for them.

`ServerRuntime` is what every HTTP binding shares: the context cache, the retained
streams, the metrics and the task group of the app's lifespan. `submit` queues a turn on
its context and returns a `RunJob` as soon as the run has started (or failed before
starting, which the request then answers as an HTTP error). From there the run goes on
by itself: a client that disconnects does not cancel it; it finishes, is saved, and its
frames stay retained for a reconnect. The ``done`` frame is published only after the
Agent saved the turn and the frames were persisted.

What must be shared between replicas goes through the `Coordination` (in this
process by default, see `agentkeel.runtime.coordination`): the context's lease (turns
one at a time, in arrival order; the cancel control message reaches its holder), the
run frames' fan-out, and the Idempotency-Key claims. A request with an
``Idempotency-Key`` claims it atomically (kept for ``retention.events``); a retry, also
one that arrives at the same instant, gets the original job back and waits for it or
follows its stream.

Bindings use the narrow surface of `RunFacade`: submit a turn, follow a run's frames
from an id, cancel a run, read its record.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import anyio
from anyio.abc import TaskGroup

from agentkeel.errors import ContextNotFoundError
from agentkeel.framework import Framework
from agentkeel.hooks.events import HookEvent
from agentkeel.hooks.registry import HookCallback
from agentkeel.memory.attach import attach_memory
from agentkeel.messages import JSONValue, Message
from agentkeel.runtime.admission import Admission
from agentkeel.runtime.channels import Frame
from agentkeel.runtime.contexts import ContextCache, ContextEntry
from agentkeel.runtime.control import cancel_context, preempt
from agentkeel.runtime.coordination import (
    Announcements,
    Coordination,
    IdempotencyScope,
    RunStream,
    in_process_coordination,
)
from agentkeel.runtime.errors import ShuttingDownError
from agentkeel.runtime.idempotency import IDEMPOTENCY_CAPACITY
from agentkeel.runtime.metering import check_daily_budget, metered, price_of
from agentkeel.runtime.metrics import ServerMetrics
from agentkeel.runtime.toolsets import managed_toolsets, release_toolsets
from agentkeel.runtime.turns import RunJob, TurnRunner
from agentkeel.runtime.wire import SendRequest
from agentkeel.serving import Served
from agentkeel.storage.base import RunRecord, SessionKey
from agentkeel.storage.transcript import read_transcript

__all__ = ["IDEMPOTENCY_CAPACITY", "RunJob", "ServerRuntime", "TurnRunner"]

logger = logging.getLogger(__name__)

_SWEEP_SECONDS = 30.0
_CANCEL_GRACE_SECONDS = 5.0
_RECHECK_SECONDS = 5.0


class ServerRuntime:
    """The server's shared state: contexts, streams, metrics and the running turns.

    Args:
        framework: The definitions, storage and settings served.
        coordination: What this runtime shares with other replicas (default: kept in
            this process, for a single server).
    """

    def __init__(
        self, framework: Framework, coordination: Coordination[RunJob] | None = None
    ) -> None:
        self.framework = framework
        self.coordination: Coordination[RunJob] = coordination or in_process_coordination(
            framework.storage, retention=framework.retention.events
        )
        self.metrics = ServerMetrics()
        self.admission = Admission(
            framework.server.limits, self.coordination.limits, self.metrics.refusals.inc
        )
        self.agent_hooks: list[tuple[type[HookEvent], HookCallback[Any]]] = []
        """Hook callbacks every served agent gets (bindings add theirs here)."""
        self.cache = ContextCache(
            {
                name: metered(name, item.factory, framework, self.metrics, self.agent_hooks)
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
        self.streams = self.coordination.fanout
        fanout = self.streams
        self.announcements = fanout if isinstance(fanout, Announcements) else None
        self.metrics.cached_contexts.read = lambda: float(len(self.cache))
        self.metrics.queued_turns.read = lambda: float(self.cache.queued_turns)
        self.turns = TurnRunner(
            self.coordination,
            self.cache,
            self.streams,
            self.metrics,
            price=partial(price_of, framework),
        )
        self._group: TaskGroup | None = None
        self._forgetters: list[Callable[[SessionKey], Awaitable[None]]] = []

    def _built(self, key: SessionKey, served: Served) -> None:
        """A context's Agent was built: its definition learns its tools; it gets memory."""
        self.framework.definitions[key.definition].catalog.learn(served)
        if self.framework.memory is not None:
            attach_memory(served, key, self.framework.memory)

    @property
    def draining(self) -> bool:
        """The server is shutting down: it takes no new turns."""
        return self.turns.draining

    # -- lifecycle ----------------------------------------------------------------------

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Own the task group turns run in; on exit, drain them (see `shutdown`)."""
        turns = self.turns
        turns.idle = anyio.Event()  # bound to the serving event loop, not the building one
        turns.idle.set()
        async with anyio.create_task_group() as group:
            self._group = turns.group = group
            group.start_soon(self._sweep_forever)
            try:
                yield
            finally:
                with anyio.CancelScope(shield=True):
                    await self.shutdown()
                group.cancel_scope.cancel()
                self._group = turns.group = None

    async def shutdown(self) -> None:
        """Take no new turns; let running ones finish, then cancel what is left.

        Turns get ``server.shutdownTimeoutSeconds``; after that each running Agent is
        cancelled, which ends its run ``cancelled`` with a valid, saved history.
        """
        turns = self.turns
        turns.draining = True
        with anyio.move_on_after(self.framework.server.shutdown_timeout_seconds):
            await turns.idle.wait()
        if turns.running:
            logger.warning(
                "running=<%d> | cancelling turns still running at shutdown", turns.running
            )
            for entry in self.cache.entries():
                entry.agent.cancel()
            with anyio.move_on_after(_CANCEL_GRACE_SECONDS):
                await turns.idle.wait()

    async def _sweep_forever(self) -> None:
        while True:
            await anyio.sleep(_SWEEP_SECONDS)
            self.streams.sweep()
            self.coordination.idempotency.sweep()
            self.coordination.limits.sweep()

    def _dropped(self, entry: ContextEntry) -> None:
        """A context left the cache: close what its Agent held for it alone (MCP)."""
        if self._group is not None and managed_toolsets(entry.agent):
            self._group.start_soon(
                release_toolsets, entry.agent, entry.key.principal, entry.key.context_id
            )

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
        claims = self.coordination.idempotency
        job, is_new = await claims.claim(
            scope, fingerprint, lambda: RunJob(key=key, fingerprint=fingerprint), context=key
        )
        if not is_new:
            await job.started.wait()
            if job.error is not None:
                raise job.error
            return job, False
        try:
            await self._submit(job, request)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await claims.release(scope, job)  # it never ran: a retry may run it anew
            raise
        return job, True

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
            await self.admission.admit_turn(key, request)
            if request.resume is None:
                await check_daily_budget(self.framework, key)
            entry = await self.cache.acquire(key)
            try:
                policy = request.multitask or self.framework.server.concurrency
                if policy in ("interrupt", "rollback") and request.resume is None:
                    await preempt(self, key, drop=policy == "rollback")
                elif policy == "reject":
                    job.grant = await self.coordination.lease.acquire(
                        key,
                        wait=False,
                        ttl=self.coordination.lease_ttl,
                        on_cancel=partial(self.turns.cancel_requested, job, entry),
                    )
                self.cache.join(entry)
            finally:
                self.cache.release(entry)
        except BaseException as exc:
            job.error = exc if isinstance(exc, Exception) else ShuttingDownError("abandoned")
            job.started.set()
            job.finished.set()
            job.bound.set()
            raise
        self._group.start_soon(self.turns.execute, job, entry, request)
        await job.started.wait()
        if job.error is not None:
            raise job.error
        await self.turns.acknowledged(job)
        return job

    def on_delete(self, forget: Callable[[SessionKey], Awaitable[None]]) -> None:
        """Have `forget` delete what a binding keeps for a context when it is deleted."""
        self._forgetters.append(forget)

    def on_segment(self, listener: Callable[[RunStream], None]) -> Callable[[], None]:
        """Call `listener` as each segment of a run starts; returns what stops it."""
        return self.streams.on_segment(listener)

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
        await self.coordination.idempotency.forget_context(key)
        return True

    # -- the facade bindings use ------------------------------------------------------

    def follow(self, stream: RunStream, after: int) -> AsyncGenerator[Sequence[Frame], None]:
        """The run's frames after id `after`, in batches, up to a done frame.

        An empty batch means nothing came for ``server.heartbeatSeconds``.
        """
        return stream.batches(after, self.framework.server.heartbeat_seconds)

    async def latest(self, key: SessionKey) -> RunStream | None:
        """The context's latest run, live or finished, while its frames are retained."""
        return await self.streams.latest(key)

    async def exists(self, key: SessionKey) -> bool:
        """Whether the context has anything (an Agent, a session, runs, a checkpoint)."""
        return await self.cache.exists(key)

    async def live(self, key: SessionKey, run_id: str) -> RunStream | None:
        """The run's stream while a segment of it runs, else None."""
        stream = await self.streams.latest(key)
        if stream is not None and stream.active and stream.run_id == run_id:
            return stream
        return None

    async def resumed(
        self, key: SessionKey, run_id: str, *, recheck: float = _RECHECK_SECONDS
    ) -> tuple[RunStream, int] | None:
        """Wait until a suspended run resumes: its stream and the id its new frames follow.

        The fan-out wakes this when the run's next segment starts; every `recheck`
        seconds without one, the run record says whether it still waits (a run that
        ended without a new segment, say its context was deleted, gives None).
        """
        stream = await self.streams.latest(key)
        base = stream.last_id if stream is not None and stream.run_id == run_id else 0
        while True:
            stream = await self.streams.latest(key)
            if stream is not None and stream.run_id == run_id and stream.last_id > base:
                return stream, base
            if stream is not None and stream.run_id == run_id and stream.active:
                return stream, base
            if stream is not None and stream.run_id != run_id:
                record = await self.run_record(key, run_id)
                if record is None or record.status != "suspended":
                    return None
            if not await self.streams.next_segment(key, run_id, recheck):
                record = await self.run_record(key, run_id)
                if record is None or record.status != "suspended":
                    return None

    async def cancel(self, key: SessionKey, run_id: str) -> bool:
        """Have the process holding the context cancel `run_id`; whether it was running.

        The run ends ``cancelled``, with a saved history.
        """
        return await self.coordination.lease.cancel(key, run_id)

    async def cancel_context(self, key: SessionKey) -> str:
        """Stop the context's run, or abandon its suspended one; returns its run id.

        Raises:
            ContextNotFoundError: No such context for this principal.
            NoActiveRunError: Nothing is running or suspended on it.
        """
        return await cancel_context(self, key)

    async def run_record(self, key: SessionKey, run_id: str) -> RunRecord | None:
        """The stored record of a run (None while its first segment runs)."""
        return await self.framework.storage.get_run(key, run_id)

    async def transcript(self, key: SessionKey) -> list[Message]:
        """The messages SPEC 3's transcript shows (committed turns, with their ids)."""
        return await read_transcript(self.framework.storage, key)
