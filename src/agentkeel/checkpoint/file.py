"""FileCheckpointer: one JSON file per suspended run, so a pending interrupt survives restarts.

Layout (names go through `ids.encode_path_segment`, as for sessions)::

    <dir>/[<principal>/]<def-name>:<contextId>/<checkpointId>.json

Each file is written whole with a temp file, an fsync and a rename, so a crash leaves
the old checkpoint or the new one, never half of either. A file that cannot be decoded
raises CorruptSessionError naming it, and stays where it is for someone to look at.
Each file carries its `sequence` (one more than the highest in the folder when it was
put); `latest` is the highest. The folder goes with the thread's last checkpoint.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import anyio.to_thread

from agentkeel import _fs
from agentkeel.checkpoint.base import Checkpoint
from agentkeel.errors import StorageError
from agentkeel.ids import encode_path_segment
from agentkeel.keys import SessionKey, require_key
from agentkeel.storage.file import session_folder

__all__ = ["FileCheckpointer"]


def _read(path: Path) -> Checkpoint | None:
    data = _fs.read_json_object(path)
    if data is None:
        return None  # deleted since the folder was listed
    try:
        return Checkpoint.from_json(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise _fs.corrupt(path, f"not a checkpoint ({exc!r})") from exc


def _order(item: Checkpoint) -> tuple[int, float, str]:
    return item.sequence, item.created_at, item.id  # 0.1.0's unnumbered: by time, then id


def _latest(folder: Path) -> Checkpoint | None:
    found = [checkpoint for path in _fs.list_json_files(folder) if (checkpoint := _read(path))]
    return max(found, key=_order, default=None)


def _put(folder: Path, checkpoint: Checkpoint) -> int:
    latest = _latest(folder)
    sequence = (0 if latest is None else latest.sequence) + 1
    _fs.ensure_dir(folder)
    document = replace(checkpoint, sequence=sequence).to_json()
    _fs.atomic_write_json(folder / f"{encode_path_segment(checkpoint.id)}.json", document)
    return sequence


def _delete(folder: Path, checkpoint_id: str) -> None:
    _fs.remove_file(folder / f"{encode_path_segment(checkpoint_id)}.json")
    _fs.remove_empty_dir(folder)  # the thread's last checkpoint went (SPEC section 8)


class FileCheckpointer:
    """A Checkpointer that keeps each suspended run as a file under `directory`.

    Args:
        directory: The checkpoint folder (``checkpointer.dir``); created on the first put.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

    def path(self, key: SessionKey) -> Path:
        """The folder holding `key`'s checkpoints (it may not exist yet)."""
        return session_folder(self.directory, key)

    async def put(self, key: SessionKey, checkpoint: Checkpoint) -> int:
        """Write ``<checkpointId>.json`` atomically with the next sequence; returns it."""
        require_key(key, "put")
        try:
            return await anyio.to_thread.run_sync(_put, self.path(key), checkpoint)
        except (TypeError, ValueError) as exc:
            raise StorageError(f"checkpoint is not JSON-serializable: {exc}") from exc
        except OSError as exc:
            raise StorageError(f"checkpoint write failed: {exc}") from exc

    async def latest(self, key: SessionKey) -> Checkpoint | None:
        """The checkpoint with the highest sequence, or None."""
        require_key(key, "latest")
        try:
            return await anyio.to_thread.run_sync(_latest, self.path(key))
        except OSError as exc:
            raise StorageError(f"checkpoint read failed: {exc}") from exc

    async def delete(self, key: SessionKey, checkpoint_id: str) -> None:
        """Remove one checkpoint file, and the folder if it was the last; unknown ids pass."""
        require_key(key, "delete")
        try:
            await anyio.to_thread.run_sync(_delete, self.path(key), checkpoint_id)
        except OSError as exc:
            raise StorageError(f"checkpoint delete failed: {exc}") from exc

    async def delete_thread(self, key: SessionKey) -> None:
        """Remove the thread's folder and every checkpoint in it."""
        require_key(key, "delete_thread")
        try:
            await anyio.to_thread.run_sync(_fs.remove_tree, self.path(key))
        except OSError as exc:
            raise StorageError(f"checkpoint delete failed: {exc}") from exc
