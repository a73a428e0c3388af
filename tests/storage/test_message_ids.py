"""Message ids of histories written before ids existed: derived from the position, stable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentkeel import _fs
from agentkeel.keys import SessionKey
from agentkeel.messages import Message, message_from_json, message_to_json, position_message_id
from agentkeel.storage import InMemoryStorage, LocalFileStorage

pytestmark = pytest.mark.anyio
KEY = SessionKey(definition="chat", context_id="ctx-old")


def old_line(message: Message, turn: int | None = None) -> bytes:
    """A messages.jsonl line as 0.1.0 wrote it: the message without an id."""
    body = {k: v for k, v in message_to_json(message).items() if k != "id"}
    record: dict[str, object] = {"m": body}
    if turn is not None:
        record.update(t=turn, at=1_700_000_000.0)
    return json.dumps(record).encode() + b"\n"


def test_the_codec_keeps_or_derives_an_id() -> None:
    message = Message.user("hi")
    assert message_from_json(message_to_json(message)).id == message.id
    bare = {"role": "user", "parts": [{"kind": "text", "text": "hi"}]}
    assert (
        message_from_json(bare, position=5).id == position_message_id(5) == "msg-" + "0" * 23 + "5"
    )
    assert message_from_json(bare).id != message_from_json(bare).id  # minted when unknown
    assert Message.user("hi") == Message.user("hi")  # ids are not part of equality


async def test_an_old_file_session_gets_stable_position_ids(tmp_path: Path) -> None:
    storage = LocalFileStorage(tmp_path)
    folder = storage.path(KEY)
    folder.mkdir(parents=True)
    _fs.atomic_write_json(folder / "session.json", {"created_at": 1_700_000_000.0})
    old = [Message.user("one"), Message.assistant("two"), Message.user("three")]
    answer = Message.assistant("four")
    body = old_line(old[0]) + old_line(old[1], 1) + old_line(old[2]) + old_line(answer, 2)
    (folder / "messages.jsonl").write_bytes(body)
    first = await LocalFileStorage(tmp_path).load(KEY)
    again = await LocalFileStorage(tmp_path).load(KEY)
    assert first is not None and again is not None
    expected = [position_message_id(i) for i in range(4)]
    assert [m.id for m in first.messages] == [m.id for m in again.messages] == expected
    page = await LocalFileStorage(tmp_path).read_messages(KEY, after=expected[1], limit=5)
    assert page is not None and [m.id for m in page.messages] == expected[2:]
    # a new turn keeps them, and its own messages get minted ids
    await storage.append(KEY, [Message.user("five")], None)
    later = await LocalFileStorage(tmp_path).load(KEY)
    assert later is not None and [m.id for m in later.messages][:4] == expected
    # a rewrite stores the ids they were loaded with
    await storage.rewrite(KEY, later.messages[2:], None)
    trimmed = await LocalFileStorage(tmp_path).load(KEY)
    assert trimmed is not None
    assert [m.id for m in trimmed.messages] == [*expected[2:], later.messages[4].id]


async def test_memory_storage_pages_by_id() -> None:
    storage = InMemoryStorage()
    messages = [Message.user("a"), Message.assistant("b"), Message.user("c")]
    await storage.append(KEY, messages, None)
    page = await storage.read_messages(KEY, after=messages[0].id, limit=1)
    assert page is not None and page.messages == [messages[1]] and page.more
