"""The record files of LocalFileStorage: `runs.jsonl`, 0.1.0's `runs/`, and `tasks.jsonl`.

Each is a file of independent JSON lines appended with `_fs.append_records`, so a run or a
task costs one write and never a new file. A line a crash left without its newline is a
torn tail: skipped here, and cut off by the next append. A whole line that cannot be
decoded is a CorruptSessionError naming the file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from agentkeel import _fs
from agentkeel.messages import JSONObject
from agentkeel.storage import _history
from agentkeel.storage.base import RunRecord

__all__ = [
    "LEGACY_RUNS_DIR",
    "RUNS_FILE",
    "TASKS_FILE",
    "TaskIndex",
    "find_run",
    "last_run",
    "list_runs",
    "read_task_index",
    "run_line",
    "task_lines",
]

RUNS_FILE = "runs.jsonl"
LEGACY_RUNS_DIR = "runs"
"""0.1.0 kept one ``runs/<runId>.json`` per run; still read, never written."""
TASKS_FILE = "tasks.jsonl"
_TAIL_READ = 65536


def run_line(record: RunRecord | None) -> bytes | None:
    """A run record as its runs.jsonl line (encoded on the event loop, not in a thread)."""
    return None if record is None else _history.encode_json(record.to_json(), "run record")


def _lines(raw: bytes) -> list[bytes]:
    """The whole lines of `raw` (a torn last line is left out)."""
    return raw[: raw.rfind(b"\n") + 1].splitlines()


def _decode_object(line: bytes, path: Path) -> JSONObject:
    try:
        value = json.loads(line)
    except ValueError as exc:
        raise _fs.corrupt(path, f"a line is not JSON ({exc})") from exc
    if not isinstance(value, dict):
        raise _fs.corrupt(path, "a line is not a JSON object")
    return value


def _decode_run(document: JSONObject, path: Path) -> RunRecord:
    try:
        return RunRecord.from_json(document)
    except (KeyError, TypeError, ValueError) as exc:
        raise _fs.corrupt(path, f"not a run record ({exc!r})") from exc


def _read_legacy_run(path: Path) -> RunRecord | None:
    document = _fs.read_json_object(path)
    return None if document is None else _decode_run(document, path)


def _search(raw: bytes, run_id: str, path: Path, *, whole: bool) -> RunRecord | None:
    """The last record of `run_id` among the whole lines of `raw`.

    Unless `whole`, `raw` is the end of the file and its first line may be cut: a match
    there does not count.
    """
    needle = b'"run_id":' + _fs.dumps_json(run_id) + b","
    end = raw.rfind(b"\n") + 1
    at = raw.rfind(needle, 0, end)
    while at >= 0:
        start = raw.rfind(b"\n", 0, at) + 1
        if start == 0 and not whole:
            return None
        record = _decode_run(_decode_object(raw[start : raw.find(b"\n", at)], path), path)
        if record.run_id == run_id:  # the needle could sit inside another field
            return record
        at = raw.rfind(needle, 0, start)
    return None


def find_run(folder: Path, encoded_id: str, run_id: str) -> RunRecord | None:
    """The last record of `run_id` in runs.jsonl, else 0.1.0's ``runs/<runId>.json``.

    The end of the file is read first: the run asked for is nearly always a recent one,
    and a long conversation's file is not read whole for it.
    """
    path = folder / RUNS_FILE
    tail = _fs.read_tail(path, _TAIL_READ)
    if tail is not None:
        whole = len(tail) < _TAIL_READ
        found = _search(tail, run_id, path, whole=whole)
        if found is None and not whole:
            found = _search(_fs.read_bytes(path) or b"", run_id, path, whole=True)
        if found is not None:
            return found
    return _read_legacy_run(folder / LEGACY_RUNS_DIR / f"{encoded_id}.json")


def list_runs(folder: Path) -> list[RunRecord]:
    """Every run, the last record of each id, oldest first (start time, then id)."""
    found: dict[str, RunRecord] = {}
    for legacy in _fs.list_json_files(folder / LEGACY_RUNS_DIR):
        if (record := _read_legacy_run(legacy)) is not None:
            found[record.run_id] = record
    path = folder / RUNS_FILE
    for line in _lines(_fs.read_bytes(path) or b""):
        record = _decode_run(_decode_object(line, path), path)
        found[record.run_id] = record
    return sorted(found.values(), key=lambda record: (record.started_at, record.run_id))


def last_run(folder: Path) -> RunRecord | None:
    """The record appended last (reads the end of runs.jsonl only); 0.1.0's newest else."""
    path = folder / RUNS_FILE
    size = _TAIL_READ
    while (raw := _fs.read_tail(path, size)) is not None:
        lines = _lines(raw)
        whole = len(raw) < size  # the read reached the start of the file
        if len(lines) > 1 or (lines and whole):
            return _decode_run(_decode_object(lines[-1], path), path)
        if whole:
            break
        size *= 4
    legacy = list_runs(folder)
    return legacy[-1] if legacy else None


@dataclass(slots=True)
class TaskIndex:
    """A task index as read from tasks.jsonl: the live tasks and how many lines it has."""

    tasks: dict[str, tuple[str, JSONObject]] = field(default_factory=dict)
    lines: int = 0

    def apply(self, entry: JSONObject) -> None:
        """Replay one line: a task's new document, or a context's tasks dropped."""
        self.lines += 1
        task, context, document = entry.get("task"), entry.get("context"), entry.get("doc")
        if isinstance(task, str) and isinstance(context, str) and isinstance(document, dict):
            self.tasks.pop(task, None)
            self.tasks[task] = (context, document)
        dropped = entry.get("drop")
        if isinstance(dropped, str):
            for task_id in [t for t, (ctx, _) in self.tasks.items() if ctx == dropped]:
                del self.tasks[task_id]

    def needs_compaction(self) -> bool:
        """Whether superseded lines outweigh live ones (then the file is rewritten)."""
        return self.lines > 2 * len(self.tasks) + 64

    def compacted(self) -> bytes:
        """The file holding only the live tasks."""
        lines = task_lines(self.tasks)
        self.lines = len(lines)
        return b"".join(line + b"\n" for line in lines)


def task_lines(tasks: dict[str, tuple[str, JSONObject]]) -> list[bytes]:
    """One tasks.jsonl line per task."""
    return [
        _fs.dumps_json({"task": task_id, "context": context, "doc": document})
        for task_id, (context, document) in tasks.items()
    ]


def read_task_index(path: Path) -> TaskIndex:
    """Replay tasks.jsonl (a line that cannot be decoded is a corrupt file)."""
    index = TaskIndex()
    for line in _lines(_fs.read_bytes(path) or b""):
        index.apply(_decode_object(line, path))
    return index
