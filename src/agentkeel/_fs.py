"""The only code in agentkeel that writes files, so crash safety is reviewed in one place.

Every write here leaves a file either as it was or as it should be when the process is
killed at any instant:

- whole-file writes go to a temp file in the same folder, are fsynced, then
  `os.replace`d over the target, and the folder is fsynced so the rename itself is
  durable;
- appends are one `write` of the whole batch followed by an fsync, so a batch is either
  on disk or (after a crash) a torn tail that the reader detects and drops;
- removing a folder first renames it to a hidden tombstone, so a crash halfway through
  the deletion never leaves half a session that still looks alive;
- a cache that may be lost is overwritten in place behind a checksummed header
  (`overwrite_checked`), so it costs no new file, and a torn copy reads as absent.

The functions are synchronous on purpose: callers run them in worker threads, but for
small unsynced appends to files that exist. Files are created ``0o600`` and folders
``0o700`` because they hold users' conversations.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import secrets
import shutil
import zlib
from collections.abc import Sequence
from pathlib import Path

from agentkeel._fs_read import (
    corrupt,
    file_size,
    has_files,
    list_json_files,
    read_bytes,
    read_checked,
    read_json_object,
    read_tail,
    stamp,
)
from agentkeel.messages import JSONValue

__all__ = [
    "Written",
    "append_log",
    "create_log",
    "take_log",
    "write_at",
    "append_lines",
    "append_records",
    "atomic_write_bytes",
    "atomic_write_json",
    "corrupt",
    "dumps_json",
    "ensure_dir",
    "file_size",
    "fsync_dir",
    "fsync_file",
    "has_files",
    "list_json_files",
    "overwrite_checked",
    "read_checked",
    "read_tail",
    "read_bytes",
    "read_json_object",
    "remove_empty_dir",
    "remove_file",
    "remove_tree",
    "stamp",
    "sweep_temp_files",
    "truncate",
]

Written = list[tuple[Path, int, bytes]]
"""Appends made unsynced, each as (file, offset, bytes): what a journal record holds."""
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


def fsync_file(path: Path) -> None:
    """Make what was appended to `path` unsynced durable (FileNotFoundError: no file)."""
    fd = os.open(path, os.O_RDONLY)
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


def _open_append(path: Path, mode: int) -> tuple[int, bool]:
    """Open `path` to append, and whether it was created (it nearly always exists)."""
    try:
        return os.open(path, mode | os.O_APPEND), False
    except FileNotFoundError:
        try:
            return os.open(path, mode | os.O_APPEND | os.O_CREAT | os.O_EXCL, FILE_MODE), True
        except FileExistsError:  # created meanwhile
            return os.open(path, mode | os.O_APPEND), False


def append_lines(
    path: Path, lines: Sequence[bytes], *, durable: bool = True, log: Written | None = None
) -> int:
    """Append `lines` (each without its newline) in ONE write, fsync, and return the new size.

    One write keeps a batch contiguous (a crash leaves at most a torn tail, which the reader
    drops). A created file is fsynced with its folder, so its entry survives a power loss;
    `durable=False` leaves an existing file's fsync to the caller (`storage._file_flush`),
    and `log` gets the (path, offset, bytes) written, for the caller's journal.
    """
    data = b"".join(line + b"\n" for line in lines)
    fd, created = _open_append(path, os.O_WRONLY)
    try:
        _write_all(fd, data)
        if durable or created:
            os.fsync(fd)
        size = os.fstat(fd).st_size
    finally:
        os.close(fd)
    if created:
        fsync_dir(path.parent)
    if log is not None:
        log.append((path, size - len(data), data))
    return size


def append_records(
    path: Path, lines: Sequence[bytes], *, durable: bool = True, log: Written | None = None
) -> int:
    """Append whole lines to a file of independent records; returns the new size.

    Such a file has no commit marker, so a tail a crash left without its newline is cut
    off here before the batch is written (one ``pread`` per append). With
    `durable=False` nothing is fsynced: a kill loses nothing written, a power cut may
    (unless the caller journals what `log` gets, as `append_lines`).
    """
    data = b"".join(line + b"\n" for line in lines)
    fd, created = _open_append(path, os.O_RDWR)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            size = _last_newline(fd, size)
            os.ftruncate(fd, size)
        _write_all(fd, data)
        if durable:
            os.fsync(fd)
        if log is not None:
            log.append((path, size, data))
        size += len(data)  # no second fstat: one syscall less, on every turn
    finally:
        os.close(fd)
    if created and durable:
        fsync_dir(path.parent)
    return size


def _last_newline(fd: int, size: int) -> int:
    """The offset just after the last newline of the open file (0 when it has none)."""
    end = size
    while end > 0:
        start = max(0, end - 65536)
        found = os.pread(fd, end - start, start).rfind(b"\n")
        if found >= 0:
            return start + found + 1
        end = start
    return 0


def overwrite_checked(path: Path, data: bytes, label: str) -> None:
    """Replace the content of a cache file in place, behind a checksummed header.

    No temp file and no fsync: a cache written every turn must not cost a new inode each
    time. A crash halfway leaves a checksum mismatch, which `read_checked` reports as
    absent. `label` (no spaces or newlines) is kept in the header and checked on read.
    """
    header = b"%s %d %08x\n" % (label.encode("utf-8"), len(data), zlib.crc32(data))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, FILE_MODE)
    try:
        _write_all(fd, header + data)
        os.ftruncate(fd, len(header) + len(data))
    finally:
        os.close(fd)


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


def remove_empty_dir(path: Path) -> bool:
    """Remove folder `path` if it is empty (durably); False if it is not, or is gone."""
    try:
        os.rmdir(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
            return False
        raise
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


def create_log(path: Path, header: bytes) -> int:
    """Create the append-only log `path` with `header`, durably; its locked descriptor.

    The exclusive ``flock`` tells another process that the log's writer is alive (it
    goes with the descriptor, however the process ends). The caller closes it.
    """
    ensure_dir(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL, FILE_MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        _write_all(fd, header)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        path.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)
    return fd


def append_log(fd: int, data: bytes) -> None:
    """Append one record to a log `create_log` made (unsynced: its reader checks it)."""
    _write_all(fd, data)


def take_log(path: Path) -> int | None:
    """Lock a log another writer left (a descriptor to close); None while it is alive."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def write_at(path: Path, offset: int, data: bytes) -> bool:
    """Write `data` at `offset` of the existing file `path` (unsynced), as a log replays it.

    False, and nothing written, when the file is gone or shorter than `offset`: a write
    there would leave a hole of zero bytes in the middle of a file of lines.
    """
    try:
        fd = os.open(path, os.O_WRONLY)
    except FileNotFoundError:
        return False
    try:
        if os.fstat(fd).st_size < offset:
            return False
        view, at = memoryview(data), offset
        while view:
            written = os.pwrite(fd, view, at)
            view, at = view[written:], at + written
    finally:
        os.close(fd)
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
