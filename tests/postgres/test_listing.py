"""The context list on PostgreSQL reads the session rows' ``title``/``shown``, kept by commits.

After every kind of commit (append, cut, rewrite, a refused one) the list shows what the
history itself says (`transcript.listed` of the loaded messages); a session written
before migration 7 lists right too (the first list reads its history once and fills the
row); and a filled row's list reads no message row at all.
"""

from __future__ import annotations

import psycopg
import pytest
from psycopg import sql

from agentkeel.errors import ConcurrentWriteError
from agentkeel.keys import SessionKey
from agentkeel.messages import Message, ToolCallPart, ToolResultPart
from agentkeel.storage._history import encode_messages
from agentkeel.storage.postgres import PostgresStorage
from agentkeel.storage.postgres_schema import MIGRATIONS, migrate
from agentkeel.storage.transcript import listed

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]
KEY = SessionKey(definition="chat", context_id="ctx-list", principal="ada")


def _tool_turn(index: int) -> list[Message]:
    """A question, a tool call and its result (not shown), and an answer."""
    call = Message(role="assistant", parts=(ToolCallPart(id=f"c{index}", name="t"),))
    result = Message(role="user", parts=(ToolResultPart(call_id=f"c{index}", name="t", content=1),))
    return [Message.user(f"question {index}"), call, result, Message.assistant(f"answer {index}")]


async def _listing(storage: PostgresStorage, key: SessionKey = KEY) -> tuple[str, int]:
    page, _ = await storage.list_sessions(key.principal, key.definition, limit=10, cursor=None)
    found = [item for item in page if item.metadata.context_id == key.context_id]
    assert len(found) == 1
    return found[0].title, found[0].transcript_count


async def _truth(storage: PostgresStorage, key: SessionKey = KEY) -> tuple[str, int]:
    snapshot = await storage.load(key)
    assert snapshot is not None
    return listed(snapshot.messages)


async def _columns(storage: PostgresStorage) -> list[tuple[object, ...]]:
    async with storage._connection() as conn:
        cursor = await conn.execute(
            storage._sql("SELECT context_id, shown, title FROM {s}.sessions ORDER BY context_id")
        )
        return list(await cursor.fetchall())


async def test_the_listing_follows_every_commit(pg_storage: PostgresStorage) -> None:
    opening = Message(role="assistant", parts=Message.assistant("hello").parts)
    version = await pg_storage.append(KEY, [opening], None)
    assert await _listing(pg_storage) == ("", 1) == await _truth(pg_storage)
    version = await pg_storage.append(KEY, _tool_turn(0), None)
    assert await _listing(pg_storage) == ("question 0", 4) == await _truth(pg_storage)
    version = await pg_storage.append(KEY, [*_tool_turn(1), *_tool_turn(2)], None)
    assert await _listing(pg_storage) == ("question 0", 10) == await _truth(pg_storage)
    # regenerate: cut inside turn 2 (after its tool result), keeping the title
    version = await pg_storage.append(KEY, [Message.assistant("again")], None, cut=12)
    assert await _listing(pg_storage) == ("question 0", 10) == await _truth(pg_storage)
    # edit of the first question: the title's row is cut, the turn brings the new one
    version = await pg_storage.append(KEY, _tool_turn(7), None, cut=1)
    assert await _listing(pg_storage) == ("question 7", 4) == await _truth(pg_storage)
    # a cut to the assistant's opening with no user message in the turn: no title
    version = await pg_storage.append(KEY, [Message.assistant("bye")], None, cut=1)
    assert await _listing(pg_storage) == ("", 2) == await _truth(pg_storage)
    version = await pg_storage.append(KEY, _tool_turn(3), None, expected_version=version)
    assert await _listing(pg_storage) == ("question 3", 5) == await _truth(pg_storage)
    # a refused commit changes nothing of it
    with pytest.raises(ConcurrentWriteError):
        await pg_storage.append(KEY, _tool_turn(4), None, expected_version=version - 1)
    with pytest.raises(ConcurrentWriteError):
        await pg_storage.append(KEY, _tool_turn(4), None, expected_version=version - 1, cut=0)
    assert await _listing(pg_storage) == ("question 3", 5)
    # trim: the rewrite keeps the last messages only
    snapshot = await pg_storage.load(KEY)
    assert snapshot is not None
    await pg_storage.rewrite(KEY, snapshot.messages[-3:], None)
    assert await _listing(pg_storage) == ("", 2) == await _truth(pg_storage)
    await pg_storage.rewrite(KEY, [Message.user("first\x00 of all"), *_tool_turn(5)], None)
    assert await _listing(pg_storage) == ("first\x00 of all", 4) == await _truth(pg_storage)


async def test_a_new_session_through_the_locking_path(pg_storage: PostgresStorage) -> None:
    await pg_storage.append(KEY, _tool_turn(0), None, fence=3)  # creates the row
    await pg_storage.append(KEY, _tool_turn(1), None, fence=3)
    assert await _listing(pg_storage) == ("question 0", 6) == await _truth(pg_storage)
    other = SessionKey(definition="chat", context_id="ctx-cut-new", principal="ada")
    await pg_storage.append(other, _tool_turn(2), None, cut=0)
    assert await _listing(pg_storage, other) == ("question 2", 3)


async def test_a_filled_row_is_listed_without_its_history(pg_storage: PostgresStorage) -> None:
    await pg_storage.append(KEY, _tool_turn(0), None)
    async with pg_storage._connection() as conn:  # nothing a list reads is in these rows
        await conn.execute(pg_storage._sql("UPDATE {s}.messages SET body = '{{}}'"))
    assert await _listing(pg_storage) == ("question 0", 3)


async def test_a_session_written_before_the_columns(pg_database: str, pg_schema: str) -> None:
    before = tuple(m for m in MIGRATIONS if m.version < 7)
    keys = [SessionKey(definition="chat", context_id=f"ctx-{i}", principal="ada") for i in (0, 1)]
    histories = [[Message.assistant("hi"), *_tool_turn(0)], [*_tool_turn(1), *_tool_turn(2)]]
    # what agentkeel wrote before migration 7: sessions and their messages, no listing
    async with await psycopg.AsyncConnection.connect(pg_database, autocommit=True) as old:
        assert await migrate(old, pg_schema, before) == [1, 2, 3, 4, 5, 6]
        for number, (key, history) in enumerate(zip(keys, histories, strict=True), 1):
            await old.execute(
                sql.SQL(
                    "INSERT INTO {}.sessions (id, principal, definition, context_id, saved,"
                    " version, message_count, created_at, updated_at)"
                    " VALUES (%s, 'ada', 'chat', %s, true, 1, %s, %s, %s)"
                ).format(sql.Identifier(pg_schema)),
                (number, key.context_id, len(history), 1000.0 + number, 1000.0 + number),
            )
            for seq, line in enumerate(encode_messages(history), 1):
                await old.execute(
                    sql.SQL(
                        "INSERT INTO {}.messages (session_id, seq, body) VALUES (%s, %s, %s)"
                    ).format(sql.Identifier(pg_schema)),
                    (number, seq, line.decode("utf-8")),
                )
    storage = PostgresStorage(pg_database, schema=pg_schema, pool_size=2)
    await storage.open()  # migration 7: the rows' listing is not known yet
    try:
        assert [row[1:] for row in await _columns(storage)] == [(None, None), (None, None)]
        await storage.append(keys[1], _tool_turn(3), None)  # a commit keeps it unknown
        assert (await _columns(storage))[1][1] is None
        assert await _listing(storage, keys[0]) == ("question 0", 4)
        assert await _truth(storage, keys[0]) == ("question 0", 4)
        assert await _listing(storage, keys[1]) == ("question 1", 9)
        assert await _truth(storage, keys[1]) == ("question 1", 9)
        assert await _columns(storage) == [("ctx-0", 4, "question 0"), ("ctx-1", 9, "question 1")]
        await storage.append(keys[0], _tool_turn(4), None)  # filled: carried from here on
        await storage.append(keys[1], [Message.assistant("more")], None, cut=0)
        assert await _listing(storage, keys[0]) == ("question 0", 7)
        assert await _truth(storage, keys[0]) == ("question 0", 7)
        assert await _listing(storage, keys[1]) == ("", 1) == await _truth(storage, keys[1])
    finally:
        await storage.close()
