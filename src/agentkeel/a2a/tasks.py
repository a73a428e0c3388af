"""Where A2A tasks are found by id: a per-principal index kept in the session storage.

A task is a run, and a run's record lives in its context's session; but ``GetTask``
and ``CancelTask`` name only the task id, and ``ListTasks`` may span contexts. So the
binding keeps one small record per task (`TaskRecord`: its context, the A2A messages
and published artifacts) in an index of its own, per (principal, definition), keyed
``a2a-task-index:<definition>``, through the storage's `TaskIndexStorage` capability:
for files, one appended ``tasks.jsonl`` per index, so a turn costs no new file and no
fsync in front of its first frame (the run's own record is the durable truth).

Indexes that 0.1.0 wrote (one fake run record per task in that session) are still
read; a storage without the capability keeps using them.

Principals never share an index (the key carries the principal), which is what makes
a task id useless to anyone but its owner. Records are cached in memory (most recently
used first out); writes go straight to storage.
"""

from __future__ import annotations

import logging
from collections import OrderedDict

from agentkeel.a2a.turn import TaskRecord
from agentkeel.framework import TASK_INDEX_DEFINITION
from agentkeel.ids import CONTEXT_ID_PATTERN
from agentkeel.keys import SessionKey
from agentkeel.messages import JSONObject
from agentkeel.result import Usage
from agentkeel.storage.base import RunRecord, SessionStorage, TaskIndexStorage

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
        if isinstance(self.storage, TaskIndexStorage):
            index = self._index(principal)
            await self.storage.put_task(index, record.task_id, record.context_id, record.to_json())
            return
        stored = RunRecord(
            run_id=record.task_id,
            status="completed",  # unused: the run's own record holds the task's state
            input=record.to_json(),
            started_at=record.created_at,
            usage=Usage(),
        )
        await self.storage.put_run(self._index(principal), stored)

    async def get(self, principal: str | None, task_id: str) -> TaskRecord | None:
        """The record of `task_id` if `principal` owns such a task."""
        cached = self._cache.get((principal, task_id))
        if cached is not None:
            self._cache.move_to_end((principal, task_id))
            return cached
        if not CONTEXT_ID_PATTERN.fullmatch(task_id) or ".." in task_id:
            return None  # not an id this server hands out
        record = None
        if isinstance(self.storage, TaskIndexStorage):
            document = await self.storage.get_task(self._index(principal), task_id)
            record = None if document is None else self._decode_document(task_id, document)
        if record is None:  # an index 0.1.0 wrote, or a storage without the capability
            record = self._decode(await self.storage.get_run(self._index(principal), task_id))
        if record is not None:
            self._remember(principal, record)
        return record

    async def list(self, principal: str | None) -> list[TaskRecord]:
        """Every task record of `principal`, oldest first."""
        index = self._index(principal)
        found = {
            record.task_id: record
            for item in await self.storage.list_runs(index)
            if (record := self._decode(item)) is not None
        }
        if isinstance(self.storage, TaskIndexStorage):
            for task_id, document in await self.storage.list_tasks(index):
                if (record := self._decode_document(task_id, document)) is not None:
                    found[task_id] = record
        records = sorted(found.values(), key=lambda record: (record.created_at, record.task_id))
        for record in records:
            cached = self._cache.get((principal, record.task_id))
            if cached is not None:
                record.history, record.artifacts = cached.history, cached.artifacts
        return records

    async def delete_context(self, principal: str | None, context_id: str) -> int:
        """Forget every task of one context of `principal`; how many there were."""
        index = self._index(principal)
        deleted = 0
        if isinstance(self.storage, TaskIndexStorage):
            deleted = await self.storage.delete_tasks(index, context_id)
        for item in await self.storage.list_runs(index):  # 0.1.0's records, or no capability
            record = self._decode(item)
            if record is None or record.context_id != context_id:
                continue
            tombstone = RunRecord(
                run_id=record.task_id,
                status="cancelled",
                input={_TOMBSTONE: True},
                started_at=item.started_at,
                usage=Usage(),
            )
            await self.storage.put_run(index, tombstone)
            deleted += 1
        for cached_key, cached in list(self._cache.items()):
            if cached_key[0] == principal and cached.context_id == context_id:
                del self._cache[cached_key]
        return deleted

    @classmethod
    def _decode(cls, stored: RunRecord | None) -> TaskRecord | None:
        if stored is None or not isinstance(stored.input, dict) or _TOMBSTONE in stored.input:
            return None
        return cls._decode_document(stored.run_id, stored.input)

    @staticmethod
    def _decode_document(task_id: str, document: JSONObject) -> TaskRecord | None:
        try:
            return TaskRecord.from_json(task_id, document)
        except ValueError:
            logger.warning("task=<%s> | skipping a malformed A2A task record", task_id)
            return None
