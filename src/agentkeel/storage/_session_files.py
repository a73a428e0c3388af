"""The blocking work of LocalFileStorage on one session folder (run in worker threads).

`load` reads a session; `open_tail` finds what an append needs (reading the folder only
when the cache is missing or the history file changed behind it); `append` and
`rewrite` check the commit (version, fence) and write it. `_history` has the format.
"""

from __future__ import annotations

import logging
import os
import re
import time
from dataclasses import replace
from pathlib import Path

from agentkeel import _fs
from agentkeel.errors import StorageError
from agentkeel.ids import encode_path_segment
from agentkeel.keys import SessionKey
from agentkeel.messages import SCHEMA_VERSION, JSONObject
from agentkeel.storage._file_summary import read_summary
from agentkeel.storage._history import (
    EMPTY_STATE,
    Tail,
    read_state,
    scan,
    state_document,
    turn_lines,
)
from agentkeel.storage._records import RUNS_FILE
from agentkeel.storage.base import SessionMetadata, SessionSnapshot
from agentkeel.storage.guard import check_commit
from agentkeel.storage.transcript import listed

__all__ = [
    "FRAMES_FILE",
    "MESSAGES_FILE",
    "SESSION_FILE",
    "STATE_FILE",
    "append",
    "check_writable",
    "document_file",
    "load",
    "open_tail",
    "principal_folder",
    "rewrite",
    "session_folder",
]

SESSION_FILE = "session.json"
MESSAGES_FILE = "messages.jsonl"
STATE_FILE = "state.json"
FRAMES_FILE = "frames.sse"
_log = logging.getLogger("agentkeel.storage.file")
_DOCUMENT_NAME = re.compile(r"[a-z][a-z0-9_-]{0,31}")
_RESERVED_DOCUMENTS = frozenset({"session", "state"})


def document_file(name: str) -> str:
    """The file of a named session document (``<name>.json``); ValueError for a bad name."""
    if not _DOCUMENT_NAME.fullmatch(name) or name in _RESERVED_DOCUMENTS:
        raise ValueError(f"document name {name!r} must match {_DOCUMENT_NAME.pattern}")
    return f"{name}.json"


EMPTY_LISTING = ("", 0)
"""The listing of an empty history: no title, nothing shown."""


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


def load(folder: Path, key: SessionKey) -> tuple[SessionSnapshot, Tail] | None:
    stamp = _fs.stamp(folder / MESSAGES_FILE)  # before the read: a later write shows
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
    state_doc = read_state(folder / STATE_FILE)
    raw = _fs.read_bytes(folder / MESSAGES_FILE) or b""
    found = scan(raw, folder / MESSAGES_FILE, state_doc)
    if found.committed < len(raw):
        dropped = len(raw) - found.committed
        _log.warning("session=%s | dropping %d bytes of an unfinished turn", folder, dropped)
    turn = max(found.turn, found.state_turn)
    snapshot = SessionSnapshot(
        messages=found.messages,
        state=found.state,
        metadata=SessionMetadata(
            definition=key.definition,
            context_id=key.context_id,
            owner=key.principal,
            created_at=float(created),
            updated_at=found.updated_at or float(created),
            message_count=len(found.messages),
        ),
        version=turn,
    )
    state = _fs.dumps_json(found.state)
    count = len(found.messages)
    shown = listed(found.messages)
    return snapshot, Tail(
        len(raw),
        found.committed,
        turn,
        state,
        found.fence,
        stamp,
        count,
        listed=shown,
        updated_at=found.updated_at,
    )


def open_tail(
    folder: Path,
    key: SessionKey,
    tail: Tail | None,
    expected_version: int | None,
    fence: int | None,
    checked: bool = False,
) -> tuple[Tail, int]:
    """The session's tail, checked against the disk, and the commit's fence.

    `checked`: the caller has just compared the tail's stamp with the disk. The commit
    (version, fence) is checked before a new session is created, so a write that is
    refused leaves nothing behind: no folder that would make an unknown context look
    like an existing, empty one.
    """
    if tail is None or (not checked and _fs.stamp(folder / MESSAGES_FILE) != tail.stamp):
        loaded = load(folder, key)  # first use, or changed behind our back
        tail = None if loaded is None else loaded[1]
        _fs.sweep_temp_files(folder)  # what writes killed halfway left behind
    fresh = tail is None
    if tail is None:
        tail = Tail(file_size=0, committed=0, turn=0, state=EMPTY_STATE)
    fence = check_commit(
        key, version=tail.turn, highest_fence=tail.fence,
        expected_version=expected_version, fence=fence,
    )  # fmt: skip
    if fresh:
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
    return tail, fence


def append(
    folder: Path,
    key: SessionKey,
    tail: Tail | None,
    messages: list[bytes],
    state: bytes | None,
    expected_version: int | None,
    fence: int | None,
    cut: int | None = None,
    run: bytes | None = None,
    shown: tuple[str, int] | None = None,
    durable: bool = True,
    log: _fs.Written | None = None,
) -> Tail:
    """Commit one turn; `shown` (its messages' `listed`) carries the listing forward.

    With `durable=False` (`FlushedAppends._appends_only` said yes, having checked the
    tail against the disk) the run record and the lines are written unsynced: the
    caller makes both durable (their journal record, `log`) before it acknowledges the turn.
    """
    tail, fence = open_tail(folder, key, tail, expected_version, fence, checked=not durable)
    if cut is not None and not 0 <= cut <= tail.count:
        raise StorageError(f"cannot cut {key.session_id} at {cut}: beyond its history")
    previous = _listed_before(folder, tail)
    _put_run(folder, run, durable=durable, log=log)
    path = folder / MESSAGES_FILE
    if tail.committed < tail.file_size:
        _fs.truncate(path, tail.committed)  # drop the uncommitted tail a crash left
        tail = replace(tail, file_size=tail.committed, stamp=_fs.stamp(path))
    if state == tail.state:
        state = None
    if cut == tail.count:
        cut = None  # nothing to drop
    if not messages and state is None and cut is None:
        return tail
    turn = tail.turn + 1
    # An emptied state goes inline (state.json disappears); any other goes to
    # state.json after the lines, and the turn counts only once it is there.
    commit = b"" if state is None else b',"st":{}' if state == EMPTY_STATE else b',"s":1'
    if cut is not None:
        commit += b',"c":%d' % cut
    at = round(time.time(), 3)
    written = turn_lines(messages, turn, commit, fence, at)
    size = _fs.append_lines(path, written, durable=durable, log=log)
    spans, offset = [], size - sum(len(line) + 1 for line in written)
    for line in written[: len(messages)]:
        spans.append((offset, len(line)))
        offset += len(line) + 1
    stamp = _fs.stamp(path)
    if state == EMPTY_STATE:
        _fs.remove_file(path.with_name(STATE_FILE))
    elif state is not None:
        _fs.atomic_write_bytes(path.with_name(STATE_FILE), state_document(turn, state))
    count = (tail.count if cut is None else cut) + len(messages)
    base = EMPTY_LISTING if cut == 0 else previous if cut is None else None
    now_listed = None
    if base is not None and shown is not None:
        now_listed = (base[0] or shown[0], base[1] + shown[1])
    state = tail.state if state is None else state
    return Tail(size, size, turn, state, fence, stamp, count, tuple(spans), now_listed, at)


def rewrite(
    folder: Path,
    key: SessionKey,
    tail: Tail | None,
    messages: list[bytes],
    state: bytes | None,
    expected_version: int | None,
    fence: int | None,
    run: bytes | None = None,
    shown: tuple[str, int] | None = None,
) -> Tail:
    tail, fence = open_tail(folder, key, tail, expected_version, fence)
    _put_run(folder, run)
    path = folder / MESSAGES_FILE
    changed = state is not None and state != tail.state
    state = tail.state if state is None else state
    turn = tail.turn + 1
    at = round(time.time(), 3)
    lines = turn_lines(messages, turn, b',"st":' + state, fence, at)
    data = b"".join(line + b"\n" for line in lines)
    # This one rename commits history and state together (the state is inline);
    # state.json is brought in line afterwards, for people reading the folder.
    _fs.atomic_write_bytes(path, data)
    stamp = _fs.stamp(path)
    if state == EMPTY_STATE:
        _fs.remove_file(path.with_name(STATE_FILE))
    elif changed or not path.with_name(STATE_FILE).exists():
        _fs.atomic_write_bytes(path.with_name(STATE_FILE), state_document(turn, state))
    count = len(messages)
    return Tail(len(data), len(data), turn, state, fence, stamp, count, listed=shown, updated_at=at)


def _listed_before(folder: Path, tail: Tail) -> tuple[str, int] | None:
    """The committed history's listing before a turn: known, empty, or from the summary.

    After a cut this process could not follow, the summary the context list rebuilt
    from the history (if it did) still describes the file.
    """
    if not tail.count:
        return EMPTY_LISTING
    if tail.listed is not None:
        return tail.listed
    found = read_summary(folder, tail.stamp)
    return None if found is None else (found.title, found.shown)


def _put_run(
    folder: Path, run: bytes | None, *, durable: bool = True, log: _fs.Written | None = None
) -> None:
    """Append a turn's run record (its encoded line) once its commit passed the checks.

    It goes before the commit: a refused writer so stores nothing; a crash between the
    two writes leaves a record whose turn did not commit, which the next turn's record
    replaces as the latest.
    """
    if run is not None:  # `open_tail` made the folder
        _fs.append_records(folder / RUNS_FILE, [run], durable=durable, log=log)


def check_writable(folder: Path) -> None:
    """The folder (or the nearest existing parent) must be writable."""
    target = folder
    while not target.exists() and target.parent != target:
        target = target.parent
    if not target.is_dir() or not os.access(target, os.W_OK | os.X_OK):
        raise PermissionError(f"{target} is not a writable folder")
