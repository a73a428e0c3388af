"""How one submitted turn runs: the context's lease, the Agent call, its frames, its end.

`TurnRunner.execute` is the task of one turn, started in the server's task group by
`ServerRuntime.submit`: it waits for the context's lease (the line keeps the order of
arrival), renews it while the turn runs when the coordination gives leases a ttl,
answers the cancel control message for its run, calls the Agent, publishes every event
as a frame, and publishes the ``done`` frame only after the Agent saved the turn and
the frames were persisted. It never raises into the task group.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial

import anyio
from anyio.abc import TaskGroup

from agentkeel.agent import Agent
from agentkeel.errors import (
    AgentkeelError,
    InterruptNotFoundError,
    InterruptPendingError,
    InvalidRequestError,
    RunInProgressError,
)
from agentkeel.events import ErrorEvent, RunEvent, TokenEvent, ToolResultEvent
from agentkeel.ids import new_run_id
from agentkeel.interrupts import CancelRun, Decision, decision_from_json
from agentkeel.messages import JSONObject
from agentkeel.multiagent import Swarm, SwarmResult
from agentkeel.result import AgentResult
from agentkeel.runtime.contexts import ContextCache, ContextEntry
from agentkeel.runtime.coordination import Coordination, LeaseGrant, RunStream, StreamFanout
from agentkeel.runtime.done_frames import ride_with_commit
from agentkeel.runtime.errors import ShuttingDownError
from agentkeel.runtime.fencing import fence_commits
from agentkeel.runtime.grant_reads import forget, take_lease
from agentkeel.runtime.lost_runs import record_lost_run
from agentkeel.runtime.metrics import ServerMetrics
from agentkeel.runtime.renewals import Renewals
from agentkeel.runtime.wire import (
    SendRequest,
    done_frame,
    event_frame,
    failed_done_frame,
    send_result,
    token_frame_json,
    without_done,
)
from agentkeel.storage.base import SessionKey
from agentkeel.usage import ModelPrice

__all__ = ["RunJob", "TurnRunner"]

logger = logging.getLogger(__name__)

_CANCEL_RETRY_SECONDS = 0.01
_ACKNOWLEDGE_SECONDS = 2.0


@dataclass(eq=False, slots=True)
class RunJob:
    """One submitted turn: how it started, where its frames go, and how it ended."""

    key: SessionKey
    fingerprint: str
    started: anyio.Event = field(default_factory=anyio.Event)
    finished: anyio.Event = field(default_factory=anyio.Event)
    error: Exception | None = None
    """Why the turn never started (set before `started` is)."""
    channel: RunStream | None = None
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
    grant: LeaseGrant | None = None
    """The context's lease while the turn holds it (its fence guards the turn's writes)."""
    released: bool = False  # by the turn's commit (`DoneWithCommit.ride_release`)
    still_claimed: Callable[[], Awaitable[bool]] | None = None
    """Whether its shared Idempotency-Key claim is still this turn's (None: no claim);
    asked once the lease came, since a retry elsewhere may have taken it over."""
    claim_written: anyio.Event | None = None
    """Set once the shared claim names the started run (None: no shared claim); the
    request is answered after it, so that a retry elsewhere finds what it acknowledged."""


class TurnRunner:
    """Runs the submitted turns; counts them, so that a shutdown can wait for them.

    Args:
        coordination: Where the context's lease comes from.
        cache: The context cache (a turn that broke is dropped from it).
        streams: Where the run's frames go.
        metrics: What the turns count and time.
        price: The price of an entry's model, for the cost in its SendResult.
    """

    def __init__(
        self,
        coordination: Coordination[RunJob],
        cache: ContextCache,
        streams: StreamFanout,
        metrics: ServerMetrics,
        *,
        price: Callable[[ContextEntry], ModelPrice | None] = lambda entry: None,
    ) -> None:
        self.coordination = coordination
        self.price = price
        self.cache = cache
        self.streams = streams
        self.metrics = metrics
        self.draining = False
        """Set by the shutdown: a turn whose lease comes now is abandoned."""
        self.group: TaskGroup | None = None
        """The server's task group (the lease renewals run there)."""
        self.renewals = Renewals(coordination.lease)
        self.running = 0
        """Turns running now (past their wait for the lease)."""
        self.idle = anyio.Event()
        """Set while no turn runs."""
        self.idle.set()

    def _lost_lease(self, job: RunJob, entry: ContextEntry, exc: Exception) -> None:
        """A renewal of the turn's lease failed: cancel the turn (another may run it)."""
        if job.released:  # by its commit: a later renewal fails, as it should
            return
        logger.warning(
            "session=<%s> | the turn lost its lease, cancelling it: %r", job.key.session_id, exc
        )
        entry.agent.cancel()

    def cancel_requested(self, job: RunJob, entry: ContextEntry, run_id: str, drop: bool) -> bool:
        """The cancel control message reached this process, which holds the context.

        The run may be between its start and its run loop (or a swarm between two
        members), where there is nothing to cancel yet: then the cancel is tried again
        until it lands or the run ends.
        """
        channel = job.channel
        if channel is None or channel.run_id != run_id or not channel.active:
            return False
        if not _cancel(entry, drop) and self.group is not None:
            self.group.start_soon(self._cancel_when_running, channel, entry, drop)
        return True

    async def _cancel_when_running(
        self, channel: RunStream, entry: ContextEntry, drop: bool
    ) -> None:
        while channel.active and not _cancel(entry, drop):
            await anyio.sleep(_CANCEL_RETRY_SECONDS)

    async def acknowledged(self, job: RunJob) -> None:
        """Wait (briefly) until what a started turn's answer acknowledges is shared.

        The run's pointer and first frames reach the fan-out, and its shared claim names
        the run, before the request is answered: if this replica dies right after, the
        context's next holder finds the run to record it failed, and a retry with the
        Idempotency-Key finds it in the claim (`agentkeel.runtime.lost_runs`).
        """
        flush = getattr(self.streams, "flush", None)
        with anyio.move_on_after(_ACKNOWLEDGE_SECONDS):
            if callable(flush):
                await flush()
            if job.claim_written is not None:
                await job.claim_written.wait()

    # -- running a turn -----------------------------------------------------------------

    async def execute(self, job: RunJob, entry: ContextEntry, request: SendRequest) -> None:
        """The task of one turn; it never raises into the task group."""
        lease = self.coordination.lease
        try:
            if job.grant is None:  # first thing: the line keeps the order of arrival
                job.grant = await take_lease(
                    lease,
                    entry.agent,
                    job.key,
                    ttl=self.coordination.lease_ttl,
                    on_cancel=partial(self.cancel_requested, job, entry),
                )
            await self._admit(job, job.grant)
            fence = job.grant.fence if self.coordination.fenced else None
            fence_commits(entry.agent, fence)
            renewal = None
            if job.grant.ttl is not None and self.group is not None:
                renewal = self.renewals.add(
                    job.grant,
                    self.group,
                    on_renewed=partial(setattr, job, "grant"),
                    on_lost=partial(self._lost_lease, job, entry),
                )
            self.running += 1
            if self.running == 1:
                self.idle = anyio.Event()
            self.metrics.active_runs.inc()
            try:
                await self._run(job, entry, request)
            finally:
                if renewal is not None:
                    self.renewals.remove(renewal)
                self.running -= 1
                self.metrics.active_runs.dec()
                if not self.running:
                    self.idle.set()
        except Exception as exc:
            if job.started.is_set():
                logger.exception("session=<%s> | a turn failed", job.key.session_id)
            else:
                job.error = exc
        finally:
            forget(entry.agent)
            if job.grant is not None and not job.released:
                with anyio.CancelScope(shield=True):
                    await self._release(job.key, job.grant)
            self.cache.leave(entry)
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
                job.result = job.result or without_done(data)
            job.finished.set()

    async def _release(self, key: SessionKey, grant: LeaseGrant) -> None:
        """Release the turn's lease; one that cannot be released expires by itself.

        A failed release (PostgreSQL unavailable, or no pooled connection in time) must
        not escape: the turn's request would never be answered, and the error would stop
        every turn of this server. The grant's ttl frees the context instead.
        """
        try:
            await self.coordination.lease.release(grant)
        except Exception as exc:
            logger.warning(
                "session=<%s> | the lease could not be released, it expires in %ss: %r",
                key.session_id,
                grant.ttl,
                exc,
            )

    async def _admit(self, job: RunJob, grant: LeaseGrant) -> None:
        """The lease came: check that the turn may still run; record a dead holder's run."""
        if self.draining:
            raise ShuttingDownError("the server is shutting down and takes no new turns")
        if job.still_claimed is not None and not await job.still_claimed():
            raise RunInProgressError(
                "a retry with this Idempotency-Key runs the turn on another server"
            )
        if grant.taken_over:  # its last holder died: say what became of its run
            await record_lost_run(self.streams, self.cache.storage, job.key)

    def _action(
        self, entry: ContextEntry, request: SendRequest
    ) -> tuple[str, Callable[..., Awaitable[object]]]:
        """The run's id and what to call on the Agent; refuses what cannot start.

        The runtime chooses a new run's id, so that its frames have their channel before
        the run starts; a resumed run keeps the id of the run it resumes.
        """
        agent = entry.agent
        pending = agent.pending_interrupts
        if request.resume is None:
            if pending:
                raise InterruptPendingError(
                    f"the conversation waits for a decision on interrupt {pending[0].id}; "
                    "resume it (or cancel it) first",
                    interrupt_id=pending[0].id,
                )
            new = new_run_id()
            rewind = request.rewind()
            if rewind is None:
                return new, partial(agent.invoke_async, request.prompt(), run_id=new)
            if not isinstance(agent, Agent | Swarm):
                raise InvalidRequestError("this definition's conversations cannot be edited")
            return new, partial(agent.rewind_async, rewind, run_id=new)
        resume = request.resume
        match = next((item for item in pending if item.id == resume.interrupt_id), None)
        run_id = agent.suspended_run_id
        if match is None or run_id is None:
            raise InterruptNotFoundError(f"no pending interrupt has the id {resume.interrupt_id!r}")
        decision: Decision = (
            CancelRun() if resume.cancel else decision_from_json(match.kind, resume.decision)
        )
        return run_id, partial(agent.resume_async, resume.interrupt_id, decision)

    async def _run(self, job: RunJob, entry: ContextEntry, request: SendRequest) -> None:
        run_id, action = self._action(entry, request)
        definition = job.key.definition
        channel = await self.streams.run(job.key, run_id, resumed=request.resume is not None)

        def started() -> None:
            if job.grant is not None and self.coordination.fenced:
                fence_commits(entry.agent, job.grant.fence)  # a swarm's members are attached now
                channel.order = job.grant.fence
            job.start_after = channel.begin()
            job.channel = channel
            self.streams.put(channel)
            job.began_at = time.monotonic()
            job.started.set()

        def on_event(event: RunEvent) -> None:
            self._publish(job, event)

        price = self.price(entry)
        riding = ride_with_commit(
            entry.agent, self.streams, channel, job.key.context_id, price,
            release=(self.coordination, job.grant, partial(setattr, job, "released", True)),
        )  # fmt: skip
        try:
            result = await action(on_event=on_event, on_start=started)
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
        finally:
            if riding is not None:
                riding.detach()
        if not isinstance(result, AgentResult | SwarmResult) or job.channel is None:
            raise RuntimeError("internal error: a run ended without a result or a start")
        stored = None if riding is None or isinstance(result, SwarmResult) else riding.done(result)
        if stored is not None:  # persisted with the turn's commit
            job.channel.append(stored)
        else:
            data = done_frame(job.key.context_id, result, price=price)
            await self._finish(job, job.channel, data)
        job.result = send_result(job.key.context_id, result, price=price)
        self.metrics.runs.inc(definition, result.status)
        if (rewind := request.rewind()) is not None:
            self.metrics.edits.inc(definition, rewind.kind)
        self.metrics.turn_seconds.observe(time.monotonic() - job.began_at, definition)

    def _publish(self, job: RunJob, event: RunEvent) -> None:
        channel = job.channel
        if channel is None:
            return
        context_id, run_id = job.key.context_id, channel.run_id
        data = event_frame(context_id, run_id, event)
        channel.publish(data, token_frame_json(context_id, run_id, event))
        if isinstance(event, TokenEvent) and not job.first_token:
            job.first_token = True
            elapsed = time.monotonic() - job.began_at
            self.metrics.first_token_seconds.observe(elapsed, job.key.definition)
        elif isinstance(event, ToolResultEvent):
            self.metrics.tool_calls.inc(job.key.definition, event.name, event.status)

    async def _finish(self, job: RunJob, channel: RunStream, data: JSONObject) -> None:
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
        job.result = without_done(data)
        self.metrics.runs.inc(job.key.definition, "failed")


def _cancel(entry: ContextEntry, drop: bool) -> bool:
    """Cancel the entry's run; `drop` leaves its turn out of the history (a rollback)."""
    return entry.agent.cancel(drop=drop)
