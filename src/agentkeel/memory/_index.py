"""ScopeIndex: one scope's items with a vector matrix, shared by the in-process backends.

Search is exact: one matrix product over the scope's vectors (they are normalised, so
the product is the cosine similarity) and a partial sort for the top results. The
matrix is rebuilt lazily after writes, so a burst of puts costs one rebuild.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from datetime import datetime

import numpy as np

from agentkeel.memory.errors import EmbeddingMismatchError, InvalidMemoryKeyError
from agentkeel.memory.records import MemoryItem, MemoryMatch, MemoryPage, Vector, VectorSpace

__all__ = ["ScopeIndex", "check_limit", "cursor_position", "encode_cursor"]

_Key = tuple[str, str]


def check_limit(limit: object, *, most: int = 1000) -> int:
    """Return `limit` when it is an int from 1 to `most`."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= most:
        raise InvalidMemoryKeyError(f"limit must be an integer from 1 to {most}")
    return limit


def _order(item: MemoryItem) -> tuple[float, str, str]:
    return (-item.updated_at.timestamp(), item.namespace, item.key)


def encode_cursor(item: MemoryItem) -> str:
    """The cursor of the page that starts after `item` (opaque to callers)."""
    raw = json.dumps([item.updated_at.isoformat(), item.namespace, item.key])
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def cursor_position(cursor: str) -> tuple[datetime, str, str]:
    """The (updated_at, namespace, key) of the item a cursor follows.

    Raises:
        InvalidMemoryKeyError: The cursor is not one a store handed out.
    """
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        stamp, namespace, key = json.loads(base64.urlsafe_b64decode(padded))
        return (datetime.fromisoformat(stamp), str(namespace), str(key))
    except (ValueError, TypeError) as exc:
        raise InvalidMemoryKeyError("this cursor was not handed out by the store") from exc


def _decode_cursor(cursor: str) -> tuple[float, str, str]:
    stamp, namespace, key = cursor_position(cursor)
    return (-stamp.timestamp(), namespace, key)


class ScopeIndex:
    """The items of one scope, by (namespace, key), searchable by vector."""

    def __init__(self) -> None:
        self.items: dict[_Key, MemoryItem] = {}
        self._keys: list[_Key] = []
        self._matrix: Vector | None = None

    @property
    def space(self) -> VectorSpace | None:
        """The model and dimension of the stored vectors (None while empty)."""
        for item in self.items.values():
            return item.space
        return None

    def check(self, items: Sequence[MemoryItem]) -> None:
        """Refuse a batch whose vectors would mix models or dimensions."""
        space = self.space
        for item in items:
            if item.vector.ndim != 1 or item.vector.shape[0] == 0:
                raise EmbeddingMismatchError("a memory vector must be one non-empty row")
            if space is None:
                space = item.space
            elif item.space != space:
                raise EmbeddingMismatchError(
                    f"this memory holds vectors of {space.model!r} ({space.dimension} "
                    f"dimensions), not {item.model!r} ({item.space.dimension}); delete it or "
                    "configure the same embeddings"
                )

    def put(self, items: Sequence[MemoryItem]) -> None:
        """Insert or replace `items` (call `check` first)."""
        for item in items:
            self.items[(item.namespace, item.key)] = item
        self._matrix = None

    def remove(self, namespace: str | None, key: str | None) -> list[_Key]:
        """Drop one item, a namespace or everything; the keys that went."""
        if namespace is None:
            gone = list(self.items)
        elif key is None:
            gone = [k for k in self.items if k[0] == namespace]
        else:
            gone = [(namespace, key)] if (namespace, key) in self.items else []
        for k in gone:
            del self.items[k]
        if gone:
            self._matrix = None
        return gone

    def search(
        self, vector: Vector, *, model: str, namespace: str | None, limit: int
    ) -> list[MemoryMatch]:
        """Exact cosine search; best first, ties broken by the newest update."""
        check_limit(limit)
        space = self.space
        if space is None:
            return []
        if model != space.model or vector.shape != (space.dimension,):
            raise EmbeddingMismatchError(
                f"the query is a {model!r} vector of {vector.shape[-1]} dimensions, but this "
                f"memory holds {space.model!r} vectors of {space.dimension}"
            )
        matrix = self._build()
        scores = matrix @ vector.astype(np.float32, copy=False)
        if namespace is not None:
            mask = np.fromiter((k[0] == namespace for k in self._keys), bool, len(self._keys))
            scores = np.where(mask, scores, -np.inf)
        count = min(limit, len(self._keys))
        top = np.argpartition(-scores, count - 1)[:count] if count < len(scores) else None
        picked = range(len(scores)) if top is None else top.tolist()
        found = [
            MemoryMatch(self.items[self._keys[i]], float(scores[i]))
            for i in picked
            if scores[i] != -np.inf
        ]
        found.sort(key=lambda m: (-m.score, -m.item.updated_at.timestamp()))
        return found[:limit]

    def page(self, namespace: str | None, cursor: str | None, limit: int) -> MemoryPage:
        """Items most recently updated first, after `cursor`."""
        check_limit(limit)
        after = None if cursor is None else _decode_cursor(cursor)
        chosen = sorted(
            (
                item
                for item in self.items.values()
                if (namespace is None or item.namespace == namespace)
                and (after is None or _order(item) > after)
            ),
            key=_order,
        )
        items = tuple(chosen[:limit])
        more = len(chosen) > limit
        return MemoryPage(items, encode_cursor(items[-1]) if more and items else None)

    def _build(self) -> Vector:
        if self._matrix is None:
            self._keys = list(self.items)
            self._matrix = np.stack([self.items[k].vector for k in self._keys]).astype(
                np.float32, copy=False
            )
        return self._matrix
