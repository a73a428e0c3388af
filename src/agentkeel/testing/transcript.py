"""The SessionStorage conformance suite, transcript part: message ids, pages, cuts, lists.

Part of `agentkeel.testing.SessionStorageSuite`: every backend keeps each message's id,
reads a page of a history by id, cuts a history as part of a turn, and lists a
principal's sessions of a definition.
"""

from __future__ import annotations

from dataclasses import replace

import anyio
import pytest

from agentkeel.errors import (
    ConcurrentWriteError,
    InvalidRequestError,
    MessageNotFoundError,
    StorageError,
)
from agentkeel.keys import SessionKey
from agentkeel.messages import MESSAGE_ID_PATTERN, Message, ToolCallPart, ToolResultPart
from agentkeel.storage.transcript import TranscriptStorage
from agentkeel.testing.session_storage import KEY, StorageFactory, turn

__all__ = ["TranscriptSuite"]


def _transcript(storage: object) -> TranscriptStorage:
    assert isinstance(storage, TranscriptStorage), "every backend reads transcripts"
    return storage


async def _ids(reopen_storage: StorageFactory, key: SessionKey = KEY) -> list[str]:
    snapshot = await reopen_storage().load(key)
    assert snapshot is not None
    return [message.id for message in snapshot.messages]


class TranscriptSuite:
    """Message ids, history pages, cuts and the session list."""

    pytestmark = [pytest.mark.anyio]

    async def test_message_ids_are_kept(self, reopen_storage: StorageFactory) -> None:
        messages = [*turn(0), *turn(1)]
        await reopen_storage().append(KEY, messages, None)
        ids = await _ids(reopen_storage)
        assert ids == [message.id for message in messages]
        assert all(MESSAGE_ID_PATTERN.fullmatch(item) for item in ids)
        assert len(set(ids)) == len(ids)

    async def test_a_rewrite_keeps_the_ids_it_is_given(
        self, reopen_storage: StorageFactory
    ) -> None:
        messages = [*turn(0), *turn(1)]
        await reopen_storage().append(KEY, messages, None)
        await reopen_storage().rewrite(KEY, messages[2:], None)
        assert await _ids(reopen_storage) == [message.id for message in messages[2:]]

    async def test_pages_follow_the_ids(self, reopen_storage: StorageFactory) -> None:
        messages = [message for index in range(5) for message in turn(index)]
        for index in range(5):
            await reopen_storage().append(KEY, messages[index * 2 : index * 2 + 2], None)
        storage = _transcript(reopen_storage())
        first = await storage.read_messages(KEY, after=None, limit=4)
        assert first is not None
        assert [m.id for m in first.messages] == [m.id for m in messages[:4]]
        assert first.more and first.start == 0
        second = await storage.read_messages(KEY, after=messages[3].id, limit=4)
        assert second is not None
        assert second.messages == messages[4:8]
        assert second.start == 4
        last = await storage.read_messages(KEY, after=messages[7].id, limit=4)
        assert last is not None
        assert [m.id for m in last.messages] == [m.id for m in messages[8:]]
        assert not last.more
        end = await storage.read_messages(KEY, after=messages[9].id, limit=4)
        assert end is not None and end.messages == [] and not end.more

    async def test_an_unknown_message_or_session(self, reopen_storage: StorageFactory) -> None:
        storage = _transcript(reopen_storage())
        assert await storage.read_messages(KEY, after=None, limit=5) is None
        await reopen_storage().append(KEY, turn(0), None)
        with pytest.raises(MessageNotFoundError):
            await storage.read_messages(KEY, after="msg-" + "f" * 24, limit=5)
        other = SessionKey(definition=KEY.definition, context_id=KEY.context_id, principal="eve")
        assert await storage.read_messages(other, after=None, limit=5) is None

    async def test_a_cut_is_part_of_the_turn(self, reopen_storage: StorageFactory) -> None:
        storage = reopen_storage()
        version = await storage.append(KEY, [*turn(0), *turn(1)], {"n": 1})
        again = turn(2)
        version = await storage.append(KEY, again, None, expected_version=version, cut=2)
        snapshot = await reopen_storage().load(KEY)
        assert snapshot is not None
        assert snapshot.messages == [*turn(0), *again]
        assert [m.id for m in snapshot.messages[2:]] == [m.id for m in again]
        assert snapshot.state == {"n": 1}  # a cut leaves the AgentState alone
        assert snapshot.version == version == 2
        assert snapshot.metadata.message_count == 4
        page = await _transcript(reopen_storage()).read_messages(KEY, after=None, limit=10)
        assert page is not None and [m.id for m in page.messages] == [
            m.id for m in snapshot.messages
        ]
        await reopen_storage().append(KEY, turn(3), None)
        final = await reopen_storage().load(KEY)
        assert final is not None and final.messages == [*turn(0), *again, *turn(3)]

    async def test_a_cut_to_nothing_and_without_messages(
        self, reopen_storage: StorageFactory
    ) -> None:
        await reopen_storage().append(KEY, turn(0), None)
        version = await reopen_storage().append(KEY, [], None, cut=0)
        snapshot = await reopen_storage().load(KEY)
        assert snapshot is not None and snapshot.messages == [] and snapshot.version == version

    async def test_a_refused_cut_cuts_nothing(self, reopen_storage: StorageFactory) -> None:
        storage = reopen_storage()
        version = await storage.append(KEY, [*turn(0), *turn(1)], None)
        with pytest.raises(ConcurrentWriteError):
            await storage.append(KEY, turn(2), None, expected_version=version - 1, cut=0)
        with pytest.raises(StorageError):
            await storage.append(KEY, turn(2), None, cut=5)
        snapshot = await reopen_storage().load(KEY)
        assert snapshot is not None and snapshot.messages == [*turn(0), *turn(1)]
        assert snapshot.version == version

    async def test_the_list_is_newest_first_and_per_principal(
        self, reopen_storage: StorageFactory
    ) -> None:
        storage = reopen_storage()
        keys = [
            SessionKey(definition="chat", context_id=f"ctx-{index}", principal="ada")
            for index in range(5)
        ]
        for index, key in enumerate(keys):
            tool = Message(role="user", parts=(ToolResultPart(call_id="c", name="t", content=1),))
            call = Message(role="assistant", parts=(ToolCallPart(id="c", name="t"),))
            await storage.append(key, [Message.user(f"question {index}"), call, tool], None)
            await anyio.sleep(0.002)  # a backend may keep update times to the millisecond
        await storage.append(keys[1], turn(9), None)  # ctx-1 is now the newest
        for definition, context_id, principal in (("chat", "x", "bob"), ("other", "y", "ada")):
            other = SessionKey(definition=definition, context_id=context_id, principal=principal)
            await storage.append(other, [], None)
        listing = _transcript(reopen_storage())
        page, cursor = await listing.list_sessions("ada", "chat", limit=2, cursor=None)
        assert [item.metadata.context_id for item in page] == ["ctx-1", "ctx-4"]
        assert page[0].title == "question 1"
        assert page[0].transcript_count == 4  # the tool result is not in the transcript
        assert page[1].transcript_count == 2
        assert cursor is not None
        rest: list[str] = []
        while cursor is not None:
            more, cursor = await listing.list_sessions("ada", "chat", limit=2, cursor=cursor)
            rest.extend(item.metadata.context_id for item in more)
        assert rest == ["ctx-3", "ctx-2", "ctx-0"]
        assert (await listing.list_sessions("eve", "chat", limit=5, cursor=None)) == ([], None)
        with pytest.raises(InvalidRequestError):
            await listing.list_sessions("ada", "chat", limit=5, cursor="not-a-cursor")

    async def test_the_list_follows_cuts_and_rewrites(self, reopen_storage: StorageFactory) -> None:
        storage = reopen_storage()
        key = SessionKey(definition="chat", context_id="ctx-cut", principal="ada")
        await storage.append(key, [*turn(0), *turn(1), *turn(2)], None)
        await storage.append(key, turn(7), None, cut=2)
        page, _ = await _transcript(reopen_storage()).list_sessions(
            "ada", "chat", limit=5, cursor=None
        )
        assert [(item.title, item.transcript_count) for item in page] == [("question 0", 4)]
        await reopen_storage().append(key, turn(8), None, cut=0)
        page, _ = await _transcript(reopen_storage()).list_sessions(
            "ada", "chat", limit=5, cursor=None
        )
        assert [(item.title, item.transcript_count) for item in page] == [("question 8", 2)]
        await reopen_storage().rewrite(key, [*turn(5), *turn(6), *turn(4)], None)
        page, _ = await _transcript(reopen_storage()).list_sessions(
            "ada", "chat", limit=5, cursor=None
        )
        assert [(item.title, item.transcript_count) for item in page] == [("question 5", 6)]

    async def test_commit_times_and_members_are_kept(self, reopen_storage: StorageFactory) -> None:
        stamped = [
            replace(message, created_at=1764576000.25, agent="triage" if i else None)
            for i, message in enumerate(turn(0))
        ]
        plain = turn(1)  # a message stored without a time (as before 0.3) has none
        await reopen_storage().append(KEY, [*stamped, *plain], None)
        snapshot = await reopen_storage().load(KEY)
        assert snapshot is not None
        kept = [(m.created_at, m.agent) for m in snapshot.messages]
        assert kept == [
            (1764576000.25, None),
            (1764576000.25, "triage"),
            (None, None),
            (None, None),
        ]
        page = await _transcript(reopen_storage()).read_messages(KEY, after=None, limit=2)
        assert page is not None and [(m.created_at, m.agent) for m in page.messages] == kept[:2]
