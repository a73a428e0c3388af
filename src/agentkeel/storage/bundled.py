"""BundledCommitStorage: what a turn writes beside its history, in the commit's own trip.

A turn on a database ends with several writes: the history append and its run record
(already one statement), the tokens its model calls used (`UsageStorage`), and the run's
retained frames (`RunEventStorage`). Each one alone is a round trip to the database,
and round trips, not bytes, are what a turn waits for. A backend with this optional
capability takes them all in one call, so they commit together in one statement (one
trip) and a refused commit (ConcurrentWriteError) leaves none of them behind.

The SessionManager uses it when the storage has it: the usage of the run's model calls
is then kept in memory until the run's save (`CommitExtras.usage`), and the server hands
the frames of the run, its ``done`` frame included, to the same save. Without it, each
goes through its own capability as before. A lease kept in the same database may hand
the save its release too (`RidingRelease`): the commit then frees the context itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from agentkeel.keys import SessionKey
from agentkeel.messages import JSONObject, Message
from agentkeel.result import Usage
from agentkeel.storage.base import RunRecord

__all__ = ["BundledCommitStorage", "CommitExtras", "RidingRelease"]


@dataclass(frozen=True, slots=True)
class RidingRelease:
    """A lease's release, written by the statement that commits the turn.

    The lease lives in the storage's own database (`PostgresRunLease`); freeing it in
    the commit saves the release's own round trip, and a commit the checks refuse frees
    nothing (the turn then releases on its own). The storage knows nothing of leases:
    `cte` is one more CTE of the commit's statement, written by the lease, with ``{s}``
    for the schema and ``{owner}`` for the CTE that moved the session row (empty when
    the commit was refused), and `params` are the parameters it names.
    """

    cte: str
    params: Mapping[str, object]


@dataclass(frozen=True, slots=True)
class CommitExtras:
    """What a commit writes beside the history: token totals and retained frames."""

    usage: Usage = field(default_factory=Usage)
    """Added to the context's total and to its principal's total of `day`."""
    day: str = ""
    """The UTC day (``YYYY-MM-DD``) the usage counts for; unused without usage."""
    frames: tuple[str, bytes] | None = None
    """(run id, body): replaces the session's retained frames, as `put_frames` does."""
    release: RidingRelease | None = None
    """The turn's lease, freed by the commit (None: the turn releases it on its own)."""

    @property
    def empty(self) -> bool:
        """Whether there is nothing beside the history to write."""
        return self.frames is None and not self.usage.total_tokens and self.release is None


@runtime_checkable
class BundledCommitStorage(Protocol):
    """Optional capability: a turn's commit and its extras, in one statement."""

    async def append_bundled(
        self,
        key: SessionKey,
        messages: Sequence[Message],
        state: JSONObject | None,
        *,
        extras: CommitExtras,
        expected_version: int | None = None,
        fence: int | None = None,
        cut: int | None = None,
        run: RunRecord | None = None,
    ) -> int:
        """`SessionStorage.append`, with `extras` in the same transaction."""
        ...

    async def put_run_bundled(
        self, key: SessionKey, record: RunRecord, *, extras: CommitExtras
    ) -> None:
        """`SessionStorage.put_run`, with `extras` in the same statement."""
        ...
