"""The file layout of SPEC section 8 (amended): a fixed number of files per session, and
sessions written by 0.1.0 (one ``runs/<runId>.json`` per run) still load."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agentkeel import _fs
from agentkeel.checkpoint import Checkpoint, FileCheckpointer
from agentkeel.messages import Message
from agentkeel.storage import LocalFileStorage, RunRecord, SessionKey

pytestmark = pytest.mark.anyio

KEY = SessionKey(definition="chat", context_id="ctx-1")
INDEX = SessionKey(definition="a2a-task-index", context_id="chat")


async def run_turns(storage: LocalFileStorage, start: int, count: int) -> None:
    """What the server writes per turn: the run record, the history, the frames."""
    for index in range(start, start + count):
        run_id = f"run-{index}"
        record = RunRecord(run_id=run_id, status="completed", input="q", started_at=index)
        await storage.put_run(KEY, record)
        messages = [Message.user(f"q{index}"), Message.assistant(f"a{index}")]
        await storage.append(KEY, messages, {"n": index} if index % 7 == 0 else None)
        await storage.put_frames(KEY, run_id, b'id: 1\ndata: {"done":true}\n\n')
        await storage.put_task(INDEX, f"task-{index}", "ctx-1", {"n": index})


def files_under(folder: Path) -> list[str]:
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*"))


async def test_a_session_holds_the_same_files_after_10_turns_and_after_10000(
    tmp_path: Path,
) -> None:
    storage = LocalFileStorage(tmp_path)
    await run_turns(storage, 0, 10)
    after_ten = files_under(storage.path(KEY))
    index_after_ten = files_under(storage.path(INDEX))
    await run_turns(storage, 10, 9_990)
    assert files_under(storage.path(KEY)) == after_ten
    assert after_ten == ["frames.sse", "messages.jsonl", "runs.jsonl", "session.json", "state.json"]
    assert files_under(storage.path(INDEX)) == index_after_ten == ["tasks.jsonl"]
    restarted = LocalFileStorage(tmp_path)
    snapshot = await restarted.load(KEY)
    assert snapshot is not None and len(snapshot.messages) == 20_000
    assert snapshot.version == 10_000
    latest = await restarted.latest_run(KEY)
    assert latest is not None and latest.run_id == "run-9999"
    assert await restarted.get_task(INDEX, "task-5") == {"n": 5}


async def test_a_session_written_by_0_1_0_still_loads(tmp_path: Path) -> None:
    """0.1.0 kept ``runs/<runId>.json`` (and ``runs/<runId>.events.jsonl``)."""
    storage = LocalFileStorage(tmp_path)
    await storage.append(KEY, [Message.user("old"), Message.assistant("turn")], {"k": 1})
    legacy = storage.path(KEY) / "runs"
    _fs.ensure_dir(legacy)
    for index in (1, 2):
        old = RunRecord(run_id=f"run-old{index}", status="completed", input="x", started_at=index)
        _fs.atomic_write_json(legacy / f"run-old{index}.json", old.to_json())
    _fs.atomic_write_bytes(legacy / "run-old2.events.jsonl", b'{"id":1,"data":{}}\n')
    restarted = LocalFileStorage(tmp_path)
    assert await restarted.exists(KEY)
    snapshot = await restarted.load(KEY)
    assert snapshot is not None and snapshot.state == {"k": 1}
    latest = await restarted.latest_run(KEY)
    assert latest is not None and latest.run_id == "run-old2"
    found = await restarted.get_run(KEY, "run-old1")
    assert found is not None and found.status == "completed"
    new = RunRecord(run_id="run-new", status="completed", input="y", started_at=3.0)
    await restarted.put_run(KEY, new)
    resumed = RunRecord(run_id="run-old1", status="failed", input="x", started_at=1.0)
    await restarted.put_run(KEY, resumed)  # a newer record of an old run wins
    listed = await LocalFileStorage(tmp_path).list_runs(KEY)
    assert [(r.run_id, r.status) for r in listed] == [
        ("run-old1", "failed"),
        ("run-old2", "completed"),
        ("run-new", "completed"),
    ]
    assert not (storage.path(KEY) / "runs" / "run-new.json").exists()  # nothing new there
    assert await restarted.delete(KEY)
    assert not storage.path(KEY).exists()


async def test_a_torn_run_record_is_dropped_and_cut_before_the_next(tmp_path: Path) -> None:
    storage = LocalFileStorage(tmp_path)
    first = RunRecord(run_id="run-1", status="completed", input="q", started_at=1.0)
    await storage.put_run(KEY, first)
    path = storage.path(KEY) / "runs.jsonl"
    with path.open("ab") as handle:
        handle.write(b'{"schema_version":1,"run_id":"run-2","sta')  # a crash mid-append
    assert await LocalFileStorage(tmp_path).list_runs(KEY) == [first]
    assert await LocalFileStorage(tmp_path).latest_run(KEY) == first
    second = RunRecord(run_id="run-3", status="completed", input="q", started_at=3.0)
    await LocalFileStorage(tmp_path).put_run(KEY, second)
    assert [json.loads(line)["run_id"] for line in path.read_bytes().splitlines()] == [
        "run-1",
        "run-3",
    ]


async def test_the_last_checkpoint_takes_its_folder_with_it(tmp_path: Path) -> None:
    checkpointer = FileCheckpointer(tmp_path)
    for checkpoint_id in ("ckpt-1", "ckpt-2"):
        checkpoint = Checkpoint(id=checkpoint_id, run_id="run-1", created_at=1.0, payload={})
        await checkpointer.put(KEY, checkpoint)
    await checkpointer.delete(KEY, "ckpt-1")
    assert os.listdir(checkpointer.path(KEY)) == ["ckpt-2.json"]
    await checkpointer.delete(KEY, "ckpt-2")
    assert not checkpointer.path(KEY).exists()
    await checkpointer.delete(KEY, "ckpt-2")  # an unknown id on a gone folder is fine


async def test_a_string_key_is_a_type_error_that_says_what_to_pass(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"pass SessionKey\.parse\('def:ctx'\)"):
        await LocalFileStorage(tmp_path).load("def:ctx")  # type: ignore[arg-type]


async def test_any_run_is_found_in_a_long_runs_file(tmp_path: Path) -> None:
    """get_run reads the end of runs.jsonl first, and the whole file only when it must."""
    storage = LocalFileStorage(tmp_path)
    records = [
        RunRecord(run_id=f"run-{n}", status="completed", input="x" * 1000, started_at=n)
        for n in range(200)
    ]
    for record in records:
        await storage.put_run(KEY, record)
    assert (storage.path(KEY) / "runs.jsonl").stat().st_size > 3 * 65536
    restarted = LocalFileStorage(tmp_path)
    for index in (0, 1, 120, 150, 199):
        assert await restarted.get_run(KEY, f"run-{index}") == records[index]
    assert await restarted.get_run(KEY, "run-200") is None
