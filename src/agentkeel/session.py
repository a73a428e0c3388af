"""SessionManager: when to restore and save an agent's memory; storage decides how.

On the first run the manager restores the history, the AgentState and any suspended
run; after every run it saves them before the run's result is returned (so before a
server can send its ``done`` frame). A normal turn only appends; a conversation
manager's trim rewrites the history atomically.

Write order, chosen so that a crash between two writes is safe:

- a finished run: the run record with the history append (messages + state), in one
  storage call (one transaction on a database), then the checkpoint is deleted. A
  checkpoint whose run record is no longer ``suspended`` is stale and is dropped on
  restore, so a finished run is never resumed twice.
- a suspension: the new checkpoint, then the run record, then the older checkpoint is
  deleted.

On a storage that bundles a commit's writes (`BundledCommitStorage`), the run's token
counts and its retained frames (`CommitFrames`) go in the save's one statement.

The manager remembers the session version it loaded or last wrote, and every save
passes it (and the lease's fencing token, `fence`, when a runtime set one) to storage:
a save based on a conversation another process moved on is refused with
ConcurrentWriteError and stores nothing. Before each turn `refresh` checks cheaply (or
takes the read made with the turn's lease, `prefetched`), so a cached Agent catches up
instead of running on stale memory (SPEC guarantee 9).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import cast

from agentkeel.checkpoint.base import Checkpoint, Checkpointer
from agentkeel.errors import ConcurrentWriteError
from agentkeel.ids import new_checkpoint_id
from agentkeel.keys import SessionKey
from agentkeel.messages import JSONObject, Message
from agentkeel.result import AgentResult, ErrorInfo, Usage
from agentkeel.run_state import RunState
from agentkeel.session_records import (
    CommitFrames,
    Prefetched,
    RestoredSession,
    bundles,
    catch_up_point,
    commit_extras,
    keeps_usage,
    load_after,
    meter_for,
    restore_checkpoint,
    restored_session,
    run_record,
)
from agentkeel.storage.base import RunRecord, SessionSnapshot, SessionStorage
from agentkeel.storage.bundled import BundledCommitStorage, CommitExtras
from agentkeel.storage.usage import UsageStorage, utc_day
from agentkeel.usage import TokenBudgets, UnsavedUsage, UsageMeter

__all__ = [
    "LOST_TURN",
    "CommitFrames",
    "RestoredSession",
    "SessionHome",
    "SessionManager",
    "meter_for",
    "run_record",
]

logger = logging.getLogger(__name__)

LOST_TURN = (
    "another process moved this conversation on while the turn ran, so the turn was not "
    "saved; the next turn reloads the conversation"
)
"""The message of a run that ends ``failed`` with ``concurrent_write``."""


@dataclass(frozen=True, slots=True)
class SessionHome:
    """Where a context's memory lives: its key, the storage and the checkpointer.

    What a server hands a freshly built Agent or Swarm (`Servable.attach_session`), so
    that neither needs to know the storage interfaces to be given a session.
    """

    key: SessionKey
    storage: SessionStorage
    checkpointer: Checkpointer

    def manager(self, key: SessionKey | None = None) -> SessionManager:
        """A SessionManager of `key` (default this home's) in this storage."""
        key = self.key if key is None else key
        return SessionManager(
            key.session_id, self.storage, checkpointer=self.checkpointer, principal=key.principal
        )


class SessionManager:
    """Persists one agent's memory under ``session_id = "<def-name>:<contextId>"``.

    Args:
        session_id: ``"<def-name>:<contextId>"``; the context id is validated (SPEC 2).
        storage: Where history, state and run records go.
        checkpointer: Where suspended runs wait; without one they live in memory only.
        principal: The owner, when authentication is on; isolates equal context ids.
    """

    def __init__(
        self,
        session_id: str,
        storage: SessionStorage,
        *,
        checkpointer: Checkpointer | None = None,
        principal: str | None = None,
    ) -> None:
        self.key = SessionKey.parse(session_id, principal=principal)
        self.storage = storage
        self.checkpointer = checkpointer
        self.fence: int | None = None
        """The fencing token of the lease the current turn runs under (set by a runtime)."""
        self.version: int | None = None
        """The session version this manager last loaded or wrote; None before `restore`."""
        self._held: tuple[int, str | None] | None = None
        """(message count, last message id) of the stored history at `version`, while the
        caller's history is known to be it: what `restore` catches up from."""
        self.done_frames: CommitFrames | None = None
        """The server's frames of the current run, saved with it (set by a runtime)."""
        self.unsaved = UnsavedUsage()
        """Tokens of model calls not stored yet (they go with the run's save)."""
        self.prefetched: Prefetched | None = None  # the catch-up made with the turn's lease
        self._checkpoint_id: str | None = None

    @property
    def context_id(self) -> str:
        """The context id (also the checkpoint thread id)."""
        return self.key.context_id

    async def restore(self, held: Sequence[Message] = ()) -> RestoredSession:
        """Load the session; an unknown session restores as empty.

        `held` is the history the caller holds from its last restore or save. When it is
        still what was stored at the version this manager knows, and the storage can
        catch up (IncrementalLoadStorage), only the messages after it are read, and the
        answer's `kept` says how many of `held` come first; otherwise the whole history.
        """
        known, self._held = self._held, None
        return await self._restored(*await self._load(held, known), held)

    async def refresh(self, held: Sequence[Message]) -> RestoredSession | None:
        """What `restore` gives, or None if storage did not move on since the last.

        When `restore` would catch up, that read (as cheap as `moved_on`) is the check.
        """
        known = self._held
        if catch_up_point(self.storage, held, known, self.version) is None:
            return await self.restore(held) if await self.moved_on() else None
        self._held = None
        snapshot, look = await self._load(held, known)
        if snapshot is not None and snapshot.version == self.version and not snapshot.messages:
            self._held = known  # unchanged: the held history and state are the stored ones
            return None
        return await self._restored(snapshot, look, held)

    def catch_up_point(self, held: Sequence[Message]) -> tuple[int, tuple[int, str | None]] | None:
        """(version, (count, last id)) that `refresh(held)` reads after; None: it reads whole."""
        return catch_up_point(self.storage, held, self._held, self.version)

    async def _load(
        self, held: Sequence[Message], at: tuple[int, str | None] | None
    ) -> tuple[SessionSnapshot | None, bool]:
        fetched, self.prefetched = self.prefetched, None
        if fetched is not None and fetched.point == (self.version, at):
            return fetched.snapshot, fetched.look
        return await load_after(self.storage, self.key, held, at, self.version, self.checkpointer)

    async def _restored(
        self, snapshot: SessionSnapshot | None, look: bool, held: Sequence[Message]
    ) -> RestoredSession:
        self.version = 0 if snapshot is None else snapshot.version
        found = None  # the suspended run and its checkpoint's id, when `look` finds one
        if look and self.checkpointer is not None:
            found = await restore_checkpoint(self.checkpointer, self.storage, self.key)
        self._checkpoint_id = None if found is None else found[1]
        restored, self._held = restored_session(snapshot, held, found and found[0])
        return restored

    async def moved_on(self) -> bool:
        """Whether storage moved past the version known (one version read; True at first)."""
        return self.version is None or await self.storage.version(self.key) != self.version

    async def save_finished(
        self,
        *,
        record: RunRecord,
        new_messages: Sequence[Message],
        history: Sequence[Message],
        state: JSONObject | None,
        rewrite: bool,
        cut: int | None = None,
        frames: tuple[str, bytes] | None = None,
    ) -> bool:
        """Save a run that ended: record, history and state together, then drop its checkpoint.

        `state` is None when the AgentState did not change, and then the stored state is
        kept as it is, also by a rewrite (SPEC guarantee 12). With `rewrite`, the whole
        `history` replaces the stored one (a trim); otherwise `new_messages` are appended,
        after cutting the stored history to its first `cut` messages when `cut` is set
        (an edit or a regenerate: the cut commits with the turn). On a storage that
        bundles, the unsaved token counts and `frames` (run id, body) go in the same
        statement; returns whether `frames` were stored.

        Raises:
            ConcurrentWriteError: Another writer moved the session on since it was
                loaded; nothing of this turn's history was stored.
        """
        self._held = None  # until the save is known to have landed
        storage = self.storage
        extras = self._extras(frames)
        try:
            if rewrite or extras is None:
                await self._store_usage()
                await self._save(record, new_messages, history, state, rewrite, cut)
                extras = None
            elif new_messages or state is not None or cut is not None:
                bundled = cast(BundledCommitStorage, storage)
                self.version = await bundled.append_bundled(
                    self.key, new_messages, state, extras=extras,
                    expected_version=self.version, fence=self.fence, cut=cut, run=record,
                )  # fmt: skip
                self.unsaved.take()
            else:
                await cast(BundledCommitStorage, storage).put_run_bundled(
                    self.key, record, extras=extras
                )
                self.unsaved.take()
            self._held = (len(history), history[-1].id if history else None)
        except ConcurrentWriteError as exc:
            # the record said how the run ended; it must say the turn was lost instead
            lost = ErrorInfo(code=exc.code, message=LOST_TURN)
            await self._store_usage()  # the tokens were spent, saved or not
            await storage.put_run(
                self.key, replace(record, status="failed", error=lost, stop_reason="error")
            )
            raise
        await self._drop_checkpoint()
        return extras is not None and extras.frames is not None

    async def _save(
        self,
        record: RunRecord,
        new_messages: Sequence[Message],
        history: Sequence[Message],
        state: JSONObject | None,
        rewrite: bool,
        cut: int | None,
    ) -> None:
        """The save of a storage that does not bundle (or of a rewrite)."""
        if rewrite:
            self.version = await self.storage.rewrite(
                self.key, history, state,
                expected_version=self.version, fence=self.fence, run=record,
            )  # fmt: skip
        elif new_messages or state is not None or cut is not None:
            self.version = await self.storage.append(
                self.key, new_messages, state,
                expected_version=self.version, fence=self.fence, cut=cut, run=record,
            )  # fmt: skip
        else:
            await self.storage.put_run(self.key, record)

    def _extras(self, frames: tuple[str, bytes] | None) -> CommitExtras | None:
        """What a bundled save writes beside the history; None when storage does not bundle."""
        return commit_extras(self.storage, self.unsaved.usage, frames, self.done_frames)

    async def _store_usage(self) -> None:
        """Write the unsaved token counts on their own (a save that does not carry them)."""
        usage = self.unsaved.usage
        if usage.total_tokens and isinstance(self.storage, UsageStorage):
            await self.storage.add_usage(self.key, usage, day=utc_day())
        self.unsaved.take()

    def _frames_of(self, result: AgentResult) -> tuple[str, bytes] | None:
        riding = self.done_frames
        if riding is None or not bundles(type(self.storage)):
            return None
        return riding.frames(result)

    async def finish_turn(
        self,
        result: AgentResult,
        *,
        run: RunState,
        new_messages: Sequence[Message],
        history: Sequence[Message],
        state: JSONObject | None,
        rewrite: bool,
    ) -> AgentResult:
        """`save_finished`, then `result`; failed with ``concurrent_write`` if refused.

        A refused turn is not an exception for the run's caller: like a model failure it
        ends the run ``failed``, with nothing of it stored. The Agent's memory still holds
        the turn, but the version this manager knows is stale, so the next `restore`
        reloads what the other process saved. A run with a cut (`RunState.cut`: an edit
        or a regenerate) commits the cut with its messages, unless a rewrite saves the
        whole history anyway.
        """
        record = run_record(
            result, input=run.input, started_at=run.started_at, stop_reason=result.stop_reason
        )
        frames = self._frames_of(result)
        try:
            stored = await self.save_finished(
                record=record,
                new_messages=new_messages,
                history=history,
                state=state,
                rewrite=rewrite,
                cut=None if rewrite else run.cut,
                frames=frames,
            )
        except ConcurrentWriteError as exc:
            logger.warning("run=<%s> | turn not saved: %s", result.run_id, exc.message)
            return replace(
                result,
                status="failed",
                stop_reason="error",
                messages=(),
                output=None,
                error=ErrorInfo(code=exc.code, message=LOST_TURN),
            )
        if stored and self.done_frames is not None:
            self.done_frames.committed(result)
        return result

    async def save_suspended(self, *, run: RunState, result: AgentResult) -> None:
        """Save a suspended run so that a decision can resume it, also after a restart."""
        record = run_record(
            result, input=run.input, started_at=run.started_at, stop_reason=result.stop_reason
        )
        checkpoint = Checkpoint(
            id=new_checkpoint_id(), run_id=run.run_id, created_at=time.time(), payload=run.to_json()
        )
        if self.checkpointer is not None:
            await self.checkpointer.put(self.key, checkpoint)
        frames = self._frames_of(result)
        extras = self._extras(frames)
        if extras is None:
            await self._store_usage()
            await self.storage.put_run(self.key, record)
        else:
            await cast(BundledCommitStorage, self.storage).put_run_bundled(
                self.key, record, extras=extras
            )
            self.unsaved.take()
            if frames is not None and self.done_frames is not None:
                self.done_frames.committed(result)
        if self.checkpointer is None:
            return
        previous, self._checkpoint_id = self._checkpoint_id, checkpoint.id
        if previous is not None and previous != checkpoint.id:
            await self.checkpointer.delete(self.key, previous)

    async def _drop_checkpoint(self) -> None:
        if self.checkpointer is not None and self._checkpoint_id is not None:
            await self.checkpointer.delete(self.key, self._checkpoint_id)
        self._checkpoint_id = None

    def meter(self, budgets: TokenBudgets) -> UsageMeter | None:
        """What meters a run's tokens: into this session's storage when it keeps usage."""
        storage_type = type(self.storage)
        if keeps_usage(storage_type):
            unsaved = self.unsaved if bundles(storage_type) else None
            return UsageMeter(budgets, cast(UsageStorage, self.storage), self.key, unsaved=unsaved)
        return UsageMeter(budgets) if budgets.any else None

    async def usage(self) -> Usage:
        """Every token this context's model calls used, across runs and restarts.

        Zero when the storage keeps no usage (it does not implement UsageStorage).
        """
        if not isinstance(self.storage, UsageStorage):
            return Usage()
        return await self.storage.context_usage(self.key)

    async def principal_usage(self, day: str | None = None) -> Usage:
        """What the owning principal's model calls used on `day` (UTC; today if None)."""
        if not isinstance(self.storage, UsageStorage):
            return Usage()
        return await self.storage.principal_usage(self.key.principal, day or utc_day())

    async def delete(self) -> None:
        """Forget the whole session: history, state, runs and checkpoints."""
        if self.checkpointer is not None:
            await self.checkpointer.delete_thread(self.key)
        await self.storage.delete(self.key)
        self._checkpoint_id = None
