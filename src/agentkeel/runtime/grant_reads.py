"""A stale turn's catch-up read, made by the statement that grants its lease.

A turn on a replica whose cached Agent is behind takes the context's lease, then reads
what it missed (`SessionManager.refresh`): two round trips to one database when the
lease lives in the storage's PostgreSQL (`PostgresRunLease`). A lease that offers
`ReadingLease` runs the read in its grant statement instead, and the Agent's next
`refresh` takes the answer (`SessionManager.prefetched`) rather than reading again.

It is an optional capability: the `RunLease` Protocol, and every other lease, stay as
they are. The read is handed over only when it is right to use:

- the lease says so only when the grant's snapshot holds every commit of the earlier
  grants (`pg_lease_sql._TRUSTED`), else the Agent reads on its own as before;
- `refresh` uses it only if the Agent's history and version are still those it was
  made from (`SessionManager.catch_up_point`);
- it belongs to one turn: `forget` drops one that turn did not use.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Protocol, cast, runtime_checkable

from agentkeel.agent import Agent
from agentkeel.runtime.coordination import CancelHandler, LeaseGrant, RunLease
from agentkeel.serving import Served
from agentkeel.session import SessionManager
from agentkeel.session_records import Prefetched, notes_checkpoints
from agentkeel.storage.base import SessionKey
from agentkeel.storage.postgres_pool import Row
from agentkeel.storage.postgres_since import FoldedCatchUp, PostgresSince

__all__ = ["ReadingLease", "forget", "take_lease"]

logger = logging.getLogger(__name__)


@runtime_checkable
class ReadingLease(Protocol):
    """A lease that can run a storage's catch-up read in the statement that grants."""

    async def acquire_reading(
        self,
        key: SessionKey,
        read: Callable[[], FoldedCatchUp | None],
        *,
        ttl: float | None = None,
        on_cancel: CancelHandler | None = None,
    ) -> tuple[LeaseGrant, tuple[FoldedCatchUp, Row | None] | None]:
        """`RunLease.acquire` (waiting), and the read `read()` asks for, when made."""
        ...


@functools.cache
def _reads(lease_type: type) -> bool:
    """Whether a lease class offers `ReadingLease` (cached: every turn asks)."""
    return callable(getattr(lease_type, "acquire_reading", None))


async def take_lease(
    lease: RunLease,
    served: Served,
    key: SessionKey,
    *,
    ttl: float | None,
    on_cancel: CancelHandler | None,
) -> LeaseGrant:
    """`lease.acquire(key)` for a turn of `served`, catching it up in the same trip if it can."""
    read = _catch_up(served) if _reads(type(lease)) else None
    if read is None:
        return await lease.acquire(key, ttl=ttl, on_cancel=on_cancel)
    reading = cast(ReadingLease, lease)
    grant, caught = await reading.acquire_reading(key, read[1], ttl=ttl, on_cancel=on_cancel)
    if caught is not None:
        folded, row = caught
        try:
            snapshot, look = folded.decode(row)
        except Exception as exc:  # the grant is held: the Agent's own read says what is wrong
            logger.warning(
                "session=<%s> | a folded catch-up did not decode: %r", key.session_id, exc
            )
        else:
            read[0].prefetched = Prefetched(folded.point, snapshot, look)
    return grant


def forget(served: Served) -> None:
    """Drop a catch-up the turn did not use: storage may move on before the next turn."""
    for agent in served.agents:
        if agent.session_manager is not None:
            agent.session_manager.prefetched = None


def _catch_up(served: Served) -> tuple[SessionManager, Callable[[], FoldedCatchUp | None]] | None:
    """The session manager of a plain Agent on PostgreSQL, and what builds its read."""
    if not isinstance(served, Agent) or served.session_manager is None:
        return None
    manager = served.session_manager
    if not isinstance(manager.storage, PostgresSince):
        return None
    storage: PostgresSince = manager.storage
    noting = notes_checkpoints(manager.storage, manager.checkpointer)

    def build() -> FoldedCatchUp | None:
        point = manager.catch_up_point(served.messages)
        if point is None:
            return None
        version, (count, last_id) = point
        return storage.folded_catch_up(
            manager.key, version=version, count=count, last_id=last_id, checkpoints=noting
        )

    return manager, build
