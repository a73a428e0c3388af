"""What a SessionManager stores a run as, and which storage writes it how.

`run_record` is the stored record of a run (an agent's or a swarm's). `CommitFrames` is
the server's side of a bundled save: the run's retained frames, handed to the save that
stores them (`BundledCommitStorage`). `keeps_usage` and `bundles` say what a storage
class can do, cached: a Protocol check costs microseconds, and every turn asks.
"""

from __future__ import annotations

import functools
import time
from typing import Protocol

from agentkeel.messages import JSONValue
from agentkeel.result import AgentResult, RunResultFront
from agentkeel.result import stop_reason as reason_of
from agentkeel.storage.base import RunRecord
from agentkeel.storage.bundled import BundledCommitStorage
from agentkeel.storage.usage import UsageStorage

__all__ = ["CommitFrames", "bundles", "keeps_usage", "run_record"]


class CommitFrames(Protocol):
    """A server's retained frames of the run being saved, to store with its save.

    The server's ``done`` frame says how the run ended, so it exists only once the
    result does: `frames` builds it from the result about to be saved, and `committed`
    says that the save stored them, so that the server does not store them again.
    """

    def frames(self, result: AgentResult) -> tuple[str, bytes] | None:
        """(run id, body) of the run's frames with `result`'s done frame; None: not now."""
        ...

    def committed(self, result: AgentResult) -> None:
        """The frames `frames` built for `result` were stored with its save."""
        ...


def run_record(
    result: RunResultFront, *, input: JSONValue, started_at: float, stop_reason: str | None = None
) -> RunRecord:
    """The stored record of a run that ended or suspended (an agent's or a swarm's).

    `stop_reason` is the model's (an AgentResult carries it); None takes the one the
    status implies (a swarm run's).
    """
    return RunRecord(
        run_id=result.run_id,
        status=result.status,
        input=input,
        started_at=started_at,
        ended_at=None if result.status == "suspended" else time.time(),
        text=result.text,
        tool_calls=result.tool_calls,
        usage=result.usage,
        error=result.error,
        interrupts=result.interrupts,
        stop_reason=reason_of(result.status) if stop_reason is None else stop_reason,
    )


@functools.cache
def keeps_usage(storage_type: type) -> bool:
    """Whether a storage class keeps usage (cached: a Protocol check costs microseconds)."""
    return issubclass(storage_type, UsageStorage)


@functools.cache
def bundles(storage_type: type) -> bool:
    """Whether a storage class writes a save's usage and frames with it (cached)."""
    return issubclass(storage_type, BundledCommitStorage) and keeps_usage(storage_type)
