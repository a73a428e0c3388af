"""RetentionStorage: the optional capability a retention sweeper needs (SPEC 5 ``retention``).

A backend with it can drop run records that ended before a time, retained frames
written before a time, and name the sessions not updated since a time that may be
deleted whole: never one whose latest run is suspended (it waits for a human; its
checkpoint must survive). Deleting those sessions is the sweeper's, through
the same path as ``DELETE`` (so a swarm's members, checkpoints and A2A tasks go too).

Each call handles at most `limit` items, so a sweep is made of bounded batches. A
backend shared by several replicas hands each item to one sweeper only (PostgreSQL:
``FOR UPDATE SKIP LOCKED`` and a claim on the session row).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from agentkeel.keys import SessionKey

__all__ = ["PROTECTED_STATUSES", "RetentionStorage"]

PROTECTED_STATUSES = ("suspended",)
"""A latest run in one of these keeps its record, and its session, from every sweep.

A turn that is running has no record yet: the server's DELETE path refuses its context
(RunInProgressError), and the sweeper leaves it.
"""


@runtime_checkable
class RetentionStorage(Protocol):
    """Optional capability: expire run records, retained frames and idle sessions."""

    async def sweep_runs(self, ended_before: float, limit: int) -> int:
        """Delete up to `limit` run records that ended before `ended_before`; how many."""
        ...

    async def sweep_frames(self, written_before: float, limit: int) -> int:
        """Delete up to `limit` sessions' frames written before `written_before`; how many."""
        ...

    async def idle_sessions(self, updated_before: float, limit: int) -> list[SessionKey]:
        """Up to `limit` sessions not updated since `updated_before` that may be deleted."""
        ...
