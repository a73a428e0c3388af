"""LocalFileStorage's usage files: a torn last line is a call not counted, never an error."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentkeel.errors import ConcurrentWriteError, CorruptSessionError
from agentkeel.result import Usage
from agentkeel.storage import LocalFileStorage, SessionKey
from agentkeel.storage._usage_files import USAGE_FILE

pytestmark = pytest.mark.anyio
KEY = SessionKey(definition="chat", context_id="ctx-1", principal="alice")


async def test_a_torn_last_line_is_not_counted_and_cut_before_the_next_append(
    tmp_path: Path,
) -> None:
    storage = LocalFileStorage(tmp_path)
    await storage.add_usage(KEY, Usage(input_tokens=3, output_tokens=1), day="2026-12-01")
    path = storage.path(KEY) / USAGE_FILE
    with path.open("ab") as handle:
        handle.write(b'{"i":9')  # a crash during the next append
    assert await LocalFileStorage(tmp_path).context_usage(KEY) == Usage(
        input_tokens=3, output_tokens=1
    )
    reopened = LocalFileStorage(tmp_path)
    await reopened.add_usage(KEY, Usage(input_tokens=1), day="2026-12-01")
    assert await reopened.context_usage(KEY) == Usage(input_tokens=4, output_tokens=1)
    with path.open("ab") as handle:
        handle.write(b'oops\n{"i":1}\n')  # damage that no crash makes
    with pytest.raises(CorruptSessionError):
        await LocalFileStorage(tmp_path).context_usage(KEY)


async def test_daily_totals_sit_in_the_principal_folder(tmp_path: Path) -> None:
    storage = LocalFileStorage(tmp_path)
    await storage.add_usage(KEY, Usage(output_tokens=2), day="2026-12-01")
    assert (tmp_path / "alice" / ".usage" / "2026-12-01.jsonl").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["alice"]


async def test_lines_written_between_saves_count_at_once_and_after_the_save(
    tmp_path: Path,
) -> None:
    """The lines a save fsyncs are in the files from the call on, for any reader."""
    storage = LocalFileStorage(tmp_path)
    other = SessionKey(definition="chat", context_id="ctx-2", principal="alice")
    day = "2026-12-01"
    for key in (KEY, other):  # the first line of each file is written durably
        await storage.add_usage(key, Usage(input_tokens=1), day=day)
    await storage.add_usage(KEY, Usage(input_tokens=2), day=day)  # unsynced
    await storage.add_usage(other, Usage(output_tokens=3), day=day)  # unsynced
    reader = LocalFileStorage(tmp_path)
    assert await reader.context_usage(KEY) == Usage(input_tokens=3)
    assert await reader.principal_usage("alice", day) == Usage(input_tokens=4, output_tokens=3)
    await storage.append(KEY, [], {"k": 1})  # the save that owes KEY's lines
    await storage.delete(other)  # owes the day file's line: still counted there
    await storage.close()
    reopened = LocalFileStorage(tmp_path)
    assert await reopened.context_usage(KEY) == Usage(input_tokens=3)
    assert await reopened.context_usage(other) == Usage()
    assert await reopened.principal_usage("alice", day) == Usage(input_tokens=4, output_tokens=3)
    assert (await reopened.load(KEY)) is not None


async def test_a_refused_save_loses_no_usage_line_and_the_next_save_goes_through(
    tmp_path: Path,
) -> None:
    """A save refused after the usage lines it carries: they stay counted, and still owed."""
    storage = LocalFileStorage(tmp_path)
    day = "2026-12-01"
    version = await storage.append(KEY, [], {"k": 1})
    await storage.add_usage(KEY, Usage(input_tokens=1), day=day)  # the files' first lines
    await storage.add_usage(KEY, Usage(output_tokens=2), day=day)  # unsynced, owed
    with pytest.raises(ConcurrentWriteError):
        await storage.append(KEY, [], {"k": 2}, expected_version=version + 5)
    assert await storage.context_usage(KEY) == Usage(input_tokens=1, output_tokens=2)
    assert await storage.append(KEY, [], {"k": 3}, expected_version=version) == version + 1
    await storage.close()
    reopened = LocalFileStorage(tmp_path)
    assert await reopened.context_usage(KEY) == Usage(input_tokens=1, output_tokens=2)
    assert await reopened.principal_usage("alice", day) == Usage(input_tokens=1, output_tokens=2)
    snapshot = await reopened.load(KEY)
    assert snapshot is not None and snapshot.state == {"k": 3}
