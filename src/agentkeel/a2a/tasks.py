"""Where A2A tasks are found by id: a per-principal index kept in the session storage.

A task is a run, and a run's record lives in its context's session; but ``GetTask``
and ``CancelTask`` name only the task id, and ``ListTasks`` may span contexts. So the
binding keeps one small record per task (`TaskRecord`: its context, the A2A messages
and published artifacts) in an index session of its own, per (principal, definition):
session key ``a2a-task-index:<definition>``. It is stored as a run record of that
session, which every `SessionStorage` backend already keeps durably, so the index
needs no new storage method and survives restarts with whatever backend is configured.

Principals never share an index (the key carries the principal), which is what makes
a task id useless to anyone but its owner. Records are cached in memory (most recently
used first out); writes go straight to storage.

Deleting a context (`delete_context`) replaces each of its task records, atomically,
with a tombstone that holds nothing but the task id: the messages, artifacts and the
context id are gone from storage, and the tombstone reads as no task at all (GetTask
answers task-not-found, ListTasks omits it). The storage interface has no way to
remove one run record, so the tombstone's file stays until the index is deleted.
"""

from __future__ import annotations

import logging
from collections import OrderedDict

from agentkeel.a2a.turn import TaskRecord
from agentkeel.framework import TASK_INDEX_DEFINITION
from agentkeel.ids import CONTEXT_ID_PATTERN
from agentkeel.result import Usage
from agentkeel.storage.base import RunRecord, SessionKey, SessionStorage

__all__ = ["INDEX_DEFINITION", "A2ATaskStore"]

logger = logging.getLogger(__name__)

INDEX_DEFINITION = TASK_INDEX_DEFINITION
"""The definition part of the index sessions' keys (no agent may take this name)."""
_CACHE_SIZE = 10_000
_TOMBSTONE = "deleted"


class A2ATaskStore:
    """The A2A task records of one agent definition, by principal and task id.

    Args:
        storage: The framework's session storage.
        definition: The agent definition whose tasks these are.
    """

    def __init__(self, storage: SessionStorage, definition: str) -> None:
        self.storage = storage
        self.definition = definition
        self._cache: OrderedDict[tuple[str | None, str], TaskRecord] = OrderedDict()

    def _index(self, principal: str | None) -> SessionKey:
        return SessionKey(
            definition=INDEX_DEFINITION, context_id=self.definition, principal=principal
        )

    def _remember(self, principal: str | None, record: TaskRecord) -> None:
        self._cache[(principal, record.task_id)] = record
        self._cache.move_to_end((principal, record.task_id))
        while len(self._cache) > _CACHE_SIZE:
            self._cache.popitem(last=False)

    async def put(self, principal: str | None, record: TaskRecord) -> None:
        """Create or replace the record of a task."""
        self._remember(principal, record)
        stored = RunRecord(
            run_id=record.task_id,
            status="completed",  # unused: the run's own record holds the task's state
            input=record.to_json(),
            started_at=record.created_at,
            usage=Usage(),
        )
        await self.storage.put_run(self._index(principal), stored)

    async def delete_context(self, principal: str | None, context_id: str) -> int:
        """Forget every task of one context of `principal`; how many there were."""
        stored = await self.storage.list_runs(self._index(principal))
        deleted = 0
        for item in stored:
            record = self._decode(item)
            if record is None or record.context_id != context_id:
                continue
            self._cache.pop((principal, record.task_id), None)
            tombstone = RunRecord(
                run_id=record.task_id,
                status="cancelled",
                input={_TOMBSTONE: True},
                started_at=item.started_at,
                usage=Usage(),
            )
            await self.storage.put_run(self._index(principal), tombstone)
            deleted += 1
        for cached_key, cached in list(self._cache.items()):  # written, not yet listed
            if cached_key[0] == principal and cached.context_id == context_id:
                del self._cache[cached_key]
        return deleted

    async def get(self, principal: str | None, task_id: str) -> TaskRecord | None:
        """The record of `task_id` if `principal` owns such a task."""
        cached = self._cache.get((principal, task_id))
        if cached is not None:
            self._cache.move_to_end((principal, task_id))
            return cached
        if not CONTEXT_ID_PATTERN.fullmatch(task_id) or ".." in task_id:
            return None  # not an id this server hands out
        stored = await self.storage.get_run(self._index(principal), task_id)
        record = self._decode(stored)
        if record is not None:
            self._remember(principal, record)
        return record

    async def list(self, principal: str | None) -> list[TaskRecord]:
        """Every task record of `principal`, oldest first."""
        stored = await self.storage.list_runs(self._index(principal))
        records = [record for item in stored if (record := self._decode(item)) is not None]
        for record in records:
            cached = self._cache.get((principal, record.task_id))
            if cached is not None:
                record.history, record.artifacts = cached.history, cached.artifacts
        return records

    @staticmethod
    def _decode(stored: RunRecord | None) -> TaskRecord | None:
        if stored is None or not isinstance(stored.input, dict) or _TOMBSTONE in stored.input:
            return None
        try:
            return TaskRecord.from_json(stored.run_id, stored.input)
        except ValueError:
            logger.warning("task=<%s> | skipping a malformed A2A task record", stored.run_id)
            return None
