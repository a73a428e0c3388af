"""A PostgreSQL row written before message ids existed gets the id of its position."""

from __future__ import annotations

import pytest

from agentkeel.keys import SessionKey
from agentkeel.messages import Message, position_message_id
from agentkeel.storage.postgres import PostgresStorage
from agentkeel.storage.transcript import TranscriptStorage

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]
KEY = SessionKey(definition="chat", context_id="ctx-old")


async def test_an_old_postgresql_row_gets_its_position_id(pg_storage: PostgresStorage) -> None:
    await pg_storage.append(KEY, [Message.user("one"), Message.assistant("two")], None)
    async with pg_storage._connection() as conn:  # what 0.1.0 stored: bodies without ids
        await conn.execute(
            pg_storage._sql("UPDATE {s}.messages SET body = (body::jsonb - 'id')::json")
        )
    snapshot = await pg_storage.load(KEY)
    assert snapshot is not None
    assert [m.id for m in snapshot.messages] == [position_message_id(0), position_message_id(1)]
    assert isinstance(pg_storage, TranscriptStorage)
    page = await pg_storage.read_messages(KEY, after=position_message_id(0), limit=5)
    assert page is not None and [m.text for m in page.messages] == ["two"]
    assert [m.id for m in page.messages] == [position_message_id(1)]
