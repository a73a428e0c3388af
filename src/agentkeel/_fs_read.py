"""The reading half of `agentkeel._fs`: whole files, tails, stamps and folder listings.

Nothing here writes; `_fs` re-exports all of it, so callers keep one name for the file
layer while the module that writes stays small enough to review in one sitting.
"""

from __future__ import annotations

import json
import os
import zlib
from pathlib import Path

from agentkeel.errors import CorruptSessionError
from agentkeel.messages import JSONObject

__all__ = [
    "corrupt",
    "file_size",
    "has_files",
    "list_json_files",
    "read_bytes",
    "read_checked",
    "read_json_object",
    "read_tail",
    "stamp",
]


def read_tail(path: Path, size: int) -> bytes | None:
    """At most the last `size` bytes of `path`, or None if it does not exist."""
    try:
        with open(path, "rb") as handle:
            handle.seek(max(0, handle.seek(0, os.SEEK_END) - size))
            return handle.read()
    except FileNotFoundError:
        return None


def read_checked(path: Path, label: str) -> bytes | None:
    """What `overwrite_checked` stored under `label`; None if absent, torn or another's."""
    raw = read_bytes(path)
    if raw is None:
        return None
    header, newline, data = raw.partition(b"\n")
    parts = header.split(b" ")
    if not newline or len(parts) != 3 or parts[0] != label.encode("utf-8"):
        return None
    try:
        length, checksum = int(parts[1]), int(parts[2], 16)
    except ValueError:
        return None
    data = data[:length]
    if len(data) != length or zlib.crc32(data) != checksum:
        return None
    return data


def stamp(path: Path) -> tuple[int, int, int] | None:
    """(size, inode, mtime in ns) of `path`, or None: changes whenever anyone writes it."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    return info.st_size, info.st_ino, info.st_mtime_ns


def read_bytes(path: Path) -> bytes | None:
    """The whole content of `path`, or None if it does not exist."""
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def has_files(folder: Path) -> bool:
    """Whether `folder` holds any visible entry (False if there is no folder)."""
    try:
        with os.scandir(folder) as entries:
            return any(entry.name[0] != "." for entry in entries)
    except (FileNotFoundError, NotADirectoryError):
        return False


def list_json_files(folder: Path) -> list[Path]:
    """The ``*.json`` documents in `folder` (temp files are hidden, so never listed)."""
    try:
        names = [entry.name for entry in os.scandir(folder) if entry.is_file()]
    except FileNotFoundError:
        return []
    return [folder / name for name in names if name.endswith(".json") and name[0] != "."]


def read_json_object(path: Path) -> JSONObject | None:
    """The JSON object stored in `path`, or None if there is no file.

    Raises CorruptSessionError naming `path` when it holds anything else; the file is
    left as it is for someone to look at.
    """
    raw = read_bytes(path)
    if raw is None:
        return None
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise corrupt(path, f"not JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise corrupt(path, "not a JSON object")
    return data


def corrupt(path: Path, what: str) -> CorruptSessionError:
    """The error for a stored file that cannot be decoded (it is never overwritten)."""
    return CorruptSessionError(f"{path}: {what}; the file was left untouched", path=str(path))


def file_size(path: Path) -> int:
    """The size of `path` in bytes, 0 if it does not exist."""
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return 0
