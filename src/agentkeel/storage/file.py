"""LocalFileStorage: sessions as plain files under one folder (SPEC section 8).

Layout, per session (folder names go through `ids.encode_path_segment`)::

    <dir>/[<principal>/]<def-name>:<contextId>/
        session.json     definition, context id, owner, created_at, schema_version
        messages.jsonl   the history: one ``{"m": <message>}`` per line, in turns
        state.json       ``{"turn": n, "state": {...}}``, absent until the state holds a key
        runs/<runId>.json
        runs/<runId>.events.jsonl   the run's stream frames, one per line (reconnects)

The last line of each turn commits it with ``"t"`` (a turn number that only grows),
``"at"`` (unix time) and, when the turn changed the AgentState, ``"s": 1`` (the state is
in state.json, written after the lines; the turn counts once state.json reached it) or
``"st": {...}`` (the state inline: `rewrite`, or a state that became empty). Whatever
follows the last committed turn (a torn line, a batch cut short, a turn whose state
never landed) is dropped on load and cut off before the next append; an undecodable
line *before* a commit, or an unreadable session.json, state.json or run record, is a
CorruptSessionError naming the file, which is left as it is. docs/sessions.md has more.

An append is one write and one fsync (plus an atomic state.json when the state
changed): it never reads the history, because what it needs (committed length, last
turn, current state) is cached per session. One process writes a folder at a time.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

import anyio
import anyio.to_thread

from agentkeel import _fs
from agentkeel.errors import StorageError
from agentkeel.ids import encode_path_segment
from agentkeel.messages import (
    SCHEMA_VERSION,
    JSONObject,
    Message,
    dumps_message,
    message_from_json,
)
from agentkeel.result import Usage
from agentkeel.storage._usage_files import (
    USAGE_FILE,
    append_usage,
    principal_usage_path,
    read_usage,
)
from agentkeel.storage.base import RunRecord, SessionKey, SessionMetadata, SessionSnapshot

__all__ = ["LocalFileStorage", "principal_folder", "session_folder"]

SESSION_FILE = "session.json"
MESSAGES_FILE = "messages.jsonl"
STATE_FILE = "state.json"
RUNS_DIR = "runs"
EVENTS_SUFFIX = ".events.jsonl"
_EMPTY_STATE = b"{}"
_LOCK_STRIPES = 64
_T = TypeVar("_T")
_log = logging.getLogger(__name__)


def session_folder(root: Path, key: SessionKey) -> Path:
    """The folder of `key` under `root`; no principal or id can name anything outside it.

    A principal's folder has its ``:`` percent-encoded too, so it can never have the name
    of a ``<def-name>:<contextId>`` session folder next to it.
    """
    return principal_folder(root, key.principal) / encode_path_segment(key.session_id)


def principal_folder(root: Path, principal: str | None) -> Path:
    """The folder of a principal's sessions under `root` (`root` itself without one)."""
    if principal is None:
        return root
    return root / encode_path_segment(principal).replace(":", "%3A")


@dataclass(frozen=True, slots=True)
class _Tail:
    """What an append needs to know about a session, so it never re-reads the history."""

    file_size: int
    committed: int
    turn: int
    state: bytes


@dataclass(frozen=True, slots=True)
class _Commit:
    line: int
    """Index of the commit line; -1 for "before the first line"."""
    count: int
    turn: int
    at: float | None
    needs_state_file: bool


@dataclass(slots=True)
class _Scan:
    messages: list[Message]
    committed: int
    turn: int
    updated_at: float | None
    state: JSONObject
    state_turn: int


def _parse_line(line: str | bytes) -> tuple[JSONObject, Message | None] | None:
    """One line as (record, its message), or None when it is not a well-formed record."""
    try:
        record = json.loads(line)
        if not isinstance(record, dict) or not ("m" in record or "t" in record):
            return None
        turn = record.get("t")
        if turn is not None and (not isinstance(turn, int) or isinstance(turn, bool)):
            return None
        return record, message_from_json(record["m"]) if "m" in record else None
    except ValueError:  # not JSON, or not a message (MessageDecodeError)
        return None


def _split_lines(body: bytes) -> Sequence[str | bytes]:
    """Whole lines; as text (faster to parse) unless some line is not valid UTF-8."""
    try:
        return body.decode("utf-8").split("\n")[:-1]
    except UnicodeDecodeError:
        return body.split(b"\n")[:-1]


def _scan(raw: bytes, path: Path, state_doc: tuple[int, JSONObject] | None) -> _Scan:
    """Decode `messages.jsonl`, keeping whole committed turns only."""
    end = raw.rfind(b"\n") + 1  # bytes after the last newline are a torn line
    lines = _split_lines(raw[:end])
    messages: list[Message] = []
    commits = [_Commit(line=-1, count=0, turn=0, at=None, needs_state_file=False)]
    inline: tuple[int, JSONObject] | None = None
    bad_line = 0
    for index, line in enumerate(lines):
        parsed = _parse_line(line)
        if parsed is None:
            bad_line = bad_line or index + 1
            continue
        record, message = parsed
        if message is not None:
            messages.append(message)
        turn = record.get("t")
        if not isinstance(turn, int):
            continue
        if bad_line:
            raise _fs.corrupt(path, f"line {bad_line} cannot be decoded")
        at = record.get("at")
        at = float(at) if isinstance(at, int | float) else None
        commits = [commits[-1], _Commit(index, len(messages), turn, at, record.get("s") == 1)]
        inline_state = record.get("st")
        if isinstance(inline_state, dict):
            inline = (turn, inline_state)
    last = commits[-1]
    if last.needs_state_file and (state_doc is None or state_doc[0] < last.turn):
        last = commits[0]  # its lines landed but its state did not: it never committed
    del messages[last.count :]
    if last.line == len(lines) - 1:
        committed = end
    else:
        committed = sum(len(line) for line in raw.split(b"\n", last.line + 1)[:-1]) + last.line + 1
    candidates = [doc for doc in (state_doc, inline) if doc is not None]
    state_turn, state = max(candidates, key=lambda doc: doc[0]) if candidates else (-1, {})
    return _Scan(messages, committed, last.turn, last.at, state, state_turn)


def _encode_messages(messages: Sequence[Message]) -> list[bytes]:
    try:
        return [dumps_message(message).encode("utf-8") for message in messages]
    except (TypeError, ValueError) as exc:
        raise StorageError(f"a message is not JSON-serializable: {exc}") from exc


def _turn_lines(encoded: list[bytes], turn: int, commit: bytes = b"") -> list[bytes]:
    """One turn's lines; the last carries the commit (turn, time and `commit`'s keys)."""
    lines = [b'{"m":' + item + b"}" for item in encoded[:-1]]
    head = b"{" if not encoded else b'{"m":' + encoded[-1] + b","
    stamp = b'"t":%d,"at":%s' % (turn, repr(round(time.time(), 3)).encode())
    lines.append(head + stamp + commit + b"}")
    return lines


def _state_document(turn: int, state: bytes) -> bytes:
    return b'{"schema_version":%d,"turn":%d,"state":%s}\n' % (SCHEMA_VERSION, turn, state)


def _encode_json(value: JSONObject, what: str = "state") -> bytes:
    try:
        return _fs.dumps_json(value)
    except (TypeError, ValueError) as exc:
        raise StorageError(f"{what} is not JSON-serializable: {exc}") from exc


class LocalFileStorage:
    """A SessionStorage that keeps each session in a folder of plain, inspectable files.

    Args:
        directory: The session folder (``sessionDir``); created on the first write.
        cache_size: How many sessions' append bookkeeping to keep in memory. A session
            that fell out is re-read once on its next append.
    """

    def __init__(self, directory: str | os.PathLike[str], *, cache_size: int = 4096) -> None:
        self.directory = Path(directory)
        self._cache: OrderedDict[SessionKey, _Tail] = OrderedDict()
        self._cache_size = cache_size
        self._locks = [anyio.Lock() for _ in range(_LOCK_STRIPES)]
        self._latest_events: OrderedDict[SessionKey, str] = OrderedDict()
        """The run whose frames each recently written session keeps (see put_events)."""

    def path(self, key: SessionKey) -> Path:
        """The folder holding `key`'s files (it may not exist yet)."""
        return session_folder(self.directory, key)

    # -- the SessionStorage interface ------------------------------------------------

    async def load(self, key: SessionKey) -> SessionSnapshot | None:
        """Read the session, dropping any uncommitted tail; None if it was never saved."""
        async with self._lock(key):
            loaded = await self._call(key, self._load_sync, key)
            if loaded is None:
                return None
            self._remember(key, loaded[1])
            return loaded[0]

    async def append(
        self, key: SessionKey, messages: Sequence[Message], state: JSONObject | None
    ) -> None:
        """Append one turn as one fsynced batch; a crash keeps all of it or none."""
        lines = _encode_messages(messages)
        encoded_state = None if state is None else _encode_json(state)
        async with self._lock(key):
            tail = self._cache.get(key)
            tail = await self._call(key, self._append_sync, key, tail, lines, encoded_state)
            self._remember(key, tail)

    async def rewrite(
        self, key: SessionKey, messages: Sequence[Message], state: JSONObject
    ) -> None:
        """Replace history and state with one atomic rename of messages.jsonl."""
        lines = _encode_messages(messages)
        encoded_state = _encode_json(state)
        async with self._lock(key):
            tail = self._cache.get(key)
            tail = await self._call(key, self._rewrite_sync, key, tail, lines, encoded_state)
            self._remember(key, tail)

    async def delete(self, key: SessionKey) -> bool:
        """Remove the session folder (history, state and runs) as one rename."""
        async with self._lock(key):
            self._cache.pop(key, None)
            return await self._call(key, _fs.remove_tree, self.path(key))

    async def put_run(self, key: SessionKey, record: RunRecord) -> None:
        """Write ``runs/<runId>.json`` atomically."""
        runs = self.path(key) / RUNS_DIR
        target = runs / f"{encode_path_segment(record.run_id)}.json"
        document = _encode_json(record.to_json(), "run record") + b"\n"

        def write() -> None:
            _fs.ensure_dir(runs)
            _fs.atomic_write_bytes(target, document)

        async with self._lock(key):  # not while the folder is being deleted
            await self._call(None, write)

    async def get_run(self, key: SessionKey, run_id: str) -> RunRecord | None:
        """Read one run record; CorruptSessionError if it cannot be decoded."""
        target = self.path(key) / RUNS_DIR / f"{encode_path_segment(run_id)}.json"
        return await self._call(None, _read_run, target)

    async def list_runs(self, key: SessionKey) -> list[RunRecord]:
        """Every run record of the session, oldest first (start time, then id)."""
        return await self._call(None, _list_runs, self.path(key) / RUNS_DIR)

    async def put_events(self, key: SessionKey, run_id: str, frames: Sequence[JSONObject]) -> None:
        """Write ``runs/<runId>.events.jsonl`` atomically (RunEventStorage).

        Only a context's latest run can be reconnected to, so the frames of the run
        before it are removed: a session keeps one frames file, however long it lives.
        The first write for a session in this process looks for older ones once.
        """
        runs = self.path(key) / RUNS_DIR
        name = f"{encode_path_segment(run_id)}{EVENTS_SUFFIX}"
        body = b"".join(_encode_json(frame, "stream frame") + b"\n" for frame in frames)
        previous = self._latest_events.get(key)

        def write() -> None:
            # a reconnect cache: atomic for a crashed process, not fsynced (see _fs)
            _fs.ensure_dir(runs)
            _fs.atomic_write_bytes(runs / name, body, durable=False)
            if previous is None:
                stale = [entry for entry in _fs.list_files(runs, EVENTS_SUFFIX) if entry != name]
            else:
                stale = [] if previous == run_id else [previous_name]
            for entry in stale:
                _fs.remove_file(runs / entry, durable=False)

        previous_name = (
            "" if previous is None else f"{encode_path_segment(previous)}{EVENTS_SUFFIX}"
        )
        async with self._lock(key):
            await self._call(None, write)
        self._latest_events[key] = run_id
        self._latest_events.move_to_end(key)
        while len(self._latest_events) > self._cache_size:
            self._latest_events.popitem(last=False)

    async def get_events(self, key: SessionKey, run_id: str) -> list[JSONObject] | None:
        """The retained frames of one run, or None (RunEventStorage)."""
        target = self.path(key) / RUNS_DIR / f"{encode_path_segment(run_id)}{EVENTS_SUFFIX}"
        return await self._call(None, _read_events, target)

    async def add_usage(self, key: SessionKey, usage: Usage, *, day: str) -> None:
        """Append to the context's and the principal's usage files (UsageStorage)."""
        paths = (
            self.path(key) / USAGE_FILE,
            principal_usage_path(principal_folder(self.directory, key.principal), day),
        )
        async with self._lock(key):  # not while the folder is being deleted
            await self._call(None, append_usage, paths, usage)

    async def context_usage(self, key: SessionKey) -> Usage:
        """The context's total (UsageStorage); deleted with the session's folder."""
        return await self._call(None, read_usage, self.path(key) / USAGE_FILE)

    async def principal_usage(self, principal: str | None, day: str) -> Usage:
        """The principal's total of `day` (UsageStorage)."""
        path = principal_usage_path(principal_folder(self.directory, principal), day)
        return await self._call(None, read_usage, path)

    # -- plumbing ----------------------------------------------------------------------

    def _lock(self, key: SessionKey) -> anyio.Lock:
        return self._locks[hash(key) % _LOCK_STRIPES]

    def _remember(self, key: SessionKey, tail: _Tail) -> None:
        self._cache[key] = tail
        self._cache.move_to_end(key)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)

    async def _call(self, key: SessionKey | None, func: Callable[..., _T], *args: object) -> _T:
        """Run blocking `func` in a worker thread; forget `key`'s cache if it fails."""
        try:
            return await anyio.to_thread.run_sync(func, *args)
        except BaseException as exc:
            if key is not None:
                self._cache.pop(key, None)
            if isinstance(exc, OSError):
                raise StorageError(f"session storage I/O failed: {exc}") from exc
            raise

    # -- blocking work, in worker threads -----------------------------------------------

    def _load_sync(self, key: SessionKey) -> tuple[SessionSnapshot, _Tail] | None:
        folder = self.path(key)
        meta = _fs.read_json_object(folder / SESSION_FILE)
        if meta is None:
            for name in (MESSAGES_FILE, STATE_FILE):
                if (folder / name).exists():
                    raise _fs.corrupt(folder / SESSION_FILE, f"missing, but {name} exists")
            return None
        created = meta.get("created_at")
        if not isinstance(created, int | float):
            raise _fs.corrupt(folder / SESSION_FILE, "no created_at")
        version = meta.get("schema_version")
        if isinstance(version, int) and version > SCHEMA_VERSION:
            raise StorageError(f"{folder / SESSION_FILE}: written by a newer agentkeel")
        state_doc = _read_state(folder / STATE_FILE)
        raw = _fs.read_bytes(folder / MESSAGES_FILE) or b""
        scan = _scan(raw, folder / MESSAGES_FILE, state_doc)
        if scan.committed < len(raw):
            dropped = len(raw) - scan.committed
            _log.warning("session=%s | dropping %d bytes of an unfinished turn", folder, dropped)
        snapshot = SessionSnapshot(
            messages=scan.messages,
            state=scan.state,
            metadata=SessionMetadata(
                definition=key.definition,
                context_id=key.context_id,
                owner=key.principal,
                created_at=float(created),
                updated_at=scan.updated_at or float(created),
                message_count=len(scan.messages),
            ),
        )
        turn = max(scan.turn, scan.state_turn)
        return snapshot, _Tail(len(raw), scan.committed, turn, _fs.dumps_json(scan.state))

    def _open_sync(self, key: SessionKey, tail: _Tail | None) -> _Tail:
        """The session's tail, checked against the disk; creates the session if needed."""
        folder = self.path(key)
        if tail is None or _fs.file_size(folder / MESSAGES_FILE) != tail.file_size:
            loaded = self._load_sync(key)  # first use, or changed behind our back
            tail = None if loaded is None else loaded[1]
            _fs.sweep_temp_files(folder)  # what writes killed halfway left behind
        if tail is None:
            _fs.ensure_dir(folder)
            document: JSONObject = {
                "schema_version": SCHEMA_VERSION,
                "session_id": key.session_id,
                "definition": key.definition,
                "context_id": key.context_id,
                "owner": key.principal,
                "created_at": round(time.time(), 3),
            }
            _fs.atomic_write_json(folder / SESSION_FILE, document)
            tail = _Tail(file_size=0, committed=0, turn=0, state=_EMPTY_STATE)
        return tail

    def _append_sync(
        self, key: SessionKey, tail: _Tail | None, messages: list[bytes], state: bytes | None
    ) -> _Tail:
        tail = self._open_sync(key, tail)
        path = self.path(key) / MESSAGES_FILE
        if tail.committed < tail.file_size:
            _fs.truncate(path, tail.committed)  # drop the uncommitted tail a crash left
            tail = replace(tail, file_size=tail.committed)
        if state == tail.state:
            state = None
        if not messages and state is None:
            return tail
        turn = tail.turn + 1
        # An emptied state goes inline (state.json disappears); any other goes to
        # state.json after the lines, and the turn counts only once it is there.
        commit = b"" if state is None else b',"st":{}' if state == _EMPTY_STATE else b',"s":1'
        size = _fs.append_lines(path, _turn_lines(messages, turn, commit))
        if state == _EMPTY_STATE:
            _fs.remove_file(path.with_name(STATE_FILE))
        elif state is not None:
            _fs.atomic_write_bytes(path.with_name(STATE_FILE), _state_document(turn, state))
        return _Tail(size, size, turn, tail.state if state is None else state)

    def _rewrite_sync(
        self, key: SessionKey, tail: _Tail | None, messages: list[bytes], state: bytes
    ) -> _Tail:
        tail = self._open_sync(key, tail)
        path = self.path(key) / MESSAGES_FILE
        turn = tail.turn + 1
        data = b"".join(line + b"\n" for line in _turn_lines(messages, turn, b',"st":' + state))
        # This one rename commits history and state together (the state is inline);
        # state.json is brought in line afterwards, for people reading the folder.
        _fs.atomic_write_bytes(path, data)
        if state == _EMPTY_STATE:
            _fs.remove_file(path.with_name(STATE_FILE))
        else:
            _fs.atomic_write_bytes(path.with_name(STATE_FILE), _state_document(turn, state))
        return _Tail(len(data), len(data), turn, state)


def _read_state(path: Path) -> tuple[int, JSONObject] | None:
    document = _fs.read_json_object(path)
    if document is None:
        return None
    turn, state = document.get("turn"), document.get("state")
    if not isinstance(turn, int) or not isinstance(state, dict):
        raise _fs.corrupt(path, "expected {'turn': int, 'state': object}")
    return turn, state


def _read_run(path: Path) -> RunRecord | None:
    document = _fs.read_json_object(path)
    if document is None:
        return None
    try:
        return RunRecord.from_json(document)
    except (KeyError, TypeError, ValueError) as exc:
        raise _fs.corrupt(path, f"not a run record ({exc!r})") from exc


def _list_runs(folder: Path) -> list[RunRecord]:
    found = [record for path in _fs.list_json_files(folder) if (record := _read_run(path))]
    return sorted(found, key=lambda record: (record.started_at, record.run_id))


def _read_events(path: Path) -> list[JSONObject] | None:
    raw = _fs.read_bytes(path)
    if raw is None:
        return None
    frames: list[JSONObject] = []
    for line in raw.splitlines():
        try:
            frame = json.loads(line)
        except ValueError as exc:
            raise _fs.corrupt(path, f"not JSON lines ({exc})") from exc
        if not isinstance(frame, dict):
            raise _fs.corrupt(path, "a line is not a JSON object")
        frames.append(frame)
    return frames
