"""A session's listing summary for LocalFileStorage: what the context list shows, kept small.

The context list shows each session's title, transcript count and update time; reading
them from the history would make a list of long conversations cost their whole length.
A turn carries them forward in the storage's append tail (`_history.Tail.listed`), and
the list writes them to ``summary.cache`` in the session folder, with the stamp (size,
inode, mtime) of ``messages.jsonl`` they describe, in place behind a checksum
(`_fs.overwrite_checked`: no fsync, no new inode; a torn write reads as absent).

It is a cache, never the truth: the list uses the tail or the file only while its stamp
is the history's, and otherwise reads the history once and writes the file again, so a
list costs one or two small files per session, whatever the length of its history, and
a turn costs nothing more.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from agentkeel import _fs
from agentkeel.messages import JSONObject

__all__ = ["SUMMARY_FILE", "Summary", "read_summary", "write_summary"]

SUMMARY_FILE = "summary.cache"
_LABEL = "agentkeel-summary-1"


@dataclass(frozen=True, slots=True)
class Summary:
    """The listing fields of one session's history at one stamp of messages.jsonl."""

    stamp: tuple[int, int, int]
    title: str
    """The first user message's text, uncut ("" when there is none)."""
    shown: int
    """How many messages the transcript shows."""
    messages: int
    """How many messages the history holds."""
    updated_at: float
    """The last commit's time."""


def read_summary(folder: Path, stamp: tuple[int, int, int] | None) -> Summary | None:
    """The folder's summary if it describes messages.jsonl at `stamp`, else None."""
    if stamp is None:
        return None
    raw = _fs.read_checked(folder / SUMMARY_FILE, _LABEL)
    if raw is None:
        return None
    try:
        data = json.loads(raw)
        found = Summary(
            stamp=(int(data["stamp"][0]), int(data["stamp"][1]), int(data["stamp"][2])),
            title=str(data["title"]),
            shown=int(data["shown"]),
            messages=int(data["messages"]),
            updated_at=float(data["updated_at"]),
        )
    except (ValueError, KeyError, TypeError, IndexError):
        return None
    return found if found.stamp == stamp else None


def write_summary(folder: Path, summary: Summary) -> None:
    """Replace the folder's summary (a cache: nothing is fsynced)."""
    data: JSONObject = {
        "stamp": list(summary.stamp),
        "title": summary.title,
        "shown": summary.shown,
        "messages": summary.messages,
        "updated_at": summary.updated_at,
    }
    _fs.overwrite_checked(folder / SUMMARY_FILE, _fs.dumps_json(data), _LABEL)
