"""FileMemoryStore: memories in files under the session folder's root, crash-safe.

Layout (segments encoded with `ids.encode_path_segment`, so no principal or agent name
can point outside the root)::

    <root>/<principal>/shared/memory.jsonl          the principal's memory for all agents
    <root>/<principal>/agent-<definition>/memory.jsonl   one agent's, when scoped by agent

``memory.jsonl`` is a log: one line per write, ``{"op": "put", "items": [...]}`` or
``{"op": "del", "namespace", "key"}``, appended in one fsynced write through `_fs`. A
batch of puts is one line, so it is stored whole or not at all; a process killed in
the middle of an append leaves a torn last line, which the next open drops (and cuts
off). When the log holds more than twice as many lines as the scope has items, it is
compacted into one snapshot line by an atomic replace. Deleting a scope removes its
folder (and the principal's, once empty), so nothing of it stays on disk.

The folder belongs to one process: a scope is read once and then served from memory.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import anyio

from agentkeel import _fs
from agentkeel.ids import encode_path_segment
from agentkeel.memory._index import ScopeIndex, check_limit
from agentkeel.memory.codec import item_from_json, item_to_json
from agentkeel.memory.records import (
    MemoryItem,
    MemoryMatch,
    MemoryPage,
    MemoryScope,
    Vector,
    validate_key,
    validate_namespace,
)
from agentkeel.messages import JSONObject

__all__ = ["MEMORY_FOLDER", "FileMemoryStore"]

MEMORY_FOLDER = ".memory"
"""The folder under a session folder that holds memories. Encoded ids never start with
a dot, so no session or principal folder can have this name."""

_LOG = "memory.jsonl"
_COMPACT_MIN_LINES = 64


class _Scope:
    """One scope's index and the bookkeeping of its log."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.index = ScopeIndex()
        self.lines = 0


class FileMemoryStore:
    """Memories in an append-only log per scope under `root`.

    Args:
        root: The folder to keep memories in (``<sessionDir>/.memory`` from
            framework.json's ``"store": "file"``).
    """

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self._scopes: dict[MemoryScope, _Scope] = {}
        self._lock = anyio.Lock()

    def folder(self, scope: MemoryScope) -> Path:
        """The folder of `scope`: never outside `root`, whatever the names hold."""
        principal = encode_path_segment(scope.principal)
        leaf = "shared" if scope.agent is None else f"agent-{encode_path_segment(scope.agent)}"
        return self.root / principal / leaf

    async def put(self, scope: MemoryScope, items: Sequence[MemoryItem]) -> None:
        """Append `items` as one line (all or none), then index them."""
        for item in items:
            validate_namespace(item.namespace)
            validate_key(item.key)
        if not items:
            return
        async with self._lock:
            state = await self._open(scope)
            state.index.check(items)
            line: JSONObject = {"op": "put", "items": [item_to_json(i) for i in items]}
            await anyio.to_thread.run_sync(self._append, state, line)
            state.index.put(items)
            await anyio.to_thread.run_sync(self._maybe_compact, state)

    async def get(self, scope: MemoryScope, namespace: str, key: str) -> MemoryItem | None:
        """The item under `key`, or None."""
        async with self._lock:
            state = await self._open(scope)
        return state.index.items.get((namespace, key))

    async def search(
        self,
        scope: MemoryScope,
        vector: Vector,
        *,
        model: str,
        namespace: str | None = None,
        limit: int = 5,
    ) -> list[MemoryMatch]:
        """Exact cosine search over the scope's items."""
        check_limit(limit)
        async with self._lock:
            state = await self._open(scope)
        return state.index.search(vector, model=model, namespace=namespace, limit=limit)

    async def delete(
        self, scope: MemoryScope, namespace: str | None = None, key: str | None = None
    ) -> int:
        """Delete one item or a namespace (a log line), or the whole scope (its folder)."""
        async with self._lock:
            state = await self._open(scope)
            if namespace is None:
                count = len(state.index.items)
                await anyio.to_thread.run_sync(self._remove_scope, state.folder)
                del self._scopes[scope]
                return count
            gone = state.index.remove(namespace, key)
            if gone:
                line: JSONObject = {"op": "del", "namespace": namespace, "key": key}
                await anyio.to_thread.run_sync(self._append, state, line)
                await anyio.to_thread.run_sync(self._maybe_compact, state)
            return len(gone)

    async def list(
        self,
        scope: MemoryScope,
        *,
        namespace: str | None = None,
        cursor: str | None = None,
        limit: int = 50,
    ) -> MemoryPage:
        """A page of the scope's items, most recently updated first."""
        async with self._lock:
            state = await self._open(scope)
        return state.index.page(namespace, cursor, limit)

    # -- files ----------------------------------------------------------------------------

    async def _open(self, scope: MemoryScope) -> _Scope:
        state = self._scopes.get(scope)
        if state is None:
            state = await anyio.to_thread.run_sync(self._load, self.folder(scope))
            self._scopes[scope] = state
        return state

    def _load(self, folder: Path) -> _Scope:
        state = _Scope(folder)
        path = folder / _LOG
        raw = _fs.read_bytes(path)
        if raw is None:
            return state
        _fs.sweep_temp_files(folder)
        good = raw.rfind(b"\n") + 1
        if good < len(raw):  # a torn append: the process died in the middle of it
            _fs.truncate(path, good)
        for number, line in enumerate(raw[:good].splitlines(), start=1):
            try:
                self._apply(state.index, json.loads(line))
            except (ValueError, KeyError, TypeError) as exc:
                raise _fs.corrupt(path, f"line {number} is not a memory record ({exc})") from exc
            state.lines += 1
        return state

    @staticmethod
    def _apply(index: ScopeIndex, record: JSONObject) -> None:
        if record["op"] == "put":
            batch = record["items"]
            if not isinstance(batch, list):
                raise ValueError("items is not a list")
            index.put([item_from_json(i) for i in batch if isinstance(i, dict)])
        elif record["op"] == "del":
            namespace, key = record["namespace"], record.get("key")
            if not isinstance(namespace, str) or not isinstance(key, str | None):
                raise ValueError("a delete names a namespace and an optional key")
            index.remove(namespace, key)
        else:
            raise ValueError(f"unknown op {record['op']!r}")

    def _append(self, state: _Scope, record: JSONObject) -> None:
        _fs.ensure_dir(state.folder)
        _fs.append_lines(state.folder / _LOG, [_fs.dumps_json(record)])
        state.lines += 1

    @staticmethod
    def _maybe_compact(state: _Scope) -> None:
        """Rewrite a log mostly of dead lines as one snapshot (atomic: old or new)."""
        if state.lines <= _COMPACT_MIN_LINES or state.lines <= 2 * len(state.index.items):
            return
        items = list(state.index.items.values())
        snapshot: JSONObject = {"op": "put", "items": [item_to_json(i) for i in items]}
        lines = [_fs.dumps_json(snapshot)] if items else []
        _fs.atomic_write_bytes(state.folder / _LOG, b"".join(x + b"\n" for x in lines))
        state.lines = len(lines)

    def _remove_scope(self, folder: Path) -> None:
        _fs.remove_tree(folder)
        principal = folder.parent
        try:
            empty = not any(principal.iterdir())
        except FileNotFoundError:
            return
        if empty:
            _fs.remove_tree(principal)
