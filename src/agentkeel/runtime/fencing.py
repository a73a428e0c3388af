"""The lease's fencing token, handed to the sessions a turn commits to (guarantee 10).

A turn runs under a lease grant; every commit it makes (the history append or
rewrite, of the Agent or of each swarm member) carries the grant's fence, and storage
refuses a fence lower than the highest it accepted. A replica that lost its lease (it
was paused, or cut off, past its lease time, and another replica took the context
over) so commits nothing when it wakes.

Only a lease whose fences outlive the process (`Coordination.fenced`: a shared backend)
fences commits: an in-process lease counts from 1 again after a restart, and its
fences would be refused by the ones the last process stored.
"""

from __future__ import annotations

from agentkeel.serving import Served

__all__ = ["fence_commits"]


def fence_commits(served: Served, fence: int | None) -> None:
    """Make every commit of `served` (its members' too, once attached) carry `fence`."""
    for agent in served.agents:
        manager = agent.session_manager
        if manager is not None:
            manager.fence = fence
