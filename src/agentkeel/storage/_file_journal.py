"""The commit journal of LocalFileStorage: one fsync makes many files' appends durable.

A turn that only appends writes to three or four files (``messages.jsonl``,
``runs.jsonl``, the context's ``usage.jsonl`` and its principal's file of the day), and
an fsync of each cost more than the rest of the turn: each is a disk flush, and a
sleep and a wake-up of the thread that waits for it. So those appends are written
unsynced, to the page cache, and each is also written, as (file, offset, bytes), in a
record of this journal; an fsync of the journal makes the turn durable. Turns flushed
together (`_file_flush.GroupFlush`) share that one fsync, whatever their contexts.

The files themselves are fsynced only when a segment of the journal is retired (it
passed `SEGMENT_BYTES`) or the storage closes; then the segment is deleted. So at any
instant every acknowledged append is in its file on disk or in a segment on disk.

A segment that a process left behind (its ``flock`` is free) is finished by the next
storage on the folder (`Journal.start`):

- written since the machine last booted: nothing was lost, the page cache still holds
  every append, so its files are only fsynced;
- written before a reboot (a power cut, a kernel crash): each append is written again
  at its offset, in order, then the files are fsynced. A record torn by the crash
  (checked by length and CRC) and everything after it never reached an
  acknowledgement, and are dropped.

A delete, a history rewrite and a retention sweep replace or remove files that records
may name. Each first writes a barrier for that file or folder (`Journal.seal`),
fsynced before the change, so that a replay after a reboot never writes old bytes into
the new file of the same name.

Without a boot id (a system without ``/proc``) the journal is off and every append is
fsynced in its file, as before.
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
import weakref
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from agentkeel import _fs

__all__ = ["JOURNAL_DIR", "SEGMENT_BYTES", "Journal", "boot_id"]

JOURNAL_DIR = ".journal"
SEGMENT_BYTES = 4 << 20
"""A segment this big is retired: its files fsynced, the segment deleted."""
_MAGIC = b"agentkeel-journal 1"
_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
_log = logging.getLogger("agentkeel.storage.file")


def boot_id() -> bytes | None:
    """The id of the machine's current boot (Linux), or None where the system has none."""
    try:
        return _BOOT_ID.read_bytes().strip() or None
    except OSError:
        return None


@dataclass(slots=True)
class _Segment:
    path: Path
    fd: int
    size: int
    closer: Callable[[], object]
    """Closes `fd`: when retired, or when the journal is collected unclosed."""
    dirty: set[str] = field(default_factory=set)
    """The files its records name, fsynced when it is retired."""


class Journal:
    """The journal of one LocalFileStorage (see the module docstring).

    `record` runs on the event loop; `start`, `rotate`, `seal` and `close` block and run
    in worker threads. A lock keeps the segments whole between the two.
    """

    def __init__(self, root: Path, *, segment_bytes: int = SEGMENT_BYTES) -> None:
        self.root = root
        self.folder = root / JOURNAL_DIR
        self.segment_bytes = segment_bytes
        self._prefix = os.fspath(root) + os.sep
        self._boot = boot_id()
        self._name = secrets.token_hex(6)
        self._number = 0
        self._current: _Segment | None = None
        self._retiring: list[_Segment] = []
        self._guard = threading.Lock()
        self._rotation = threading.Lock()
        self.started = False

    @property
    def enabled(self) -> bool:
        """Whether appends may rely on the journal (a boot id, and `start` done)."""
        return self._boot is not None and self.started

    @property
    def ready(self) -> bool:
        """Whether `record` can be called now: enabled, with a segment open."""
        return self.enabled and self._current is not None

    @property
    def rotation_due(self) -> bool:
        current = self._current
        return current is not None and current.size >= self.segment_bytes

    def start(self) -> None:
        """Finish the segments earlier writers left (see the module docstring)."""
        if self._boot is not None and self.folder.is_dir():
            for path in sorted(self.folder.glob("*.log")):
                fd = _fs.take_log(path)
                if fd is not None:
                    try:
                        self._finish(path, _fs.read_bytes(path) or b"")
                    finally:
                        os.close(fd)
        self.started = True

    def record(self, written: _fs.Written) -> list[Path]:
        """Journal `written` (appends already in the page cache); the files to fsync.

        The turn is durable once every returned segment is fsynced (the one written,
        and any being retired, whose records may be its own earlier usage lines).
        """
        payload = b"".join(
            b"W %s %d %d\n%s" % (self._relative(path), offset, len(data), data)
            for path, offset, data in written
        )
        with self._guard:
            current = self._current
            assert current is not None, "record before the journal is ready"
            self._append(current, payload)
            current.dirty.update(os.fspath(path) for path, _, _ in written)
        return [segment.path for segment in self._segments()]

    def seal(self, path: Path) -> None:
        """Make records about `path` (a file, or a folder and all in it) void, durably."""
        with self._guard:
            current = self._current
            if current is None:
                return  # no record was written since the last retirement
            self._append(current, b"B %s\n" % self._relative(path))
        self.sync()

    def forget(self, folder: Path) -> None:
        """Before `folder` is deleted: retire every segment that names a file in it.

        Deleting a context must leave none of its bytes on disk (SPEC guarantee 13), and
        no replay after a reboot may write into a new folder of the same name. A folder
        no segment names (the usual idle context) costs nothing.
        """
        name, inside = os.fspath(folder), os.fspath(folder) + os.sep
        with self._rotation:
            named = any(
                path == name or path.startswith(inside)
                for segment in self._segments()
                for path in segment.dirty
            )
            if named:
                self._rotate()

    def sync(self) -> None:
        """Fsync the segments: what was journaled so far is durable when it returns."""
        for segment in self._segments():
            _fs.fsync_file(segment.path)

    def rotate(self) -> None:
        """Open a new segment (durably) and retire the full one; nothing if none is due."""
        with self._rotation:
            if self._current is None or self.rotation_due:  # not rotated meanwhile
                self._rotate()

    def _rotate(self) -> None:
        """Open a new segment (durably), then retire the old one (under `_rotation`)."""
        self._number += 1
        path = self.folder / f"{self._name}-{self._number:06d}.log"
        header = b"%s %s\n" % (_MAGIC, self._boot or b"-")
        fd = _fs.create_log(path, header)
        closer = weakref.finalize(self, os.close, fd)
        with self._guard:
            old, self._current = self._current, _Segment(path, fd, len(header), closer)
            if old is not None:
                self._retiring.append(old)
        if old is not None:
            self._retire(old)

    def close(self) -> None:
        """Fsync every journaled file and delete the segments (a clean stop)."""
        with self._rotation:
            segments = self._segments()
            with self._guard:
                self._current = None
            for segment in segments:
                self._retire(segment)

    # -- plumbing ----------------------------------------------------------------------

    def _segments(self) -> list[_Segment]:
        """The segments not yet deleted, oldest first."""
        with self._guard:
            current = [] if self._current is None else [self._current]
            return [*self._retiring, *current]

    def _append(self, segment: _Segment, payload: bytes) -> None:
        record = b"R %d %08x\n%s" % (len(payload), zlib.crc32(payload), payload)
        _fs.append_log(segment.fd, record)
        segment.size += len(record)

    def _relative(self, path: Path) -> bytes:
        text = os.fspath(path)
        if not text.startswith(self._prefix):
            raise ValueError(f"{path} is not under {self.root}")
        return text[len(self._prefix) :].encode("utf-8")

    def _retire(self, segment: _Segment) -> None:
        """Fsync the segment's files, then delete it: its records are no longer needed."""
        for name in sorted(segment.dirty):
            try:
                _fs.fsync_file(Path(name))
            except FileNotFoundError:  # deleted since: nothing left to keep
                pass
        _fs.remove_file(segment.path)
        segment.closer()  # closes its descriptor, once
        with self._guard:
            if segment in self._retiring:
                self._retiring.remove(segment)

    def _finish(self, path: Path, raw: bytes) -> None:
        """Replay (after a reboot) or only fsync (same boot) a left segment; delete it."""
        header, _, body = raw.partition(b"\n")
        magic, _, boot = header.rpartition(b" ")
        if magic != _MAGIC:
            _log.warning("journal=%s | not a journal segment, left as it is", path)
            return
        try:
            writes = _voided(_records(body))
        except (ValueError, IndexError):  # a whole record that does not parse: none do
            _log.warning("journal=%s | a record does not parse, left as it is", path)
            return
        replay = boot != self._boot
        touched: dict[Path, None] = {}
        for relative, offset, data in writes:
            target = self._resolve(relative)
            if target is None:
                continue
            if replay and not _fs.write_at(target, offset, data):
                _log.warning("journal=%s | %s is gone or short: not replayed", path, target)
                continue
            touched[target] = None
        for target in touched:
            try:
                _fs.fsync_file(target)
            except FileNotFoundError:
                pass
        if replay and writes:
            _log.warning("journal=%s | replayed %d appends after a reboot", path, len(writes))
        _fs.remove_file(path)

    def _resolve(self, relative: bytes) -> Path | None:
        """The file a record names, or None when the name reaches outside the folder."""
        parts = PurePosixPath(relative.decode("utf-8", "replace")).parts
        if not parts or parts[0] == "/" or any(part in ("..", ".", "") for part in parts):
            return None
        return self.root.joinpath(*parts)


def _records(body: bytes) -> Iterator[tuple[bytes, bytes, int, bytes]]:
    """Every whole record's entries, as (kind, name, offset, data); stops at a torn one."""
    at = 0
    while at < len(body):
        end = body.find(b"\n", at)
        head = body[at:end].split(b" ") if end >= 0 else []
        if len(head) != 3 or head[0] != b"R":
            return
        try:
            length, checksum = int(head[1]), int(head[2], 16)
        except ValueError:
            return
        payload = body[end + 1 : end + 1 + length]
        if len(payload) != length or zlib.crc32(payload) != checksum:
            return
        at = end + 1 + length
        yield from _entries(payload)


def _entries(payload: bytes) -> Iterator[tuple[bytes, bytes, int, bytes]]:
    at = 0
    while at < len(payload):
        end = payload.index(b"\n", at)
        head = payload[at:end].split(b" ")
        if head[0] == b"B":
            yield b"B", head[1], 0, b""
            at = end + 1
            continue
        length = int(head[3])
        yield b"W", head[1], int(head[2]), payload[end + 1 : end + 1 + length]
        at = end + 1 + length


def _voided(entries: Iterator[tuple[bytes, bytes, int, bytes]]) -> list[tuple[bytes, int, bytes]]:
    """The writes in order, without those a later barrier made void."""
    writes: list[tuple[bytes, int, bytes]] = []
    for kind, name, offset, data in entries:
        if kind == b"B":
            folder = name + b"/"
            writes = [w for w in writes if w[0] != name and not w[0].startswith(folder)]
        else:
            writes.append((name, offset, data))
    return writes
