"""LocalFileStorage on disk: the SPEC layout, crash recovery, corruption and path safety.

What every backend must do is in tests/conformance; this file covers what only a file
backend can get wrong. Tests write bytes into session files by hand to stand for what a
crash or a broken disk leaves behind.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import cast

import pytest

from agentkeel.checkpoint import Checkpoint, FileCheckpointer
from agentkeel.errors import CorruptSessionError
from agentkeel.messages import MESSAGE_ID_PATTERN, JSONObject, Message, message_to_json
from agentkeel.storage import LocalFileStorage, RunRecord, SessionKey
from agentkeel.storage.file import session_folder

pytestmark = pytest.mark.anyio

KEY = SessionKey(definition="chat", context_id="ctx-1")


def turn(index: int) -> list[Message]:
    return [Message.user(f"question {index}"), Message.assistant(f"answer {index}")]


def lines_of(path: Path) -> list[JSONObject]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def add_bytes(path: Path, data: bytes) -> None:
    """What a crash in the middle of an append leaves: bytes after the last commit."""
    with open(path, "ab") as handle:
        handle.write(data)


async def saved(tmp_path: Path, turns: int = 2, state: JSONObject | None = None) -> Path:
    storage = LocalFileStorage(tmp_path)
    for index in range(turns):
        await storage.append(KEY, turn(index), state)
    return storage.path(KEY)


async def history(tmp_path: Path, key: SessionKey = KEY) -> tuple[list[str], JSONObject]:
    snapshot = await LocalFileStorage(tmp_path).load(key)
    assert snapshot is not None
    return [message.text for message in snapshot.messages], snapshot.state


def texts(turns: int) -> list[str]:
    return [message.text for index in range(turns) for message in turn(index)]


# -- layout ---------------------------------------------------------------------------


async def test_layout_matches_the_spec(tmp_path: Path) -> None:
    storage = LocalFileStorage(tmp_path)
    await storage.append(KEY, turn(0), {})
    folder = tmp_path / "chat:ctx-1"
    assert sorted(os.listdir(folder)) == ["messages.jsonl", "session.json"]  # no state yet
    meta = json.loads((folder / "session.json").read_bytes())
    assert meta["schema_version"] == 1
    assert meta["session_id"] == "chat:ctx-1"
    assert (meta["definition"], meta["context_id"], meta["owner"]) == ("chat", "ctx-1", None)
    assert isinstance(meta["created_at"], float)

    await storage.append(KEY, turn(1), {"k": "v"})
    await storage.put_run(
        KEY, RunRecord(run_id="run-1", status="completed", input="q", started_at=1.0)
    )
    assert sorted(os.listdir(folder)) == [
        "messages.jsonl",
        "runs.jsonl",
        "session.json",
        "state.json",
    ]
    runs = [json.loads(line) for line in (folder / "runs.jsonl").read_bytes().splitlines()]
    assert [(run["run_id"], run["schema_version"]) for run in runs] == [("run-1", 1)]
    state_doc = json.loads((folder / "state.json").read_bytes())
    assert state_doc["state"] == {"k": "v"} and state_doc["schema_version"] == 1

    alice = SessionKey(definition="chat", context_id="ctx-1", principal="alice")
    await storage.append(alice, turn(0), None)
    assert (tmp_path / "alice" / "chat:ctx-1" / "messages.jsonl").is_file()


async def test_each_line_is_one_message_in_the_codec_and_turns_commit(tmp_path: Path) -> None:
    folder = await saved(tmp_path, turns=3, state={"n": 1})
    lines = lines_of(folder / "messages.jsonl")
    # each line also holds the message's id (SPEC 3), minted when the message was made
    stored = [cast(JSONObject, line["m"]) for line in lines]
    assert [{k: v for k, v in m.items() if k != "id"} for m in stored] == [
        {k: v for k, v in message_to_json(message).items() if k != "id"}
        for index in range(3)
        for message in turn(index)
    ]
    assert all(MESSAGE_ID_PATTERN.fullmatch(str(m["id"])) for m in stored)
    commits = [line for line in lines if "t" in line]
    assert commits == [lines[1], lines[3], lines[5]]
    assert [line["t"] for line in commits] == [1, 2, 3]
    assert commits[0]["s"] == 1 and "s" not in commits[1]  # the state changed only once


async def test_state_json_disappears_when_the_state_empties(tmp_path: Path) -> None:
    storage = LocalFileStorage(tmp_path)
    await storage.append(KEY, turn(0), {"a": 1})
    assert (storage.path(KEY) / "state.json").exists()
    await storage.append(KEY, turn(1), {})
    assert not (storage.path(KEY) / "state.json").exists()
    assert await history(tmp_path) == (texts(2), {})


async def test_a_session_has_a_constant_number_of_files(tmp_path: Path) -> None:
    storage = LocalFileStorage(tmp_path)
    for index in range(200):
        await storage.append(KEY, turn(index), {"turn": index})
    await storage.rewrite(KEY, turn(199), {"turn": 199})
    files = [path for path in storage.path(KEY).rglob("*") if path.is_file()]
    assert sorted(path.name for path in files) == ["messages.jsonl", "session.json", "state.json"]


async def test_the_cache_is_bounded_and_stays_correct(tmp_path: Path) -> None:
    storage = LocalFileStorage(tmp_path, cache_size=1)
    keys = [SessionKey(definition="chat", context_id=f"ctx-{n}") for n in range(3)]
    for index in range(3):
        for key in keys:
            await storage.append(key, turn(index), {"turn": index})
    for key in keys:
        assert await history(tmp_path, key) == (texts(3), {"turn": 2})


async def test_two_instances_taking_turns_see_each_others_appends(tmp_path: Path) -> None:
    first, second = LocalFileStorage(tmp_path), LocalFileStorage(tmp_path)
    await first.append(KEY, turn(0), {"by": "first"})
    await second.append(KEY, turn(1), None)
    await first.append(KEY, turn(2), None)
    await second.rewrite(KEY, turn(2), {"by": "second"})
    await first.append(KEY, turn(3), None)
    assert await history(tmp_path) == (texts(4)[4:], {"by": "second"})


async def test_append_does_not_read_the_history(tmp_path: Path) -> None:
    """A known session's append touches only the end of the file (guarantee 8)."""
    storage = LocalFileStorage(tmp_path)
    await storage.append(KEY, turn(0), None)
    path = storage.path(KEY) / "messages.jsonl"
    data, before = path.read_bytes(), os.stat(path)
    path.write_bytes(b"#" * (len(data) - 1) + b"\n")  # same size, inode and mtime:
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # the cache still trusts it
    await storage.append(KEY, turn(1), None)  # succeeds: it never looked back
    with pytest.raises(CorruptSessionError):
        await LocalFileStorage(tmp_path).load(KEY)


# -- crash recovery ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "tail",
    [
        b'{"m":{"role":"user","parts":[{"kind":"te',  # torn in the middle of a line
        b'{"m":{"role":"user","parts":[]}}',  # a whole line but no newline yet
        b'{"m":{"role":"user","parts":[]}}\n{"m":{"role":"assistant","parts":[]},"t":9',
        b'{"m":{"role":"user","parts":[]}}\n',  # lines of a batch without its commit
        b'{"m":{"role":"user","parts":[]}}\n{"m":{"role":"user","parts":[]}}\n',
        b"\x00" * 300,  # blocks allocated but never written (power loss)
        b'\x00\x00\x00{"m":{"role":"user","parts":[]},"t":3}\n',  # zeroed start of a line
        b'{"m":{"role":"user","parts":[]}}\n\xff\xfe broken utf-8',
    ],
    ids=[
        "torn",
        "no-newline",
        "half-batch",
        "no-commit",
        "no-commit-2",
        "zeros",
        "zeroed",
        "bad-utf8",
    ],
)
async def test_an_unfinished_turn_is_dropped_and_the_next_append_works(
    tmp_path: Path, tail: bytes
) -> None:
    folder = await saved(tmp_path, turns=2, state={"turn": 1})
    path = folder / "messages.jsonl"
    committed = path.read_bytes()
    add_bytes(path, tail)
    assert await history(tmp_path) == (texts(2), {"turn": 1})
    assert path.read_bytes() == committed + tail  # loading alone changes nothing

    storage = LocalFileStorage(tmp_path)
    await storage.append(KEY, turn(2), {"turn": 2})
    assert await history(tmp_path) == (texts(3), {"turn": 2})
    assert path.read_bytes().startswith(committed)
    assert all("m" in line for line in lines_of(path))  # the tail is gone, every line parses


async def test_a_turn_whose_state_never_landed_is_rolled_back(tmp_path: Path) -> None:
    storage = LocalFileStorage(tmp_path)
    await storage.append(KEY, turn(0), {"turn": 0})
    state_file = storage.path(KEY) / "state.json"
    before = state_file.read_bytes()
    await storage.append(KEY, turn(1), {"turn": 1})
    state_file.write_bytes(before)  # killed after the lines, before state.json's rename
    assert await history(tmp_path) == (texts(1), {"turn": 0})
    await LocalFileStorage(tmp_path).append(KEY, turn(5), {"turn": 5})
    assert await history(tmp_path) == (texts(1) + texts(6)[10:], {"turn": 5})


async def test_a_first_turn_whose_state_never_landed_leaves_an_empty_session(
    tmp_path: Path,
) -> None:
    storage = LocalFileStorage(tmp_path)
    await storage.append(KEY, turn(0), {"turn": 0})
    (storage.path(KEY) / "state.json").unlink()
    assert await history(tmp_path) == ([], {})


async def test_an_emptied_state_wins_over_a_stale_state_file(tmp_path: Path) -> None:
    storage = LocalFileStorage(tmp_path)
    await storage.append(KEY, turn(0), {"a": 1})
    stale = (storage.path(KEY) / "state.json").read_bytes()
    await storage.append(KEY, turn(1), {})
    (storage.path(KEY) / "state.json").write_bytes(stale)  # killed before the unlink
    assert await history(tmp_path) == (texts(2), {})
    await LocalFileStorage(tmp_path).append(KEY, turn(2), None)
    assert await history(tmp_path) == (texts(3), {})


async def test_a_rewrite_is_whole_even_if_state_json_lags(tmp_path: Path) -> None:
    storage = LocalFileStorage(tmp_path)
    await storage.append(KEY, turn(0), {"old": True})
    stale = (storage.path(KEY) / "state.json").read_bytes()
    await storage.rewrite(KEY, turn(7), {"new": True})
    (storage.path(KEY) / "state.json").write_bytes(stale)  # killed right after the rename
    assert await history(tmp_path) == (texts(8)[14:], {"new": True})
    await LocalFileStorage(tmp_path).append(KEY, turn(8), None)
    assert await history(tmp_path) == (texts(9)[14:], {"new": True})


async def test_temp_files_left_by_a_killed_write_are_swept(tmp_path: Path) -> None:
    folder = await saved(tmp_path)
    leftover = folder / ".state.json.0123abcd.tmp"
    leftover.write_bytes(b'{"half')
    assert await history(tmp_path) == (texts(2), {})
    await LocalFileStorage(tmp_path).append(KEY, turn(2), None)
    assert not leftover.exists()


async def test_a_tombstone_is_not_a_session(tmp_path: Path) -> None:
    folder = await saved(tmp_path)
    folder.rename(folder.with_name(".chat:ctx-1.deleted-0123"))  # killed inside delete
    assert await LocalFileStorage(tmp_path).load(KEY) is None
    assert await LocalFileStorage(tmp_path).delete(KEY) is False


# -- corruption -----------------------------------------------------------------------


async def check_corrupt(tmp_path: Path, path: Path, data: bytes) -> None:
    """Loading and appending both refuse, name `path`, and leave every byte as it was."""
    path.write_bytes(data)
    before = {file: file.read_bytes() for file in path.parent.rglob("*") if file.is_file()}
    for storage in (LocalFileStorage(tmp_path), LocalFileStorage(tmp_path)):
        with pytest.raises(CorruptSessionError) as caught:
            await storage.load(KEY)
        assert caught.value.path == str(path)
        assert caught.value.code == "corrupt_session"
        with pytest.raises(CorruptSessionError):
            await storage.append(KEY, turn(9), {"x": 1})
        with pytest.raises(CorruptSessionError):
            await storage.rewrite(KEY, [], {})
    after = {file: file.read_bytes() for file in path.parent.rglob("*") if file.is_file()}
    assert after == before


@pytest.mark.parametrize(
    "line",
    [
        b"not json",
        b'{"m":{"role":"robot","parts":[]}}',
        b'{"m":{"role":"user","parts":[{"kind":"video"}]}}',
        b'{"x":1}',
        b"[1,2]",
        b"",
        b'{"m":{"role":"user","parts":[]},"t":"two"}',
    ],
)
async def test_a_corrupt_middle_line_is_an_error(tmp_path: Path, line: bytes) -> None:
    folder = await saved(tmp_path, turns=3)
    path = folder / "messages.jsonl"
    lines = path.read_bytes().splitlines()
    lines[2] = line
    await check_corrupt(tmp_path, path, b"\n".join(lines) + b"\n")


async def test_a_corrupt_last_committed_turn_after_a_bad_line_is_an_error(tmp_path: Path) -> None:
    folder = await saved(tmp_path, turns=2)
    path = folder / "messages.jsonl"
    lines = path.read_bytes().splitlines()
    lines[2] = b"garbage"  # the first message of the last turn, before its commit line
    await check_corrupt(tmp_path, path, b"\n".join(lines) + b"\n")


@pytest.mark.parametrize("data", [b"{broken", b"[]", b'{"schema_version":1}'])
async def test_a_corrupt_session_json_is_an_error(tmp_path: Path, data: bytes) -> None:
    folder = await saved(tmp_path)
    await check_corrupt(tmp_path, folder / "session.json", data)


@pytest.mark.parametrize("data", [b"{broken", b'{"state":{}}', b'{"turn":1,"state":[1]}'])
async def test_a_corrupt_state_json_is_an_error(tmp_path: Path, data: bytes) -> None:
    folder = await saved(tmp_path, state={"a": 1})
    await check_corrupt(tmp_path, folder / "state.json", data)


async def test_history_without_session_json_is_an_error(tmp_path: Path) -> None:
    folder = await saved(tmp_path)
    (folder / "session.json").unlink()
    with pytest.raises(CorruptSessionError) as caught:
        await LocalFileStorage(tmp_path).load(KEY)
    assert caught.value.path == str(folder / "session.json")
    with pytest.raises(CorruptSessionError):
        await LocalFileStorage(tmp_path).append(KEY, turn(3), None)
    assert sorted(os.listdir(folder)) == ["messages.jsonl"]


@pytest.mark.parametrize("data", [b"{broken", b'{"run_id":"run-1"}', b'{"status":"odd"}'])
async def test_a_corrupt_run_record_is_an_error(tmp_path: Path, data: bytes) -> None:
    storage = LocalFileStorage(tmp_path)
    await storage.put_run(
        KEY, RunRecord(run_id="run-1", status="completed", input=None, started_at=1.0)
    )
    path = storage.path(KEY) / "runs.jsonl"
    path.write_bytes(data + b"\n")
    for read in (storage.list_runs, storage.latest_run):
        with pytest.raises(CorruptSessionError) as caught:
            await read(KEY)
        assert caught.value.path == str(path)
    path.write_bytes(data + b',"run_id":"run-1",\n')  # a line that get_run takes for run-1's
    with pytest.raises(CorruptSessionError):
        await storage.get_run(KEY, "run-1")
    assert path.read_bytes() == data + b',"run_id":"run-1",\n'


@pytest.mark.parametrize("data", [b"{broken", b"[]", b'{"id":"c","payload":{}}'])
async def test_a_corrupt_checkpoint_is_an_error(tmp_path: Path, data: bytes) -> None:
    checkpointer = FileCheckpointer(tmp_path)
    await checkpointer.put(KEY, Checkpoint(id="ckpt-1", run_id="r", created_at=1.0, payload={}))
    path = checkpointer.path(KEY) / "ckpt-1.json"
    assert path.is_file()
    path.write_bytes(data)
    with pytest.raises(CorruptSessionError) as caught:
        await checkpointer.latest(KEY)
    assert caught.value.path == str(path)
    assert path.read_bytes() == data


# -- ids never become paths -------------------------------------------------------------

NASTY = [
    "../x",
    "../../etc",
    "/etc/passwd",
    "%2e%2e%2f",
    "a/b",
    "nul\x00byte",
    "..",
    ".",
    "chat:ctx-1",
    "\\..\\windows",
    "~root",
    "é/../ü",
]


def inside(root: Path, path: Path) -> bool:
    return path.resolve().is_relative_to(root.resolve())


@pytest.mark.parametrize("nasty", NASTY)
def test_session_folders_stay_inside_the_root(tmp_path: Path, nasty: str) -> None:
    root = tmp_path / "sessions"
    folder = session_folder(
        root, SessionKey(definition="chat", context_id="ctx-1", principal=nasty)
    )
    assert folder.parent.parent == root
    assert inside(root, folder)
    assert folder.parent.name not in (".", "..") and ":" not in folder.parent.name
    assert "/" not in folder.parent.name and "\x00" not in folder.parent.name


@pytest.mark.parametrize("nasty", NASTY)
async def test_nasty_principals_and_run_ids_write_only_inside(tmp_path: Path, nasty: str) -> None:
    root = tmp_path / "sessions"
    storage = LocalFileStorage(root)
    key = SessionKey(definition="chat", context_id="ctx-1", principal=nasty)
    await storage.append(key, turn(0), {"who": nasty})
    await storage.put_run(
        key, RunRecord(run_id=nasty, status="completed", input=None, started_at=1.0)
    )
    checkpointer = FileCheckpointer(root / "checkpoints")
    await checkpointer.put(key, Checkpoint(id=nasty, run_id=nasty, created_at=1.0, payload={}))
    assert os.listdir(tmp_path) == ["sessions"]
    for path in root.rglob("*"):
        assert inside(root, path)
    assert await history(root, key) == (texts(1), {"who": nasty})
    assert await storage.get_run(key, nasty) is not None
    assert await checkpointer.latest(key) is not None
    assert await storage.delete(key) is True
    await checkpointer.delete_thread(key)
    assert [path for path in root.rglob("*") if path.is_file()] == []


# -- a real process, killed at random instants -------------------------------------------

WRITER = r"""
import sys

import anyio

from agentkeel.messages import Message
from agentkeel.storage import LocalFileStorage, SessionKey


async def main() -> None:
    storage = LocalFileStorage(sys.argv[1])
    keys = [SessionKey(definition="crash", context_id=f"ctx-{n}") for n in range(2)]
    histories = {}
    for key in keys:
        snapshot = await storage.load(key)
        histories[key] = [] if snapshot is None else list(snapshot.messages)
    print("ready", flush=True)
    while True:
        for key in keys:
            done = await storage.load(key) if len(histories[key]) % 7 == 3 else None
            if done is not None:
                histories[key] = list(done.messages)
            n = int(histories[key][-1].text.split(":")[0]) + 1 if histories[key] else 0
            size = 1 + n % 4
            pad = "x" * (40_000 * (n % 3))
            batch = [Message.user(f"{n}:{j}:{size}:" + pad) for j in range(size)]
            state = {"turn": n, "pad": pad[:5000]}
            if n % 11 == 10:
                kept = histories[key][-6:]
                while kept and not kept[0].text.split(":")[1] == "0":
                    kept.pop(0)
                histories[key] = kept + batch
                await storage.rewrite(key, histories[key], state)
            else:
                await storage.append(key, batch, state)
                histories[key] += batch


anyio.run(main)
"""


def check_whole_turns(texts: list[str], state: JSONObject) -> int:
    """Every turn whole and in order, and the state from the same turn as the last one."""
    if not texts:
        assert state == {}
        return -1
    groups: list[list[tuple[int, int, int]]] = []
    for text in texts:
        n, j, size = (int(field) for field in text.split(":")[:3])
        if j == 0:
            groups.append([])
        groups[-1].append((n, j, size))
    for group in groups:
        n, _, size = group[0]
        assert group == [(n, j, size) for j in range(size)], group
    numbers = [group[0][0] for group in groups]
    assert numbers == list(range(numbers[0], numbers[0] + len(numbers)))
    assert state["turn"] == numbers[-1]
    return numbers[-1]


async def test_kill_a_writing_process_at_random_instants(tmp_path: Path) -> None:
    keys = [SessionKey(definition="crash", context_id=f"ctx-{n}") for n in range(2)]
    rng = random.Random(1234)
    progress: list[int] = []
    for _ in range(24):
        child = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(tmp_path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert child.stdout is not None
        assert child.stdout.readline() == b"ready\n", child.stderr.read() if child.stderr else ""
        time.sleep(rng.uniform(0.0, 0.08))
        child.send_signal(signal.SIGKILL)
        child.wait()
        assert child.returncode == -signal.SIGKILL, child.stderr.read() if child.stderr else ""
        if child.stderr is not None:
            child.stderr.close()
        child.stdout.close()
        for key in keys:
            snapshot = await LocalFileStorage(tmp_path).load(key)
            if snapshot is None:
                continue
            progress.append(check_whole_turns([m.text for m in snapshot.messages], snapshot.state))
            names = os.listdir(LocalFileStorage(tmp_path).path(key))
            visible = {name for name in names if not name.startswith(".")}
            assert visible <= {"session.json", "messages.jsonl", "state.json"}
    assert max(progress) > 20  # the writer got well past its first turns


@pytest.mark.anyio
async def test_a_session_keeps_one_frames_file_also_across_restarts(tmp_path: Path) -> None:
    key = SessionKey(definition="demo", context_id="ctx-frames")
    first = LocalFileStorage(tmp_path)
    for index in range(5):
        await first.put_frames(key, f"run-{index}", b"id: 1\ndata: {}\n\n" * index)
    assert sorted(os.listdir(first.path(key))) == ["frames.sse"]
    restarted = LocalFileStorage(tmp_path)
    assert await restarted.get_frames(key, "run-4") == b"id: 1\ndata: {}\n\n" * 4
    assert await restarted.get_frames(key, "run-3") is None
    await restarted.put_frames(key, "run-5", b"id: 1\ndata: {}\n\n")
    assert sorted(os.listdir(first.path(key))) == ["frames.sse"]


@pytest.mark.anyio
async def test_torn_frames_read_as_none_never_as_frames(tmp_path: Path) -> None:
    """A crash in the middle of the in-place overwrite leaves a mix the checksum refuses."""
    storage = LocalFileStorage(tmp_path)
    key = SessionKey(definition="demo", context_id="ctx-frames")
    await storage.put_frames(key, "run-1", b"x" * 100)
    path = storage.path(key) / "frames.sse"
    whole = path.read_bytes()
    path.write_bytes(whole[:-10] + b"y" * 10)  # the new bytes only partly landed
    assert await storage.get_frames(key, "run-1") is None
    path.write_bytes(whole[:40])  # cut short
    assert await storage.get_frames(key, "run-1") is None
    await storage.put_frames(key, "run-2", b"z")
    assert await storage.get_frames(key, "run-2") == b"z"


async def test_a_refused_first_write_leaves_no_session_behind(tmp_path: Path) -> None:
    """Found by the storage state machine: a stale write used to create the folder first."""
    from agentkeel.errors import ConcurrentWriteError

    storage = LocalFileStorage(tmp_path)
    key = SessionKey(definition="agent", context_id="ctx-refused")
    with pytest.raises(ConcurrentWriteError):
        await storage.append(key, turn(1), None, expected_version=3)
    assert not await storage.exists(key)
    assert not await storage.delete(key)  # DELETE of this context is a 404, not a 204
    assert list(tmp_path.rglob("*")) == []
