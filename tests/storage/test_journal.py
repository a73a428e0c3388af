"""The commit journal of LocalFileStorage: one fsync per batch, and what a crash leaves.

A writer is a real process, killed with SIGKILL. A power cut is what it does to the
disk: the appends that only reached the page cache are gone (the files are cut back to
their size before them), and the journal's segment carries the id of an earlier boot.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from agentkeel.messages import Message
from agentkeel.result import Usage
from agentkeel.storage import LocalFileStorage, SessionKey
from agentkeel.storage._file_journal import JOURNAL_DIR, boot_id
from agentkeel.storage.base import RunRecord

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(boot_id() is None, reason="the journal needs a boot id (/proc)"),
]
KEY = SessionKey(definition="chat", context_id="ctx-journal")
DAY = "2026-12-01"

_WRITER = """
import anyio, os, signal, sys
from agentkeel.messages import Message
from agentkeel.result import Usage
from agentkeel.storage import LocalFileStorage, SessionKey
from agentkeel.storage.base import RunRecord

async def main() -> None:
    storage = LocalFileStorage(sys.argv[1])
    await storage.open()
    key = SessionKey(definition="chat", context_id=sys.argv[2])
    await storage.load(key)  # cached: every turn below only appends
    for number in range(int(sys.argv[3])):
        await storage.add_usage(key, Usage(input_tokens=1), day="2026-12-01")
        text = sys.argv[4] if number == 0 else f"answer {number}"
        messages = [Message.user(f"question {number}"), Message.assistant(text)]
        run = RunRecord(run_id=f"run-{number}", status="completed", input="q", started_at=1.0)
        await storage.append(key, messages, None, run=run)
        print(number, flush=True)
    if sys.argv[5] == "rewrite":
        await storage.rewrite(key, [Message.user("kept"), Message.assistant("only")], None)
    if sys.argv[5] == "delete":
        await storage.delete(key)
    os.kill(os.getpid(), signal.SIGKILL)

anyio.run(main)
"""


def _files(root: Path, context_id: str = KEY.context_id) -> list[Path]:
    folder = root / f"chat:{context_id}"
    return [
        folder / "messages.jsonl",
        folder / "runs.jsonl",
        folder / "usage.jsonl",
        root / ".usage" / f"{DAY}.jsonl",
    ]


def _killed_writer(root: Path, turns: int, then: str = "", secret: str = "answer 0") -> None:
    """Run `turns` turns in a process of its own, which SIGKILLs itself at the end."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_WRITER), str(root), KEY.context_id,
         str(turns), secret, then or "-"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert done.stdout.splitlines()[turns - 1] == str(turns - 1)


def _segments(root: Path) -> list[Path]:
    return sorted((root / JOURNAL_DIR).glob("*.log"))


def _power_cut(root: Path, sizes: dict[Path, int]) -> None:
    """What a power cut leaves: files cut back to `sizes`, segments of an earlier boot."""
    for path, size in sizes.items():
        os.truncate(path, size)
    for segment in _segments(root):
        raw = segment.read_bytes()
        header, _, body = raw.partition(b"\n")
        magic, _, _ = header.rpartition(b" ")
        segment.write_bytes(magic + b" " + str(uuid.uuid4()).encode() + b"\n" + body)


async def _first_turn(root: Path) -> dict[Path, int]:
    """Create the session (its files are created durably), then close; their sizes."""
    storage = LocalFileStorage(root)
    await storage.add_usage(KEY, Usage(input_tokens=1), day=DAY)
    run = RunRecord(run_id="run-first", status="completed", input="q", started_at=1.0)
    await storage.append(KEY, [Message.user("hello"), Message.assistant("hi")], None, run=run)
    await storage.add_usage(KEY, Usage(input_tokens=1), day=DAY)  # usage.jsonl exists now
    await storage.close()
    assert _segments(root) == []  # a clean stop leaves no journal behind
    return {path: path.stat().st_size for path in _files(root)}


async def test_a_killed_writer_loses_nothing_and_its_journal_is_finished(
    tmp_path: Path,
) -> None:
    await _first_turn(tmp_path)
    _killed_writer(tmp_path, 5)
    assert _segments(tmp_path)  # the killed process did not get to clean up
    storage = LocalFileStorage(tmp_path)
    await storage.open()
    assert _segments(tmp_path) == []  # same boot: its files were fsynced, it is gone
    snapshot = await storage.load(KEY)
    assert snapshot is not None and snapshot.version == 6
    assert await storage.context_usage(KEY) == Usage(input_tokens=7)


async def test_after_a_power_cut_the_journal_puts_back_every_acknowledged_append(
    tmp_path: Path,
) -> None:
    sizes = await _first_turn(tmp_path)
    _killed_writer(tmp_path, 5)
    _power_cut(tmp_path, sizes)
    assert b"answer 4" not in _files(tmp_path)[0].read_bytes()  # what the disk holds
    storage = LocalFileStorage(tmp_path)
    await storage.open()
    snapshot = await storage.load(KEY)
    assert snapshot is not None and snapshot.version == 6
    assert [m.text for m in snapshot.messages[-2:]] == ["question 4", "answer 4"]
    assert await storage.context_usage(KEY) == Usage(input_tokens=7)
    assert await storage.principal_usage(None, DAY) == Usage(input_tokens=7)
    latest = await storage.latest_run(KEY)
    assert latest is not None and latest.run_id == "run-4"
    assert _segments(tmp_path) == []
    await storage.append(KEY, [Message.user("q"), Message.assistant("a")], None)
    again = await LocalFileStorage(tmp_path).load(KEY)
    assert again is not None and again.version == 7


async def test_a_torn_last_record_is_dropped_and_those_before_it_replayed(
    tmp_path: Path,
) -> None:
    sizes = await _first_turn(tmp_path)
    _killed_writer(tmp_path, 3)
    _power_cut(tmp_path, sizes)
    (segment,) = _segments(tmp_path)
    raw = segment.read_bytes()
    last = raw.rindex(b"\nR ") + 1  # the last turn's record: cut in its middle
    segment.write_bytes(raw[: last + (len(raw) - last) // 2])
    storage = LocalFileStorage(tmp_path)
    await storage.open()
    snapshot = await storage.load(KEY)
    assert snapshot is not None and snapshot.version == 3  # the third turn never acked
    assert snapshot.messages[-1].text == "answer 1"


async def test_a_replay_never_writes_old_appends_into_a_rewritten_history(
    tmp_path: Path,
) -> None:
    sizes = await _first_turn(tmp_path)
    _killed_writer(tmp_path, 4, then="rewrite")
    del sizes[_files(tmp_path)[0]]  # the rewrite's rename was durable
    _power_cut(tmp_path, sizes)
    storage = LocalFileStorage(tmp_path)
    await storage.open()
    snapshot = await storage.load(KEY)  # no CorruptSessionError: the barrier held
    assert snapshot is not None
    assert [m.text for m in snapshot.messages] == ["kept", "only"]


async def test_a_deleted_context_leaves_none_of_its_bytes_in_the_journal(
    tmp_path: Path,
) -> None:
    await _first_turn(tmp_path)
    secret = "my bank pin is 4711"
    _killed_writer(tmp_path, 3, then="delete", secret=secret)
    assert all(secret.encode() not in segment.read_bytes() for segment in _segments(tmp_path))
    _power_cut(tmp_path, {})
    storage = LocalFileStorage(tmp_path)  # the same id, used again
    await storage.append(KEY, [Message.user("new"), Message.assistant("start")], None)
    await storage.close()
    snapshot = await LocalFileStorage(tmp_path).load(KEY)
    assert snapshot is not None and [m.text for m in snapshot.messages] == ["new", "start"]


async def test_a_live_writers_journal_is_left_alone(tmp_path: Path) -> None:
    await _first_turn(tmp_path)
    writer = LocalFileStorage(tmp_path)
    await writer.load(KEY)  # cached: the append below goes through the journal
    await writer.append(KEY, [Message.user("q"), Message.assistant("a")], None)
    (segment,) = _segments(tmp_path)
    reader = LocalFileStorage(tmp_path)
    await reader.open()
    assert _segments(tmp_path) == [segment]
    snapshot = await reader.load(KEY)
    assert snapshot is not None and snapshot.version == 2
    await writer.close()
    assert _segments(tmp_path) == []


async def test_full_segments_are_retired_and_the_turns_stay(tmp_path: Path) -> None:
    await _first_turn(tmp_path)
    storage = LocalFileStorage(tmp_path)
    storage._journal.segment_bytes = 2048  # a few turns per segment
    for number in range(30):
        await storage.add_usage(KEY, Usage(output_tokens=1), day=DAY)
        turn = [Message.user(f"q{number}"), Message.assistant(f"a{number}")]
        await storage.append(KEY, turn, None)
        assert len(_segments(tmp_path)) == 1  # the full one was retired, not kept
    (segment,) = _segments(tmp_path)
    assert int(segment.stem.rsplit("-", 1)[1]) > 5  # it rotated several times
    reopened = LocalFileStorage(tmp_path)
    snapshot = await reopened.load(KEY)
    assert snapshot is not None and snapshot.version == 31
    assert await reopened.context_usage(KEY) == Usage(input_tokens=2, output_tokens=30)
