"""The history file of LocalFileStorage: `messages.jsonl` lines, their commits and scan.

The last line of each turn commits it with ``"t"`` (the turn number, which is the
session's version and only grows), ``"at"`` (unix time), ``"f"`` (the highest fencing
token accepted, once one was) and, when the turn changed the AgentState, ``"s": 1`` (the
state is in state.json, written after the lines; the turn counts once state.json reached
it) or ``"st": {...}`` (the state inline: `rewrite`, or a state that became empty),
and, for a turn that edits or regenerates, ``"c": n``: the turn keeps only the first `n`
messages before its own (the cut commits with the turn, so a crash before the commit
line leaves the history whole). A message stored before ids existed gets the id of its
position when loaded (`messages.position_message_id`).
Whatever follows the last committed turn is dropped on load and cut off before the next
append; an undecodable line *before* a commit is a CorruptSessionError naming the file.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agentkeel import _fs
from agentkeel.errors import StorageError
from agentkeel.messages import (
    SCHEMA_VERSION,
    JSONObject,
    Message,
    dumps_message,
    message_from_json,
)

__all__ = [
    "EMPTY_STATE",
    "Scan",
    "Tail",
    "encode_json",
    "encode_messages",
    "read_state",
    "scan",
    "state_document",
    "turn_lines",
]

EMPTY_STATE = b"{}"


@dataclass(frozen=True, slots=True)
class Tail:
    """What an append needs to know about a session, so it never re-reads the history."""

    file_size: int
    committed: int
    turn: int
    state: bytes
    fence: int = 0
    """The highest fencing token a commit of this session carried."""
    stamp: tuple[int, int, int] | None = None
    """`_fs.stamp` of messages.jsonl when this was true: another writer changes it."""
    count: int = 0
    """How many messages the committed history holds (what a cut is checked against)."""
    appended: tuple[tuple[int, int], ...] = ()
    """(offset, length) of the lines of the messages the last append wrote: what keeps a
    transcript's page index up to date without reading the file."""
    listed: tuple[str, int] | None = None
    """The committed history's title and transcript count (`transcript.listed`), when
    known: what the context list shows of it, carried forward by each append."""
    updated_at: float | None = None
    """The last commit's time (the context list's update time)."""


@dataclass(frozen=True, slots=True)
class _Commit:
    line: int
    """Index of the commit line; -1 for "before the first line"."""
    count: int
    turn: int
    at: float | None
    needs_state_file: bool
    fence: int = 0
    undo: tuple[int, list[Message], list[int]] | None = None
    """For a turn with a cut: where it cut and what it dropped, to undo if it never
    committed (its state file did not land)."""


@dataclass(slots=True)
class Scan:
    messages: list[Message]
    committed: int
    turn: int
    updated_at: float | None
    state: JSONObject
    state_turn: int
    fence: int = 0
    lines: list[int] = field(default_factory=list)
    """The index of the line of each message (for a transcript's page index)."""


def _parse_line(line: str | bytes, position: int) -> tuple[JSONObject, Message | None] | None:
    """One line as (record, its message), or None when it is not a well-formed record."""
    try:
        record = json.loads(line)
        if not isinstance(record, dict) or not ("m" in record or "t" in record):
            return None
        turn = record.get("t")
        if turn is not None and (not isinstance(turn, int) or isinstance(turn, bool)):
            return None
        if "m" not in record:
            return record, None
        return record, message_from_json(record["m"], position=position)
    except ValueError:  # not JSON, or not a message (MessageDecodeError)
        return None


def _split_lines(body: bytes) -> Sequence[str | bytes]:
    """Whole lines; as text (faster to parse) unless some line is not valid UTF-8."""
    try:
        return body.decode("utf-8").split("\n")[:-1]
    except UnicodeDecodeError:
        return body.split(b"\n")[:-1]


def scan(raw: bytes, path: Path, state_doc: tuple[int, JSONObject] | None) -> Scan:
    """Decode `messages.jsonl`, keeping whole committed turns only."""
    end = raw.rfind(b"\n") + 1  # bytes after the last newline are a torn line
    lines = _split_lines(raw[:end])
    messages: list[Message] = []
    line_of: list[int] = []
    commits = [_Commit(line=-1, count=0, turn=0, at=None, needs_state_file=False)]
    inline: tuple[int, JSONObject] | None = None
    bad_line = 0
    for index, line in enumerate(lines):
        parsed = _parse_line(line, len(messages))
        if parsed is None:
            bad_line = bad_line or index + 1
            continue
        record, message = parsed
        if message is not None:
            messages.append(message)
            line_of.append(index)
        turn = record.get("t")
        if not isinstance(turn, int):
            continue
        if bad_line:
            raise _fs.corrupt(path, f"line {bad_line} cannot be decoded")
        at = record.get("at")
        at = float(at) if isinstance(at, int | float) else None
        fence = record.get("f")
        fence = fence if isinstance(fence, int) else 0
        cut, before = record.get("c"), commits[-1].count
        undo = None
        if isinstance(cut, int) and 0 <= cut < before:
            undo = (cut, messages[cut:before], line_of[cut:before])
            del messages[cut:before], line_of[cut:before]
        commit = _Commit(index, len(messages), turn, at, record.get("s") == 1, fence, undo)
        commits = [commits[-1], commit]
        inline_state = record.get("st")
        if isinstance(inline_state, dict):
            inline = (turn, inline_state)
    last = commits[-1]
    if last.needs_state_file and (state_doc is None or state_doc[0] < last.turn):
        if last.undo is not None:  # put back what its cut dropped
            del messages[last.undo[0] :], line_of[last.undo[0] :]
            messages.extend(last.undo[1])
            line_of.extend(last.undo[2])
        last = commits[0]  # its lines landed but its state did not: it never committed
    del messages[last.count :], line_of[last.count :]
    if last.line == len(lines) - 1:
        committed = end
    else:
        committed = sum(len(line) for line in raw.split(b"\n", last.line + 1)[:-1]) + last.line + 1
    candidates = [doc for doc in (state_doc, inline) if doc is not None]
    state_turn, state = max(candidates, key=lambda doc: doc[0]) if candidates else (-1, {})
    return Scan(messages, committed, last.turn, last.at, state, state_turn, last.fence, line_of)


def encode_messages(messages: Sequence[Message]) -> list[bytes]:
    try:
        return [dumps_message(message).encode("utf-8") for message in messages]
    except (TypeError, ValueError) as exc:
        raise StorageError(f"a message is not JSON-serializable: {exc}") from exc


def turn_lines(
    encoded: list[bytes], turn: int, commit: bytes = b"", fence: int = 0, at: float | None = None
) -> list[bytes]:
    """One turn's lines; the last carries the commit (turn, time, fence, `commit`'s keys).

    `at` is the commit's time (now when None), rounded to the millisecond.
    """
    lines = [b'{"m":' + item + b"}" for item in encoded[:-1]]
    head = b"{" if not encoded else b'{"m":' + encoded[-1] + b","
    at = round(time.time() if at is None else at, 3)
    stamp = b'"t":%d,"at":%s' % (turn, repr(at).encode())
    if fence:
        stamp += b',"f":%d' % fence
    lines.append(head + stamp + commit + b"}")
    return lines


def state_document(turn: int, state: bytes) -> bytes:
    return b'{"schema_version":%d,"turn":%d,"state":%s}\n' % (SCHEMA_VERSION, turn, state)


def encode_json(value: JSONObject, what: str = "state") -> bytes:
    try:
        return _fs.dumps_json(value)
    except (TypeError, ValueError) as exc:
        raise StorageError(f"{what} is not JSON-serializable: {exc}") from exc


def read_state(path: Path) -> tuple[int, JSONObject] | None:
    document = _fs.read_json_object(path)
    if document is None:
        return None
    turn, state = document.get("turn"), document.get("state")
    if not isinstance(turn, int) or not isinstance(state, dict):
        raise _fs.corrupt(path, "expected {'turn': int, 'state': object}")
    return turn, state
