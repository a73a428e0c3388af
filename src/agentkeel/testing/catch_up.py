"""The SessionStorage conformance suite, part five: catching a cached history up.

`IncrementalLoadStorage.load_since` lets a replica whose cached Agent is some turns
behind read only the turns it lacks. Whatever a backend answers, the caller's first
`kept` messages followed by the answer's must be exactly the stored history, ids
included: a rewrite, a cut, a deleted and recreated session, or a caller that holds
something else must never produce a forked history. A backend that reads only the new
messages (`reads_only_new_messages`, True unless a subclass says otherwise) must do so
when the history since the caller's version only grew.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import ClassVar

import pytest

from agentkeel.messages import Message, TextPart
from agentkeel.storage.base import IncrementalLoadStorage, SessionSnapshot, SessionStorage
from agentkeel.testing.session_storage import KEY, StorageFactory, turn

__all__ = ["CatchUpSuite"]


async def catch_up(
    storage: SessionStorage, held: Sequence[Message], version: int
) -> tuple[list[Message], SessionSnapshot]:
    """What a caller holding `held` at `version` ends up with, and the answer itself."""
    assert isinstance(storage, IncrementalLoadStorage)
    last = held[-1].id if held else None
    snapshot = await storage.load_since(KEY, version=version, count=len(held), last_id=last)
    assert snapshot is not None
    assert 0 <= snapshot.kept <= len(held)
    return list(held[: snapshot.kept]) + snapshot.messages, snapshot


async def stored_history(storage: SessionStorage) -> list[Message]:
    """The stored history, as a caller that loaded it holds it."""
    stored = await storage.load(KEY)
    assert stored is not None
    return stored.messages


async def assert_stored(storage: SessionStorage, history: Sequence[Message]) -> SessionSnapshot:
    """`history` is the stored one, message for message and id for id."""
    stored = await storage.load(KEY)
    assert stored is not None
    assert list(history) == stored.messages
    assert [message.id for message in history] == [message.id for message in stored.messages]
    return stored


class CatchUpSuite:
    """`load_since`: only what the caller lacks, and never a history that forked."""

    pytestmark = [pytest.mark.anyio]
    reads_only_new_messages: ClassVar[bool] = True

    async def test_the_backend_has_the_capability(self, reopen_storage: StorageFactory) -> None:
        storage = reopen_storage()
        assert isinstance(storage, IncrementalLoadStorage)
        assert await storage.load_since(KEY, version=0, count=0, last_id=None) is None

    async def test_turns_appended_elsewhere_are_read_alone(
        self, reopen_storage: StorageFactory
    ) -> None:
        storage = reopen_storage()
        await storage.append(KEY, turn(0), {"n": 0})
        version = await storage.append(KEY, turn(1), None)
        held = await stored_history(storage)
        for index in range(2, 5):  # three turns by another process
            await storage.append(KEY, turn(index), {"n": index})
        reopened = reopen_storage()
        history, snapshot = await catch_up(reopened, held, version)
        stored = await assert_stored(reopened, history)
        assert (snapshot.version, snapshot.state) == (stored.version, {"n": 4})
        assert snapshot.metadata.message_count == 10
        if self.reads_only_new_messages:
            assert snapshot.kept == 4
            assert [m.text for m in snapshot.messages] == [m.text for m in stored.messages[4:]]

    async def test_a_caller_up_to_date_gets_nothing_new(
        self, reopen_storage: StorageFactory
    ) -> None:
        storage = reopen_storage()
        version = await storage.append(KEY, turn(0), {"a": 1})
        held = await stored_history(storage)
        history, snapshot = await catch_up(reopen_storage(), held, version)
        await assert_stored(storage, history)
        assert snapshot.state == {"a": 1} and snapshot.version == version
        if self.reads_only_new_messages:
            assert (snapshot.kept, snapshot.messages) == (2, [])

    async def test_a_rewrite_since_the_callers_version_reads_it_all(
        self, reopen_storage: StorageFactory
    ) -> None:
        storage = reopen_storage()
        version = await storage.append(KEY, turn(0) + turn(1), None)
        held = await stored_history(storage)
        # the same ids and length, another first message: only a full read is right
        changed = [replace(held[0], parts=(TextPart(text="summary"),)), *held[1:]]
        await storage.rewrite(KEY, changed, None)
        await storage.append(KEY, turn(2), None)
        history, snapshot = await catch_up(reopen_storage(), held, version)
        await assert_stored(storage, history)
        assert history[0].text == "summary"
        assert snapshot.kept == 0

    async def test_a_cut_since_the_callers_version_reads_it_all(
        self, reopen_storage: StorageFactory
    ) -> None:
        storage = reopen_storage()
        await storage.append(KEY, turn(0) + turn(1), None)
        version = await storage.append(KEY, turn(2), None)
        held = await stored_history(storage)
        await storage.append(KEY, turn(3), None, cut=2)  # an edit of the second question
        await storage.append(KEY, turn(4), None)
        history, _ = await catch_up(reopen_storage(), held, version)
        stored = await assert_stored(storage, history)
        assert [m.text for m in stored.messages][:4] == ["question 0", "answer 0"] + [
            "question 3",
            "answer 3",
        ]

    async def test_a_cut_before_the_callers_version_still_catches_up(
        self, reopen_storage: StorageFactory
    ) -> None:
        storage = reopen_storage()
        await storage.append(KEY, turn(0) + turn(1), None)
        version = await storage.append(KEY, turn(2), None, cut=2)
        held = await stored_history(storage)
        await storage.append(KEY, turn(3), None)
        history, snapshot = await catch_up(reopen_storage(), held, version)
        await assert_stored(storage, history)
        if self.reads_only_new_messages:
            assert snapshot.kept == 4

    async def test_a_recreated_session_is_not_taken_for_the_old_one(
        self, reopen_storage: StorageFactory
    ) -> None:
        storage = reopen_storage()
        await storage.append(KEY, turn(0), None)
        version = await storage.append(KEY, turn(1), None)
        held = await stored_history(storage)
        assert await storage.delete(KEY)
        for index in range(5, 9):  # a new conversation on the same context, further on
            await storage.append(KEY, turn(index), None)
        history, snapshot = await catch_up(reopen_storage(), held, version)
        await assert_stored(storage, history)
        assert snapshot.kept == 0 and history[0].text == "question 5"

    async def test_a_caller_holding_other_messages_reads_it_all(
        self, reopen_storage: StorageFactory
    ) -> None:
        storage = reopen_storage()
        version = await storage.append(KEY, turn(0), None)
        await storage.append(KEY, turn(1), None)
        history, snapshot = await catch_up(reopen_storage(), turn(7), version)
        await assert_stored(storage, history)
        assert snapshot.kept == 0

    async def test_a_caller_claiming_more_than_is_stored_reads_it_all(
        self, reopen_storage: StorageFactory
    ) -> None:
        storage = reopen_storage()
        version = await storage.append(KEY, turn(0), None)
        held = await stored_history(storage)
        history, snapshot = await catch_up(reopen_storage(), [*held, *turn(1)], version)
        await assert_stored(storage, history)
        assert snapshot.kept == 0
