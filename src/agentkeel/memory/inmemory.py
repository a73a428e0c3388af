"""InMemoryMemoryStore: the reference backend, kept in this process only.

Everything is lost on restart; use it for tests and for agents whose memory may be.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio

from agentkeel.memory._index import ScopeIndex, check_limit
from agentkeel.memory.records import (
    MemoryItem,
    MemoryMatch,
    MemoryPage,
    MemoryScope,
    Vector,
    validate_key,
    validate_namespace,
)

__all__ = ["InMemoryMemoryStore"]


class InMemoryMemoryStore:
    """Memories in a dict per scope; exact vector search with numpy."""

    def __init__(self) -> None:
        self._scopes: dict[MemoryScope, ScopeIndex] = {}
        self._lock = anyio.Lock()

    async def put(self, scope: MemoryScope, items: Sequence[MemoryItem]) -> None:
        """Store `items`, all or none (see `MemoryStore.put`)."""
        for item in items:
            validate_namespace(item.namespace)
            validate_key(item.key)
        async with self._lock:
            index = self._scopes.get(scope) or ScopeIndex()
            index.check(items)
            index.put(items)
            if index.items:
                self._scopes[scope] = index

    async def get(self, scope: MemoryScope, namespace: str, key: str) -> MemoryItem | None:
        """The item under `key`, or None."""
        index = self._scopes.get(scope)
        return None if index is None else index.items.get((namespace, key))

    async def search(
        self,
        scope: MemoryScope,
        vector: Vector,
        *,
        model: str,
        namespace: str | None = None,
        limit: int = 5,
    ) -> list[MemoryMatch]:
        """Exact cosine search in `scope`."""
        check_limit(limit)
        index = self._scopes.get(scope)
        if index is None:
            return []
        return index.search(vector, model=model, namespace=namespace, limit=limit)

    async def delete(
        self, scope: MemoryScope, namespace: str | None = None, key: str | None = None
    ) -> int:
        """Delete one item, a namespace or the whole scope."""
        async with self._lock:
            index = self._scopes.get(scope)
            if index is None:
                return 0
            gone = index.remove(namespace, key)
            if not index.items:
                del self._scopes[scope]
            return len(gone)

    async def list(
        self,
        scope: MemoryScope,
        *,
        namespace: str | None = None,
        cursor: str | None = None,
        limit: int = 50,
    ) -> MemoryPage:
        """A page of `scope`'s items, most recently updated first."""
        index = self._scopes.get(scope) or ScopeIndex()
        return index.page(namespace, cursor, limit)
