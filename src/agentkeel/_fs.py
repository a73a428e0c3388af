"""The only code in agentkeel that writes files, so crash safety is reviewed in one place.

Every write here leaves a file either as it was or as it should be when the process is
killed at any instant:

- whole-file writes go to a temp file in the same folder, are fsynced, then
  `os.replace`d over the target, and the folder is fsynced so the rename itself is
  durable;
- appends are one `write` of the whole batch followed by an fsync, so a batch is either
  on disk or (after a crash) a torn tail that the reader detects and drops;
- removing a folder first renames it to a hidden tombstone, so a crash halfway through
  the deletion never leaves half a session that still looks alive.

The functions are synchronous on purpose: callers run them off the event loop with
`anyio.to_thread.run_sync`. Files are created ``0o600`` and folders ``0o700`` because
they hold users' conversations.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
from collections.abc import Sequence
from pathlib import Path

from agentkeel.errors import CorruptSessionError
from agentkeel.messages import JSONObject, JSONValue

__all__ = [
    "append_lines",
    "atomic_write_bytes",
    "atomic_write_json",
    "corrupt",
    "dumps_json",
    "ensure_dir",
    "file_size",
    "fsync_dir",
    "list_json_files",
    "read_bytes",
    "read_json_object",
    "remove_file",
    "remove_tree",
    "sweep_temp_files",
    "truncate",
]

FILE_MODE = 0o600
DIR_MODE = 0o700
TOMBSTONE_MARKER = ".deleted-"
"""Part of the name a folder gets while `remove_tree` deletes it (always hidden)."""


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def dumps_json(obj: JSONValue) -> bytes:
    """Compact UTF-8 JSON, the one encoding every stored document uses."""
    return _ENCODER.encode(obj).encode("utf-8")


def fsync_dir(path: Path) -> None:
    """Make the entries of folder `path` (creations, renames, removals) durable."""
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
    try:
        fd = os.open(path, flags)
    except (PermissionError, IsADirectoryError):  # pragma: no cover - platforms without it
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def ensure_dir(path: Path) -> None:
    """Create `path` and any missing parents, fsyncing each parent whose entries changed."""
    missing: list[Path] = []
    current = path
    while not current.is_dir():
        missing.append(current)
        if current.parent == current:  # pragma: no cover - the root always exists
            break
        current = current.parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, DIR_MODE)
        except FileExistsError:
            if not folder.is_dir():
                raise
            continue
        fsync_dir(folder.parent)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def atomic_write_bytes(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Replace `path` with `data`: readers see the old bytes or the new, never a mix.

    With `durable=False` nothing is fsynced: the replacement is still atomic for any
    process (a killed process leaves the old file or the new one), but a power loss may
    lose it. Only caches that can be lost use that (a run's retained stream frames).
    """
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    try:
        try:
            _write_all(fd, data)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(path.parent)


def atomic_write_json(path: Path, obj: JSONValue) -> None:
    """Replace `path` with the compact JSON of `obj` and a trailing newline."""
    atomic_write_bytes(path, dumps_json(obj) + b"\n")


def append_lines(path: Path, lines: Sequence[bytes]) -> int:
    """Append `lines` (each without its newline) in ONE write, fsync, and return the new size.

    One write keeps a batch contiguous; a crash during it leaves at most a torn tail after
    the previous end of the file, which the reader drops. A file created here also gets
    its folder fsynced, so the new entry survives a power loss.
    """
    data = b"".join(line + b"\n" for line in lines)
    created = False
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL, FILE_MODE)
        created = True
    except FileExistsError:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        _write_all(fd, data)
        os.fsync(fd)
        size = os.fstat(fd).st_size
    finally:
        os.close(fd)
    if created:
        fsync_dir(path.parent)
    return size


def truncate(path: Path, size: int) -> None:
    """Cut `path` back to `size` bytes (dropping a torn or uncommitted tail) and fsync it."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.ftruncate(fd, size)
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_file(path: Path, *, durable: bool = True) -> bool:
    """Delete one file (durably unless told otherwise); False if it did not exist."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    if durable:
        fsync_dir(path.parent)
    return True


def remove_tree(path: Path) -> bool:
    """Delete folder `path` and everything in it; False if it did not exist.

    The folder is first renamed to a hidden tombstone beside it (one atomic rename, made
    durable), and only then deleted. A crash leaves either the whole folder or a
    tombstone that no reader treats as a session; `remove_tree` on the parent's
    leftovers, or any `rm -rf`, finishes the job.
    """
    tombstone = path.with_name(f".{path.name}{TOMBSTONE_MARKER}{secrets.token_hex(6)}")
    try:
        os.rename(path, tombstone)
    except FileNotFoundError:
        return False
    fsync_dir(path.parent)
    shutil.rmtree(tombstone)
    return True


def sweep_temp_files(folder: Path) -> int:
    """Remove the temp files that writes killed halfway left in `folder`; how many.

    Only call it where no write to `folder` can be in progress (the owner of a folder,
    when it first opens it).
    """
    removed = 0
    try:
        entries = [entry.name for entry in os.scandir(folder)]
    except FileNotFoundError:
        return 0
    for name in entries:
        if name.startswith(".") and name.endswith(".tmp") and remove_file(folder / name):
            removed += 1
    return removed


def read_bytes(path: Path) -> bytes | None:
    """The whole content of `path`, or None if it does not exist."""
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def list_files(folder: Path, suffix: str) -> list[str]:
    """The names of the visible files in `folder` ending with `suffix` ([] if no folder)."""
    try:
        return [
            entry.name
            for entry in os.scandir(folder)
            if entry.name.endswith(suffix) and entry.name[0] != "." and entry.is_file()
        ]
    except FileNotFoundError:
        return []


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
