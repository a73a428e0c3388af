"""Coordination: what the processes serving one set of contexts must agree on.

One process can keep all of it in memory; several replicas need a shared backend
(Redis, PostgreSQL). Each part is one small Protocol, so a backend swaps in part by
part, and each has a conformance suite in `agentkeel.testing` that every backend runs:

- `RunLease`: one turn at a time per context, in arrival order, with a fencing token
  that only grows (a write carrying an older token is from a holder that lost the
  lease), expiry for a holder that stopped renewing, and the cancel control message,
  delivered to whichever process holds the context.
- `StreamFanout`: a run's numbered frames, published once and followed by any number
  of readers from any frame id; and which run is a context's latest.
- `IdempotencyStore`: one claim per Idempotency-Key, atomically, so a retry (even one
  arriving at the same instant) finds the run the first request started.
- `LimitCounters`: the counters behind ``server.limits`` (streams held, turns in the
  last minute), so a principal's limits hold across replicas.

`in_process_coordination` builds the implementations that keep everything in this
process: the server's default, and the reference the conformance suites were written
against.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar, runtime_checkable

from agentkeel.errors import AgentkeelError
from agentkeel.messages import JSONObject
from agentkeel.storage.base import SessionKey, SessionStorage

if TYPE_CHECKING:
    from agentkeel.runtime.channels import Frame

__all__ = [
    "Announcements",
    "Coordination",
    "IdempotencyScope",
    "IdempotencyStore",
    "LeaseGrant",
    "LeaseLostError",
    "LimitCounters",
    "RunLease",
    "RunStream",
    "StreamFanout",
    "in_process_coordination",
]

T = TypeVar("T")
CancelHandler = Callable[[str, bool], bool]
"""Told a run id to cancel, and whether its turn is to be dropped from the history
(the ``rollback`` policy); returns whether it was running that run."""


class LeaseLostError(AgentkeelError):
    """The lease was taken over (it expired unrenewed): its holder must stop writing."""

    code = "lease_lost"


@dataclass(frozen=True, slots=True)
class LeaseGrant:
    """A held context: `fence` grows with every grant of the same context."""

    key: SessionKey
    fence: int
    ttl: float | None
    """Seconds the grant lasts unrenewed (None: until released)."""
    taken_over: bool = False
    """The context was still held, past its expiry: its last holder died (or was paused)
    with a run it never ended."""


class RunLease(Protocol):
    """Who may run a turn on a context now; the others wait in line, or are refused."""

    async def acquire(
        self,
        key: SessionKey,
        *,
        wait: bool = True,
        ttl: float | None = None,
        on_cancel: CancelHandler | None = None,
    ) -> LeaseGrant:
        """Hold `key`'s context, waiting behind earlier callers (in arrival order).

        Args:
            key: The context.
            wait: False refuses at once, with RunInProgressError, when the context is
                held or has callers waiting.
            ttl: Seconds before an unrenewed grant expires (None: it never does).
            on_cancel: Told the run id (and `drop`) of each `cancel` of this context
                while held.
        """
        ...

    async def renew(self, grant: LeaseGrant) -> LeaseGrant:
        """Extend the grant by its ttl; LeaseLostError when it is no longer held."""
        ...

    async def release(self, grant: LeaseGrant) -> bool:
        """Let the next caller in; False (and nothing released) for a grant no longer held."""
        ...

    async def check(self, grant: LeaseGrant) -> None:
        """Raise LeaseLostError unless `grant` still holds its context (before a write)."""
        ...

    async def cancel(self, key: SessionKey, run_id: str, *, drop: bool = False) -> bool:
        """Ask the holder of `key` to cancel `run_id`; whether a holder was running it.

        `drop` asks for the cancelled turn to leave the history as if never sent (the
        ``rollback`` policy); without it, what the run completed is kept.
        """
        ...


class RunStream(Protocol):
    """The frames of one run: all its segments, numbered from 1, fanned out to readers."""

    @property
    def key(self) -> SessionKey:
        """The context of the run."""
        ...

    @property
    def run_id(self) -> str:
        """The run."""
        ...

    @property
    def active(self) -> bool:
        """A segment is in progress (frames may still come)."""
        ...

    @property
    def last_id(self) -> int:
        """The id of the last frame (0 before the first)."""
        ...

    @property
    def frames(self) -> Sequence[Frame]:
        """Every frame retained so far, in order."""
        ...

    def begin(self) -> int:
        """Start a segment; returns the id after which its frames start."""
        ...

    def next_frame(self, data: JSONObject, text: str | None = None) -> Frame:
        """The frame `data` becomes when it is published next (not published yet)."""
        ...

    def publish(self, data: JSONObject, text: str | None = None) -> Frame:
        """Number, encode and publish one frame (`text`: `data` as compact JSON, if known)."""
        ...

    def append(self, frame: Frame) -> None:
        """Publish a frame built with `next_frame`; a done frame ends the segment."""
        ...

    def latest_segment_start(self) -> int:
        """The id after which the latest segment starts."""
        ...

    order: int
    """The fence of the lease grant its latest segment runs under (0: none); a shared
    fan-out never points a context back at a run of a lower one."""

    def batches(self, after: int, heartbeat: float) -> AsyncGenerator[Sequence[Frame], None]:
        """The frames after id `after`, in batches as they arrive, up to the next done frame.

        An empty batch means nothing arrived for `heartbeat` seconds.
        """
        ...

    def follow(self, after: int, heartbeat: float) -> AsyncGenerator[bytes, None]:
        """`batches` as SSE bytes, a keep-alive comment for an empty batch."""
        ...


class StreamFanout(Protocol):
    """The runs' frames: published once, followed by any number of readers."""

    async def run(self, key: SessionKey, run_id: str, *, resumed: bool) -> RunStream:
        """The stream of a starting run: new, or a resumed run's, to continue its ids."""
        ...

    def put(self, stream: RunStream) -> None:
        """Make `stream` its context's latest run (its segment starts: wake the waiters)."""
        ...

    async def latest(self, key: SessionKey) -> RunStream | None:
        """The context's latest run with its frames, if they are still retained."""
        ...

    def on_segment(self, listener: Callable[[RunStream], None]) -> Callable[[], None]:
        """Call `listener` as each segment of a run starts here; returns what stops it."""
        ...

    async def next_segment(self, key: SessionKey, run_id: str, timeout: float) -> bool:
        """Wait up to `timeout` seconds for a segment of `run_id` to start; whether one did."""
        ...

    async def persist(self, stream: RunStream, done: Frame) -> None:
        """Save the run's frames, `done` included, before `done` is published."""
        ...

    def retained_body(self, stream: RunStream, done: Frame) -> bytes | None:
        """What `persist` would store for `stream` and `done` (None: it stores nothing).

        A save that bundles its writes stores this body itself, with the turn's commit.
        """
        ...

    def drop(self, key: SessionKey) -> None:
        """Forget the context's retained run (the context was deleted)."""
        ...

    def sweep(self) -> int:
        """Forget what outlived its retention; returns how many runs went."""
        ...


@runtime_checkable
class Announcements(Protocol):
    """What a shared fan-out adds: a word about a run, heard by every replica.

    Best effort (a replica whose listening connection was down misses it): every
    listener keeps a fallback of its own. A fan-out kept in one process has no
    replicas to tell, and does not offer it. A backend may tell a segment's start
    (``segment``) only to the replicas waiting for it in `StreamFanout.next_segment`.
    """

    def announce(self, topic: str, key: SessionKey, run_id: str) -> None:
        """Tell every replica, this one too, `topic` about the run."""
        ...

    def on_announcement(
        self, topic: str, listener: Callable[[str, str], None]
    ) -> Callable[[], None]:
        """Call `listener` for each announcement of `topic`; returns what stops it.

        The listener gets the run's context as one string and the run's id.
        """
        ...


@dataclass(frozen=True, slots=True)
class IdempotencyScope:
    """What an Idempotency-Key is unique within: the caller, the agent, the contextId sent."""

    principal: str | None
    definition: str
    context_id: str | None
    """As the client sent it (None: the server chose a new one)."""
    key: str


class IdempotencyStore(Protocol, Generic[T]):
    """Idempotency-Keys claimed for runs: one claim per key, whoever asks first."""

    async def claim(
        self,
        scope: IdempotencyScope,
        fingerprint: str,
        new_run: Callable[[], T],
        *,
        context: SessionKey,
    ) -> tuple[T, bool]:
        """Claim `scope` atomically: the earlier claim's run, or one made by `new_run`.

        Returns ``(new run, True)`` for the first claim, else ``(earlier run, False)``;
        `context` is the context the run belongs to (`forget_context`).

        Raises:
            IdempotencyKeyReusedError: The key was claimed for a different request
                (another `fingerprint`).
        """
        ...

    async def release(self, scope: IdempotencyScope, run: T) -> None:
        """Withdraw `run`'s claim (it never started: a retry may start it anew)."""
        ...

    async def forget_context(self, context: SessionKey) -> None:
        """Drop the claims made for runs of `context` (it was deleted)."""
        ...

    def sweep(self) -> int:
        """Drop the claims older than their retention; returns how many went."""
        ...


class LimitCounters(Protocol):
    """Counters of what each principal (or context) takes, checked against a limit.

    Names are opaque strings the caller builds (``streams:<principal>``...); a backend
    only counts. Both checks are atomic: two callers at the same instant never both
    take the last unit.
    """

    async def hold(self, name: str, limit: int) -> bool:
        """Take one of `limit` slots of `name` (a stream); False (nothing taken) when full."""
        ...

    async def release(self, name: str) -> None:
        """Give back one slot of `name` taken by `hold`."""
        ...

    async def hit(self, name: str, limit: int, window: float) -> float:
        """Count one event of `name` if fewer than `limit` fell in the last `window` seconds.

        Returns 0.0 when counted, else the seconds until the oldest counted event leaves
        the window (nothing counted): the caller's ``Retry-After``.
        """
        ...

    def sweep(self) -> int:
        """Forget the names whose windows hold no event any more; returns how many went."""
        ...


def _in_process_limits() -> LimitCounters:
    from agentkeel.runtime.quotas import InProcessLimitCounters

    return InProcessLimitCounters()


@dataclass(frozen=True, slots=True)
class Coordination(Generic[T]):
    """The parts one set of servers shares, each swappable on its own."""

    lease: RunLease
    fanout: StreamFanout
    idempotency: IdempotencyStore[T]
    lease_ttl: float | None = None
    """Seconds a turn's lease lasts unrenewed; the runtime renews it every third of that
    while the turn runs. None (in one process, where a holder cannot vanish alone): no
    expiry. A shared backend sets it, so a crashed replica's contexts free themselves."""
    fenced: bool = False
    """The lease's fences outlive this process (a shared backend): the runtime passes
    them to every storage commit, which refuses a holder that lost its lease."""
    limits: LimitCounters = field(default_factory=_in_process_limits)
    """The ``server.limits`` counters (default: kept in this process)."""


def in_process_coordination(
    storage: SessionStorage,
    *,
    retention: float | None,
    idempotency_ttl: float | None = None,
    lease_ttl: float | None = None,
) -> Coordination[T]:
    """Coordination kept in this process (one server, or replicas sharing one process).

    Args:
        storage: Where finished runs' frames persist (when it can keep them).
        retention: Seconds a finished run's frames and idempotency keys stay.
        idempotency_ttl: Seconds a claim lasts (default `retention`, else one day).
        lease_ttl: Seconds a turn's lease lasts unrenewed (default: no expiry).
    """
    from agentkeel.runtime.channels import RetainedStreams
    from agentkeel.runtime.idempotency import IdempotencyClaims
    from agentkeel.runtime.lease import InProcessRunLease
    from agentkeel.runtime.quotas import InProcessLimitCounters

    ttl = idempotency_ttl or retention or 86_400.0
    return Coordination(
        lease=InProcessRunLease(),
        fanout=RetainedStreams(storage, retention),
        idempotency=IdempotencyClaims(ttl),
        lease_ttl=lease_ttl,
        limits=InProcessLimitCounters(),
    )
