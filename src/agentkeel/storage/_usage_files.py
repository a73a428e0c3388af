"""Token totals as files, for LocalFileStorage (UsageStorage).

Each model call appends one line ``{"i": input, "o": output, "c": cached, "r": reasoning}``
to two files (`_file_usage` says when they are fsynced):

    <dir>/[<principal>/]<def-name>:<contextId>/usage.jsonl     the context's total
    <dir>/[<principal>/].usage/<YYYY-MM-DD>.jsonl             the principal's day

A total is the sum of a file's lines. A crash mid-write leaves at most a torn last line,
which is ignored. ``.usage`` can never be a principal's or a session's folder: their
names never start with a dot.
"""

from __future__ import annotations

import json
from pathlib import Path

from agentkeel import _fs
from agentkeel.ids import encode_path_segment
from agentkeel.result import Usage

__all__ = ["USAGE_FILE", "append_usage", "principal_usage_path", "read_usage", "usage_line"]

USAGE_FILE = "usage.jsonl"
_USAGE_DIR = ".usage"


def principal_usage_path(folder: Path, day: str) -> Path:
    """The file of a principal's totals of `day`, in the principal's `folder`."""
    return folder / _USAGE_DIR / f"{encode_path_segment(day)}.jsonl"


def usage_line(usage: Usage) -> bytes:
    """One model call's line (without its newline)."""
    return json.dumps(
        {
            "i": usage.input_tokens,
            "o": usage.output_tokens,
            "c": usage.cached_tokens,
            "r": usage.reasoning_tokens,
        },
        separators=(",", ":"),
    ).encode()


def append_usage(paths: tuple[Path, ...], usage: Usage) -> None:
    """Append one model call's usage to each file (blocking; run in a worker thread).

    Each is one fsynced `_fs.append_records`, which first cuts off a torn last line (a
    crash during an append), so that it never becomes a line in the middle of the file.
    """
    line = usage_line(usage)
    for path in paths:
        _fs.ensure_dir(path.parent)
        _fs.append_records(path, [line])


def read_usage(path: Path) -> Usage:
    """The sum of a usage file's lines (zero when absent); a torn last line is ignored."""
    raw = _fs.read_bytes(path)
    if raw is None:
        return Usage()
    lines = raw.split(b"\n")
    total = Usage()
    for number, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except ValueError as exc:
            if number == len(lines) - 1:
                break  # torn by a crash during the append: that call was not counted
            raise _fs.corrupt(path, f"not JSON lines ({exc})") from exc
        if not isinstance(data, dict):
            raise _fs.corrupt(path, "a line is not a JSON object")
        total = total + Usage.from_json(
            {
                "input_tokens": data.get("i"),
                "output_tokens": data.get("o"),
                "cached_tokens": data.get("c"),
                "reasoning_tokens": data.get("r"),
            }
        )
    return total
