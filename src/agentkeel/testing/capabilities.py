"""The conformance suite of the optional storage capabilities.

A backend that does not have a capability skips its tests, saying so; one that claims it
(the Protocol's `isinstance` holds) must pass them.
"""

from __future__ import annotations

import pytest

from agentkeel.keys import SessionKey
from agentkeel.storage.base import (
    RunEventStorage,
    SessionDocumentStorage,
    SessionStorage,
    TaskIndexStorage,
)
from agentkeel.testing.session_storage import KEY, StorageFactory, turn

__all__ = ["CapabilitySuite"]

INDEX = SessionKey(definition="a2a-task-index", context_id="chat")


def frames_of(storage: SessionStorage) -> RunEventStorage:
    """`storage` as a RunEventStorage, or a skip saying it is not one."""
    if not isinstance(storage, RunEventStorage):
        pytest.skip(f"{type(storage).__name__} keeps no run frames (RunEventStorage)")
    return storage


def tasks_of(storage: SessionStorage) -> TaskIndexStorage:
    """`storage` as a TaskIndexStorage, or a skip saying it is not one."""
    if not isinstance(storage, TaskIndexStorage):
        pytest.skip(f"{type(storage).__name__} has no task index (TaskIndexStorage)")
    return storage


def documents_of(storage: SessionStorage) -> SessionDocumentStorage:
    """`storage` as a SessionDocumentStorage, or a skip saying it is not one."""
    if not isinstance(storage, SessionDocumentStorage):
        pytest.skip(f"{type(storage).__name__} keeps no documents (SessionDocumentStorage)")
    return storage


class CapabilitySuite:
    """Retained frames, the task index and session documents."""

    pytestmark = [pytest.mark.anyio]

    async def test_frames_keep_the_latest_run_as_bytes(
        self, reopen_storage: StorageFactory
    ) -> None:
        storage = frames_of(reopen_storage())
        body = (
            b'id: 1\ndata: {"event":{"type":"status"}}\n\n'
            b'id: 2\ndata: {"done":true,"t":"\xc3\xa9"}\n\n'
        )
        assert await storage.get_frames(KEY, "run-1") is None
        await storage.put_frames(KEY, "run-1", body)
        assert await frames_of(reopen_storage()).get_frames(KEY, "run-1") == body
        await storage.put_frames(KEY, "run-1", body[:10])
        assert await frames_of(reopen_storage()).get_frames(KEY, "run-1") == body[:10]
        await storage.put_frames(KEY, "run-2", body)
        reopened = frames_of(reopen_storage())
        assert await reopened.get_frames(KEY, "run-2") == body
        assert await reopened.get_frames(KEY, "run-1") is None
        assert await reopen_storage().list_runs(KEY) == []  # frames are not run records
        await reopen_storage().append(KEY, turn(0), None)
        await reopen_storage().delete(KEY)
        assert await frames_of(reopen_storage()).get_frames(KEY, "run-2") is None

    async def test_tasks_are_found_by_id_listed_and_dropped_by_context(
        self, reopen_storage: StorageFactory
    ) -> None:
        storage = tasks_of(reopen_storage())
        await storage.put_task(INDEX, "task-1", "ctx-a", {"n": 1})
        await storage.put_task(INDEX, "task-2", "ctx-b", {"n": 2})
        await storage.put_task(INDEX, "task-3", "ctx-a", {"n": 3})
        await storage.put_task(INDEX, "task-1", "ctx-a", {"n": 1, "more": ["é"]})
        reopened = tasks_of(reopen_storage())
        assert await reopened.get_task(INDEX, "task-1") == {"n": 1, "more": ["é"]}
        assert await reopened.get_task(INDEX, "task-9") is None
        assert sorted(task_id for task_id, _ in await reopened.list_tasks(INDEX)) == [
            "task-1",
            "task-2",
            "task-3",
        ]
        assert await storage.delete_tasks(INDEX, "ctx-a") == 2
        assert await storage.delete_tasks(INDEX, "ctx-a") == 0
        reopened = tasks_of(reopen_storage())
        assert await reopened.get_task(INDEX, "task-1") is None
        assert await reopened.list_tasks(INDEX) == [("task-2", {"n": 2})]

    async def test_task_indexes_are_isolated(self, reopen_storage: StorageFactory) -> None:
        storage = tasks_of(reopen_storage())
        other = SessionKey(definition="a2a-task-index", context_id="chat", principal="bob")
        await storage.put_task(INDEX, "task-1", "ctx-a", {"n": 1})
        assert await tasks_of(reopen_storage()).get_task(other, "task-1") is None
        assert await tasks_of(reopen_storage()).list_tasks(other) == []

    async def test_many_puts_of_few_tasks_stay_correct(
        self, reopen_storage: StorageFactory
    ) -> None:
        storage = tasks_of(reopen_storage())
        for index in range(300):
            await storage.put_task(INDEX, f"task-{index % 3}", "ctx-a", {"n": index})
        listed = dict(await tasks_of(reopen_storage()).list_tasks(INDEX))
        assert listed == {"task-0": {"n": 297}, "task-1": {"n": 298}, "task-2": {"n": 299}}

    async def test_documents_sit_beside_the_session(self, reopen_storage: StorageFactory) -> None:
        storage = documents_of(reopen_storage())
        assert await storage.get_document(KEY, "swarm") is None
        await storage.put_document(KEY, "swarm", {"active": "a"})
        await storage.put_document(KEY, "swarm", {"active": "b", "list": [1, None]})
        assert await documents_of(reopen_storage()).get_document(KEY, "swarm") == {
            "active": "b",
            "list": [1, None],
        }
        snapshot = await reopen_storage().load(KEY)
        assert snapshot is None or (snapshot.messages, snapshot.state) == ([], {})
        await reopen_storage().append(KEY, turn(0), None)
        await reopen_storage().delete(KEY)
        assert await documents_of(reopen_storage()).get_document(KEY, "swarm") is None
