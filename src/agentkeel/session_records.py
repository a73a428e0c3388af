"""What a SessionManager stores a run as, and which storage writes it how.

`run_record` is the stored record of a run (an agent's or a swarm's). `CommitFrames` is
the server's side of a bundled save: the run's retained frames, handed to the save that
stores them (`BundledCommitStorage`). `keeps_usage`, `bundles` and `catches_up` say what
a storage class can do, cached: a Protocol check costs microseconds, and every turn
asks. `load_after` and `restore_checkpoint` read a session back.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, cast

from agentkeel.checkpoint.base import Checkpointer
from agentkeel.errors import CorruptSessionError
from agentkeel.keys import SessionKey
from agentkeel.messages import JSONObject, JSONValue, Message
from agentkeel.result import AgentResult, RunResultFront, Usage
from agentkeel.result import stop_reason as reason_of
from agentkeel.run_state import RunState
from agentkeel.storage.base import (
    IncrementalLoadStorage,
    RunRecord,
    SessionSnapshot,
    SessionStorage,
)
from agentkeel.storage.bundled import BundledCommitStorage, CommitExtras, RidingRelease
from agentkeel.storage.usage import UsageStorage, utc_day
from agentkeel.usage import TokenBudgets, UsageMeter

if TYPE_CHECKING:
    from agentkeel.session import SessionManager

__all__ = [
    "CommitFrames",
    "Prefetched",
    "RestoredSession",
    "bundles",
    "catch_up_point",
    "catches_up",
    "catches_up_from",
    "checks_by_catching_up",
    "commit_extras",
    "keeps_usage",
    "load_after",
    "meter_for",
    "notes_checkpoints",
    "restore_checkpoint",
    "restored_session",
    "run_record",
]

logger = logging.getLogger(__name__)


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

    @property
    def release(self) -> RidingRelease | None:
        """The turn's lease, for the save that stores the frames to free (None: not)."""
        ...


def commit_extras(
    storage: SessionStorage,
    usage: Usage,
    frames: tuple[str, bytes] | None,
    riding: CommitFrames | None,
) -> CommitExtras | None:
    """What a bundled save writes beside the history; None when storage does not bundle.

    The lease's release rides only with the frames: a save without them leaves the done
    frame to be stored after it, which must not land once another replica holds the
    context.
    """
    if not bundles(type(storage)):
        return None
    release = riding.release if frames is not None and riding is not None else None
    return CommitExtras(usage=usage, day=utc_day(), frames=frames, release=release)


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


@functools.cache
def catches_up(storage_type: type) -> bool:
    """Whether a storage class reads only what a cached history lacks (cached, as above)."""
    return issubclass(storage_type, IncrementalLoadStorage)


@functools.cache
def checks_by_catching_up(storage_type: type) -> bool:
    """Whether a storage class's catch-up read is as cheap as its version read.

    The class says so (``checks_by_catching_up``, PostgreSQL's one indexed statement);
    a file storage's catch-up reads the whole file, far more than its version's ``stat``.
    """
    return catches_up(storage_type) and getattr(storage_type, "checks_by_catching_up", 0) is True


def catches_up_from(
    storage: SessionStorage,
    held: Sequence[Message],
    known: tuple[int, str | None] | None,
    version: int | None,
) -> bool:
    """Whether `load_after` reads only what `held` lacks (see there), not the whole session."""
    return (
        known is not None
        and version is not None
        and 0 < known[0] <= len(held)
        and held[known[0] - 1].id == known[1]
        and catches_up(type(storage))
    )


def catch_up_point(
    storage: SessionStorage,
    held: Sequence[Message],
    known: tuple[int, str | None] | None,
    version: int | None,
) -> tuple[int, tuple[int, str | None]] | None:
    """(version, `known`) when `SessionManager.refresh` reads after it in one cheap read."""
    if not checks_by_catching_up(type(storage)) or version is None or known is None:
        return None
    return (version, known) if catches_up_from(storage, held, known, version) else None


def meter_for(manager: SessionManager | None, budgets: TokenBudgets) -> UsageMeter | None:
    """The session's meter (kept in storage); without a session, one only for budgets."""
    if manager is not None:
        return manager.meter(budgets)
    return UsageMeter(budgets) if budgets.any else None


async def load_after(
    storage: SessionStorage,
    key: SessionKey,
    held: Sequence[Message],
    known: tuple[int, str | None] | None,
    version: int | None,
    checkpointer: Checkpointer | None = None,
) -> tuple[SessionSnapshot | None, bool]:
    """The session, read from after `held` when safe, else whole; may a checkpoint exist.

    The second value is False only when `restore_checkpoint` has nothing to find.
    `known` is (message count, last message id) of the stored history at `version`, as
    the caller last restored or saved it. When `held` still starts with that history
    and the storage can catch up, only the messages after it are read (the snapshot's
    `kept` says how many of `held` come first). When the storage also sees the
    checkpointer's rows, the same read says whether there is a checkpoint.
    """
    if known is not None and version is not None and catches_up_from(storage, held, known, version):
        if notes_checkpoints(storage, checkpointer):
            noting = cast(_NotingCheckpoints, storage)
            return await noting.load_since_noting_checkpoints(
                key, version=version, count=known[0], last_id=known[1]
            )
        since = cast(IncrementalLoadStorage, storage)
        snapshot = await since.load_since(key, version=version, count=known[0], last_id=known[1])
        return snapshot, True
    return await storage.load(key), True


@dataclass(frozen=True, slots=True)
class Prefetched:
    """A catch-up read made for a SessionManager by another statement (the lease's grant).

    `point` is what it caught up from, (version, (message count, last message id)), as
    `SessionManager.catch_up_point` gave it; `snapshot` and `look` are what `load_after`
    would have answered there.
    """

    point: tuple[int, tuple[int, str | None]]
    snapshot: SessionSnapshot | None
    look: bool


class _NotingCheckpoints(Protocol):
    async def load_since_noting_checkpoints(
        self, key: SessionKey, *, version: int, count: int, last_id: str | None
    ) -> tuple[SessionSnapshot | None, bool]: ...


def notes_checkpoints(storage: SessionStorage, checkpointer: Checkpointer | None) -> bool:
    """Whether `storage`'s catch-up read can tell if `checkpointer` holds a checkpoint."""
    shares = getattr(checkpointer, "shares_schema_with", None)
    return (
        callable(shares)
        and callable(getattr(storage, "load_since_noting_checkpoints", None))
        and shares(storage) is True
    )


async def restore_checkpoint(
    checkpointer: Checkpointer, storage: SessionStorage, key: SessionKey
) -> tuple[RunState, str] | None:
    """The suspended run to resume and its checkpoint id; None when there is none.

    A checkpoint whose run record no longer says ``suspended`` is stale (the run ended
    after it was written) and is deleted here, so a finished run is never resumed twice.
    """
    checkpoint = await checkpointer.latest(key)
    if checkpoint is None:
        return None
    record = await storage.get_run(key, checkpoint.run_id)
    if record is not None and record.status != "suspended":
        logger.info(
            "session=<%s>, run=<%s> | dropping the checkpoint of a run that already ended",
            key.session_id,
            checkpoint.run_id,
        )
        await checkpointer.delete(key, checkpoint.id)
        return None
    try:
        state = RunState.from_json(checkpoint.payload)
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptSessionError(
            f"checkpoint {checkpoint.id} of session {key.session_id} is malformed: {exc}",
            path=checkpoint.id,
        ) from exc
    return state, checkpoint.id


@dataclass(frozen=True, slots=True, kw_only=True)
class RestoredSession:
    """What a session held: history, state and the suspended run if there is one."""

    messages: list[Message]
    state: JSONObject
    suspended: RunState | None
    kept: int = 0
    """How many messages of the caller's history come before `messages` (0: `messages`
    is the whole history)."""


def restored_session(
    snapshot: SessionSnapshot | None, held: Sequence[Message], suspended: RunState | None
) -> tuple[RestoredSession, tuple[int, str | None]]:
    """What a restore gives from `snapshot`, and (count, last id) of the stored history."""
    if snapshot is None:
        return RestoredSession(messages=[], state={}, suspended=suspended), (0, None)
    messages, kept = snapshot.messages, snapshot.kept
    last = messages[-1].id if messages else held[kept - 1].id if kept else None
    restored = RestoredSession(
        messages=messages, state=snapshot.state, suspended=suspended, kept=kept
    )
    return restored, (kept + len(messages), last)
