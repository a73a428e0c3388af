"""MemoryStore: the one Protocol every memory backend implements.

The store keeps items and their vectors and searches by vector; it never embeds (the
`Memory` front does, so every backend gets the same embedder rules). Every method takes
the scope first, and a backend never lets one scope see another's items. The behaviour
is pinned by the conformance suite in `agentkeel.testing.memory_store`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from agentkeel.memory.records import MemoryItem, MemoryMatch, MemoryPage, MemoryScope, Vector

__all__ = ["MemoryStore", "MemoryStoreLifecycle"]


@runtime_checkable
class MemoryStore(Protocol):
    """Where a principal's memories live, searched by meaning."""

    async def put(self, scope: MemoryScope, items: Sequence[MemoryItem]) -> None:
        """Store `items` (replacing any with the same namespace and key) all or none.

        Raises:
            EmbeddingMismatchError: An item's model or dimension differs from the
                vectors already stored in `scope` (or from another item of the batch).
        """
        ...

    async def get(self, scope: MemoryScope, namespace: str, key: str) -> MemoryItem | None:
        """The item under `key`, or None."""
        ...

    async def search(
        self,
        scope: MemoryScope,
        vector: Vector,
        *,
        model: str,
        namespace: str | None = None,
        limit: int = 5,
    ) -> list[MemoryMatch]:
        """The `limit` items most similar to `vector`, best first (ties: newest first).

        Raises:
            EmbeddingMismatchError: `model` or the vector's dimension is not the scope's.
        """
        ...

    async def delete(
        self, scope: MemoryScope, namespace: str | None = None, key: str | None = None
    ) -> int:
        """Delete one item, a namespace (``key=None``) or the whole scope (both None).

        Deleting the whole scope leaves nothing of it in the backend. Returns how many
        items went.
        """
        ...

    async def list(
        self,
        scope: MemoryScope,
        *,
        namespace: str | None = None,
        cursor: str | None = None,
        limit: int = 50,
    ) -> MemoryPage:
        """A page of items, most recently updated first.

        Raises:
            InvalidMemoryKeyError: The cursor is not one this store handed out.
        """
        ...


@runtime_checkable
class MemoryStoreLifecycle(Protocol):
    """Optional: a store that holds connections, opened and closed by the server.

    The server's lifespan opens it after the session storage (so on the loop that will
    use it) and closes it at shutdown; the in-process and file stores need neither.
    """

    async def open(self) -> None:
        """Connect (and migrate) before the first request."""
        ...

    async def close(self) -> None:
        """Release what `open` took."""
        ...
