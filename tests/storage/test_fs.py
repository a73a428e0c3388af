"""_fs: the crash-safe primitives every file backend writes through."""

from __future__ import annotations

import os
import random
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentkeel import _fs


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_atomic_write_bytes_creates_and_replaces(tmp_path: Path) -> None:
    target = tmp_path / "doc.json"
    _fs.atomic_write_bytes(target, b"first")
    assert target.read_bytes() == b"first"
    _fs.atomic_write_bytes(target, b"second, longer")
    assert target.read_bytes() == b"second, longer"
    _fs.atomic_write_bytes(target, b"")
    assert target.read_bytes() == b""
    assert os.listdir(tmp_path) == ["doc.json"]  # no temp file left behind
    assert mode(target) == 0o600


def test_a_failed_atomic_write_leaves_the_target_and_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "taken"
    target.mkdir()
    (target / "inside").write_bytes(b"x")
    with pytest.raises(OSError):
        _fs.atomic_write_bytes(target, b"data")  # cannot replace a non-empty folder
    assert sorted(os.listdir(tmp_path)) == ["taken"]
    assert (target / "inside").read_bytes() == b"x"
    with pytest.raises(FileNotFoundError):
        _fs.atomic_write_bytes(tmp_path / "missing" / "doc", b"data")


def test_atomic_write_json_is_compact_utf8_with_a_newline(tmp_path: Path) -> None:
    target = tmp_path / "doc.json"
    _fs.atomic_write_json(target, {"text": "é 🎉", "list": [1, None]})
    assert target.read_bytes() == '{"text":"é 🎉","list":[1,null]}\n'.encode()


def test_append_lines_writes_one_newline_terminated_batch(tmp_path: Path) -> None:
    target = tmp_path / "log.jsonl"
    assert _fs.append_lines(target, [b"a", b"bb"]) == 5
    assert _fs.append_lines(target, [b"ccc"]) == 9
    assert _fs.append_lines(target, []) == 9
    assert target.read_bytes() == b"a\nbb\nccc\n"
    assert mode(target) == 0o600


def test_append_records_creates_the_file_once_then_appends_and_cuts_a_torn_tail(
    tmp_path: Path,
) -> None:
    target = tmp_path / "runs.jsonl"
    assert _fs.append_records(target, [b"one"]) == 4
    assert mode(target) == 0o600
    target.write_bytes(target.read_bytes() + b'{"torn')  # a crash during an append
    assert _fs.append_records(target, [b"two"]) == 8
    assert _fs.append_records(target, [b"three"], durable=False) == 14
    assert target.read_bytes() == b"one\ntwo\nthree\n"


def test_truncate_cuts_a_tail(tmp_path: Path) -> None:
    target = tmp_path / "log.jsonl"
    _fs.append_lines(target, [b"kept", b"torn"])
    _fs.truncate(target, 5)
    assert target.read_bytes() == b"kept\n"
    assert _fs.file_size(target) == 5
    assert _fs.file_size(tmp_path / "missing") == 0


def test_read_bytes(tmp_path: Path) -> None:
    assert _fs.read_bytes(tmp_path / "missing") is None
    _fs.atomic_write_bytes(tmp_path / "x", b"\x00\xff")
    assert _fs.read_bytes(tmp_path / "x") == b"\x00\xff"


def test_ensure_dir_creates_parents_privately_and_is_idempotent(tmp_path: Path) -> None:
    folder = tmp_path / "a" / "b" / "c"
    _fs.ensure_dir(folder)
    _fs.ensure_dir(folder)
    assert folder.is_dir()
    assert mode(tmp_path / "a") == 0o700 and mode(folder) == 0o700
    _fs.fsync_dir(folder)
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(OSError):
        _fs.ensure_dir(tmp_path / "file" / "sub")


def test_remove_file(tmp_path: Path) -> None:
    (tmp_path / "x").write_bytes(b"1")
    assert _fs.remove_file(tmp_path / "x") is True
    assert _fs.remove_file(tmp_path / "x") is False


def test_remove_tree_removes_everything_and_nothing_else(tmp_path: Path) -> None:
    doomed = tmp_path / "chat:ctx-1"
    (doomed / "runs").mkdir(parents=True)
    (doomed / "runs" / "run-1.json").write_bytes(b"{}")
    (doomed / "messages.jsonl").write_bytes(b"x\n")
    (tmp_path / "chat:ctx-2").mkdir()
    assert _fs.remove_tree(doomed) is True
    assert os.listdir(tmp_path) == ["chat:ctx-2"]
    assert _fs.remove_tree(doomed) is False


def test_sweep_temp_files_removes_only_temp_files(tmp_path: Path) -> None:
    (tmp_path / ".state.json.abc.tmp").write_bytes(b"half")
    (tmp_path / "state.json").write_bytes(b"{}")
    (tmp_path / "notes.tmp").write_bytes(b"visible, not ours")
    assert _fs.sweep_temp_files(tmp_path) == 1
    assert sorted(os.listdir(tmp_path)) == ["notes.tmp", "state.json"]
    assert _fs.sweep_temp_files(tmp_path / "missing") == 0


REPLACER = r"""
import sys
from pathlib import Path

from agentkeel import _fs

target = Path(sys.argv[1])
contents = [bytes([65 + n]) * (200_000 + n) for n in range(4)]
print("ready", flush=True)
n = 0
while True:
    _fs.atomic_write_bytes(target, contents[n % 4])
    n += 1
"""


def test_a_killed_atomic_write_leaves_old_or_new(tmp_path: Path) -> None:
    target = tmp_path / "doc"
    valid = {bytes([65 + n]) * (200_000 + n) for n in range(4)}
    rng = random.Random(7)
    for _ in range(12):
        child = subprocess.Popen(
            [sys.executable, "-c", REPLACER, str(target)], stdout=subprocess.PIPE
        )
        assert child.stdout is not None
        assert child.stdout.readline() == b"ready\n"
        time.sleep(rng.uniform(0.0, 0.03))
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()
        if target.exists():
            assert target.read_bytes() in valid
    assert target.exists()
