"""DoneWithCommit: a turn's done frame built in its save, so its frames share the commit.

A turn's frames are persisted before its ``done`` frame is published, so that a
reconnect after the run still finds them (SPEC guarantee 1 covers the history; this
covers the stream). On its own that write is one more round trip per turn. On a storage
that bundles (`BundledCommitStorage`), the SessionManager asks this object for the
frames while it saves the turn: it builds the done frame from the result being saved
and hands back the body `StreamFanout.persist` would have stored, which then goes in
the commit's statement. When the save stored it, the runner publishes that same frame
without persisting again.

It builds nothing for a failed run (the Agent publishes its error event after the save,
so the done frame is not the next frame yet), and the runner uses the frame only while
it is still the next one of the stream: anything published in between, and the frames
are persisted as before.

A lease that lives in the storage's database (`ReleasingLease`) also hands the save its
release (`ride_release`): the statement that stores the turn frees the context, one
round trip fewer per turn. Only with the frames: a save that did not store them leaves
a write for after it, which must not land once another replica holds the context. A
save that was refused frees nothing, and the runner releases as before.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Protocol, cast, runtime_checkable

from agentkeel.agent import Agent
from agentkeel.result import AgentResult
from agentkeel.runtime.channels import Frame
from agentkeel.runtime.coordination import (
    Coordination,
    LeaseGrant,
    RunLease,
    RunStream,
    StreamFanout,
)
from agentkeel.runtime.wire import done_frame
from agentkeel.serving import Served
from agentkeel.session import SessionManager
from agentkeel.storage.base import SessionStorage
from agentkeel.storage.bundled import RidingRelease
from agentkeel.usage import ModelPrice

__all__ = ["DoneWithCommit", "ReleasingLease", "ride_with_commit"]


@runtime_checkable
class ReleasingLease(Protocol):
    """Optional capability of a `RunLease`: a commit to its database can release it."""

    def riding_release(self, grant: LeaseGrant, storage: SessionStorage) -> RidingRelease | None:
        """`grant`'s release for a commit to `storage` to make (None: it cannot)."""
        ...

    def forget(self, grant: LeaseGrant) -> None:
        """`grant` was released by a commit: stop answering for it."""
        ...


def ride_with_commit(
    served: Served,
    streams: StreamFanout,
    channel: RunStream,
    context_id: str,
    price: ModelPrice | None,
    release: tuple[Coordination[Any], LeaseGrant | None, Callable[[], None]] | None = None,
) -> DoneWithCommit | None:
    """Hand the turn's frames to the save of `served` (an Agent with a session), or None.

    A swarm saves each member in a session of its own, and its done frame is the
    swarm's: its frames are persisted apart, as before. `release` is (the coordination,
    the turn's grant, what to tell once a save released it): see `ride_release`; only a
    fenced coordination's grant can ride.
    """
    manager = served.session_manager if isinstance(served, Agent) else None
    if manager is None:
        return None
    riding = DoneWithCommit(streams, channel, context_id, price)
    riding.manager = manager
    manager.done_frames = riding
    if release is not None and release[0].fenced and release[1] is not None:
        riding.ride_release(release[0].lease, release[1], release[2])
    return riding


@functools.cache
def _releases(lease_type: type) -> bool:
    """Whether a lease class is a `ReleasingLease` (cached: a Protocol check is slow)."""
    return issubclass(lease_type, ReleasingLease)


class DoneWithCommit:
    """`CommitFrames` of one turn of an Agent: its stream, its context, its price."""

    def __init__(
        self, streams: StreamFanout, channel: RunStream, context_id: str, price: ModelPrice | None
    ) -> None:
        self.streams = streams
        self.channel = channel
        self.context_id = context_id
        self.price = price
        self.manager: SessionManager | None = None
        self.release: RidingRelease | None = None
        """The turn's lease release, for the save that stores the frames to make."""
        self._on_released: Callable[[], None] | None = None
        self._built: tuple[AgentResult, Frame] | None = None
        self._stored: tuple[AgentResult, Frame] | None = None

    def ride_release(
        self, lease: RunLease, grant: LeaseGrant, on_released: Callable[[], None]
    ) -> None:
        """Have the save that stores the frames release `grant`, if `lease` can.

        `on_released` is told when a save did: the turn then has no lease to release.
        """
        if not _releases(type(lease)) or self.manager is None:
            return
        releasing = cast(ReleasingLease, lease)
        self.release = releasing.riding_release(grant, self.manager.storage)

        def released() -> None:
            releasing.forget(grant)
            on_released()

        self._on_released = released

    def detach(self) -> None:
        """The turn is over: its manager's next save is not this turn's."""
        if self.manager is not None and self.manager.done_frames is self:
            self.manager.done_frames = None
        self.manager = None

    def frames(self, result: AgentResult) -> tuple[str, bytes] | None:
        """The run's frames with the done frame of `result`, as `persist` stores them."""
        if result.status == "failed":
            return None
        done = self.channel.next_frame(done_frame(self.context_id, result, price=self.price))
        body = self.streams.retained_body(self.channel, done)
        if body is None:
            return None
        self._built = (result, done)
        return self.channel.run_id, body

    def committed(self, result: AgentResult) -> None:
        """The save of `result` stored the frames built for it."""
        if self._built is not None and self._built[0] is result:
            self._stored = self._built
            if self.release is not None and self._on_released is not None:
                self.release, released, self._on_released = None, self._on_released, None
                released()

    def done(self, result: AgentResult) -> Frame | None:
        """The done frame stored with the save of `result`, while it is the next frame."""
        if self._stored is None:
            return None
        saved, frame = self._stored
        if saved is not result or frame.id != self.channel.last_id + 1:
            return None
        return frame
