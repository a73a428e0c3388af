"""LocalFileStorage's page index: pages cost the page, and follow this process's appends."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentkeel.messages import Message
from agentkeel.storage import LocalFileStorage, SessionKey, _session_files
from agentkeel.storage import _file_transcript as transcript_module

pytestmark = pytest.mark.anyio
KEY = SessionKey(definition="chat", context_id="ctx-1")


def exchange(index: int) -> list[Message]:
    return [Message.user(f"q{index} ü"), Message.assistant(f"a{index}")]


async def ids(storage: LocalFileStorage, after: str | None = None) -> list[str]:
    page = await storage.read_messages(KEY, after=after, limit=500)
    assert page is not None
    return [m.id for m in page.messages]


async def test_the_index_follows_appends_and_cuts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    builds: list[Path] = []
    build = transcript_module._build_index

    def counted(folder: Path, key: SessionKey) -> transcript_module.PageIndex | None:
        builds.append(folder)
        return build(folder, key)

    monkeypatch.setattr(transcript_module, "_build_index", counted)
    storage = LocalFileStorage(tmp_path)
    history = [*exchange(0), *exchange(1)]
    await storage.append(KEY, history, {"n": 1})
    assert await ids(storage) == [m.id for m in history]
    for index in range(2, 5):
        added = exchange(index)
        await storage.append(KEY, added, {"n": index})  # the state file path too
        history += added
    again = [Message.assistant("a1 again")]
    await storage.append(KEY, again, None, cut=3)
    history = [*history[:3], *again]
    edited = exchange(9)
    await storage.append(KEY, edited, None, cut=0)
    history = edited
    last = exchange(10)
    await storage.append(KEY, last, None)
    history += last
    assert await ids(storage) == [m.id for m in history]
    assert await ids(storage, after=history[1].id) == [m.id for m in history[2:]]
    assert len(builds) == 1  # every append was followed, nothing was read again
    fresh = LocalFileStorage(tmp_path)
    assert await ids(fresh) == [m.id for m in history]
    page = await fresh.read_messages(KEY, after=history[0].id, limit=2)
    assert page is not None and page.messages == history[1:3] and page.more


async def test_another_writer_is_seen(tmp_path: Path) -> None:
    reader, writer = LocalFileStorage(tmp_path), LocalFileStorage(tmp_path)
    first = exchange(0)
    await writer.append(KEY, first, None)
    assert await ids(reader) == [m.id for m in first]
    second = exchange(1)
    await writer.append(KEY, second, None, cut=0)
    assert await ids(reader) == [m.id for m in second]
    await writer.rewrite(KEY, first, None)
    assert await ids(reader) == [m.id for m in first]
    await writer.delete(KEY)
    assert await reader.read_messages(KEY, after=None, limit=5) is None


async def test_the_list_reads_summaries_not_histories(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loads: list[Path] = []
    load = _session_files.load

    def counted(folder: Path, key: SessionKey) -> object:
        loads.append(folder)
        return load(folder, key)

    storage = LocalFileStorage(tmp_path)
    keys = [SessionKey(definition="chat", context_id=f"ctx-{n}") for n in range(3)]
    for key in keys:
        for index in range(20):
            await storage.append(key, exchange(index), None)
    monkeypatch.setattr(_session_files, "load", counted)

    async def listing(reader: LocalFileStorage) -> list[tuple[str, str, int]]:
        page, _ = await reader.list_sessions(None, "chat", limit=10, cursor=None)
        return sorted((i.metadata.context_id, i.title, i.transcript_count) for i in page)

    assert await listing(storage) == [(k.context_id, "q0 ü", 40) for k in keys]
    assert loads == []  # every append carried its session's listing forward in memory
    await storage.append(keys[1], exchange(99), None, cut=10)  # a cut it cannot follow
    assert (await listing(storage))[1] == ("ctx-1", "q0 ü", 12)
    assert loads == [storage.path(keys[1])]  # read once, and its summary written again
    await storage.append(keys[1], exchange(100), None)
    assert (await listing(storage))[1] == ("ctx-1", "q0 ü", 14)
    other = LocalFileStorage(tmp_path)  # another process's append is seen by its stamp
    await other.append(keys[2], exchange(7), None, cut=0)
    loads.clear()
    expected = [("ctx-0", "q0 ü", 40), ("ctx-1", "q0 ü", 14), ("ctx-2", "q7 ü", 2)]
    assert await listing(storage) == expected
    assert loads == [storage.path(keys[2])]  # only the one another process changed
    loads.clear()
    assert await listing(LocalFileStorage(tmp_path)) == expected  # a restart
    # the two whose last turn here came after their last list: read once each
    assert sorted(loads) == [storage.path(keys[0]), storage.path(keys[1])]
    loads.clear()
    assert await listing(LocalFileStorage(tmp_path)) == expected
    assert loads == []  # every summary.cache is current now
