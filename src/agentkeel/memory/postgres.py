"""PostgresMemoryStore: memories in the PostgreSQL database that holds the sessions.

Installed by the ``postgres`` extra. Two tables of the storage's schema (migration 4):
``memory_scopes`` (one row per principal and agent, ``agent = ''`` for the shared scope,
with a ``revision`` every write moves on) and ``memory_items`` (one row per item, its
vector a ``bytea`` of little-endian float32 and its model and dimension beside it).
Deleting a scope is one ``DELETE`` of its row; its items cascade in the same statement,
so nothing of a principal's memory stays behind.

Search is exact cosine similarity, computed in this process with numpy over the scope's
vectors: the machine's PostgreSQL may not have ``pgvector`` (Debian's
``postgresql-15-pgvector``), and a dot product per row in plain SQL costs about a
second per 10,000 items, against milliseconds in numpy. The vectors of a scope are read
once and kept, keyed by the scope's (id, revision); every search checks that pair in
the same statement that would read them again, so a write by any process is seen by
the next search of every process. A search is then two round trips: that check, and
the full rows of the best matches (re-scored with the vectors read, so a score always
belongs to the item returned). docs/memory.md says why and what it costs.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np

from agentkeel.errors import ConfigurationError
from agentkeel.memory._index import check_limit, cursor_position, encode_cursor
from agentkeel.memory.errors import EmbeddingMismatchError, InvalidMemoryKeyError
from agentkeel.memory.records import (
    MemoryItem,
    MemoryMatch,
    MemoryPage,
    MemoryScope,
    MemorySource,
    Vector,
    VectorSpace,
    validate_key,
    validate_namespace,
)
from agentkeel.messages import JSONValue
from agentkeel.storage.postgres_pool import PostgresPool, Row, from_text_key, text_key

__all__ = ["PostgresMemoryStore", "memory_store_from_url"]

_FLOAT32 = np.dtype("<f4")
_CACHED_SCOPES = 64
_COLUMNS = (
    "i.namespace, i.key, i.text, i.value::text, i.created_at, i.updated_at, i.context_id,"
    " i.source_agent, i.run_id, i.model, i.vector"
)
_SCOPE = "s.principal = %(p)s AND s.agent = %(a)s"


@dataclass(frozen=True, slots=True)
class _Vectors:
    """One scope's vectors as read at (scope id, revision)."""

    scope_id: int
    revision: int
    keys: list[tuple[str, str]]
    matrix: Vector
    space: VectorSpace | None


def _who(scope: MemoryScope) -> dict[str, str]:
    return {"p": text_key(scope.principal), "a": text_key(scope.agent or "")}


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _item(row: Row) -> MemoryItem:
    namespace, key, text, value, created, updated, context, agent, run, model, vector = row
    return MemoryItem(
        namespace=namespace,
        key=key,
        text=from_text_key(text),
        value=None if value is None else json.loads(value),
        created_at=created,
        updated_at=updated,
        source=MemorySource(
            context_id=None if context is None else from_text_key(context),
            agent=None if agent is None else from_text_key(agent),
            run_id=None if run is None else from_text_key(run),
        ),
        model=model,
        vector=np.frombuffer(bytes(vector), dtype=_FLOAT32).astype(np.float32),
    )


def _json(value: JSONValue) -> str:
    """`value` as a json column takes it (NUL escaped by JSON itself; NaN refused)."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError as exc:
        raise InvalidMemoryKeyError(f"a memory's value must be JSON: {exc}") from None


def _optional(value: str | None) -> str | None:
    return None if value is None else text_key(value)


class PostgresMemoryStore(PostgresPool):
    """A MemoryStore in PostgreSQL, exact search in numpy (see the module docstring).

    Build it with `memory_store_from_url`, or `over` an open PostgresStorage to share
    its pool (framework.json does when ``memory.store`` is ``"postgresql"``). A store
    of its own opens its pool in `open` (the server's lifespan calls it).
    """

    @classmethod
    def over(cls, pool: PostgresPool) -> PostgresMemoryStore:
        """A store on `pool`'s connections and schema (it opens and closes them)."""
        store = cls(pool.dsn, schema=pool.schema, pool_size=pool.pool_size)
        store._owner = pool
        return store

    def __init__(self, dsn: str, **options: Any) -> None:
        super().__init__(dsn, **options)
        self._cache: OrderedDict[MemoryScope, _Vectors] = OrderedDict()

    async def put(self, scope: MemoryScope, items: Sequence[MemoryItem]) -> None:
        """Store `items` in one transaction, all or none (see `MemoryStore.put`)."""
        batch: dict[tuple[str, str], MemoryItem] = {}
        for item in items:
            batch[(validate_namespace(item.namespace), validate_key(item.key))] = item
        if not batch:
            return
        space = self._batch_space(list(batch.values()))
        rows = list(batch.values())
        async with self._connection() as conn, conn.transaction():
            cursor = await conn.execute(
                self._sql(
                    "INSERT INTO {s}.memory_scopes (principal, agent) VALUES (%(p)s, %(a)s)"
                    " ON CONFLICT (principal, agent) DO UPDATE"
                    " SET revision = {s}.memory_scopes.revision + 1"
                    " RETURNING id, (SELECT array[i.model, i.dimension::text]"
                    "   FROM {s}.memory_items i WHERE i.scope_id = {s}.memory_scopes.id"
                    "   LIMIT 1)"
                ),
                _who(scope),
            )
            found = await cursor.fetchone()
            assert found is not None
            scope_id, stored = found
            if stored is not None and VectorSpace(stored[0], int(stored[1])) != space:
                stored_space = VectorSpace(stored[0], int(stored[1]))
                raise EmbeddingMismatchError(_mismatch(stored_space, space))
            await conn.execute(
                self._sql(
                    "INSERT INTO {s}.memory_items (scope_id, namespace, key, text, value,"
                    " created_at, updated_at, context_id, source_agent, run_id, model,"
                    " dimension, vector)"
                    " SELECT %s, n.ns, n.k, n.t, n.val, n.c, n.u, n.ctx, n.ag, n.run, %s, %s, n.v"
                    " FROM unnest(%s::text[], %s::text[], %s::text[], %s::json[],"
                    "  %s::timestamptz[], %s::timestamptz[], %s::text[], %s::text[],"
                    "  %s::text[], %s::bytea[]) AS n(ns, k, t, val, c, u, ctx, ag, run, v)"
                    " ON CONFLICT (scope_id, namespace, key) DO UPDATE SET"
                    " text = EXCLUDED.text, value = EXCLUDED.value,"
                    " created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at,"
                    " context_id = EXCLUDED.context_id, source_agent = EXCLUDED.source_agent,"
                    " run_id = EXCLUDED.run_id, model = EXCLUDED.model,"
                    " dimension = EXCLUDED.dimension, vector = EXCLUDED.vector"
                ),
                (
                    scope_id,
                    space.model,
                    space.dimension,
                    [i.namespace for i in rows],
                    [i.key for i in rows],
                    [text_key(i.text) for i in rows],
                    [_json(i.value) for i in rows],
                    [_aware(i.created_at) for i in rows],
                    [_aware(i.updated_at) for i in rows],
                    [_optional(i.source.context_id) for i in rows],
                    [_optional(i.source.agent) for i in rows],
                    [_optional(i.source.run_id) for i in rows],
                    [i.vector.astype(_FLOAT32).tobytes() for i in rows],
                ),
            )

    @staticmethod
    def _batch_space(items: Sequence[MemoryItem]) -> VectorSpace:
        space = None
        for item in items:
            if item.vector.ndim != 1 or item.vector.shape[0] == 0:
                raise EmbeddingMismatchError("a memory vector must be one non-empty row")
            if space is None:
                space = item.space
            elif item.space != space:
                raise EmbeddingMismatchError(_mismatch(space, item.space))
        assert space is not None
        return space

    async def get(self, scope: MemoryScope, namespace: str, key: str) -> MemoryItem | None:
        """The item under `key`, or None."""
        row = await self._one(
            f"SELECT {_COLUMNS} FROM {{s}}.memory_items i"
            " JOIN {s}.memory_scopes s ON s.id = i.scope_id"
            f" WHERE {_SCOPE} AND i.namespace = %(ns)s AND i.key = %(k)s",
            {**_who(scope), "ns": namespace, "k": key},
        )
        return None if row is None else _item(row)

    async def search(
        self,
        scope: MemoryScope,
        vector: Vector,
        *,
        model: str,
        namespace: str | None = None,
        limit: int = 5,
    ) -> list[MemoryMatch]:
        """Exact cosine search over the scope's vectors (two round trips when cached)."""
        check_limit(limit)
        vectors = await self._vectors(scope)
        if vectors is None or vectors.space is None:
            return []
        space = vectors.space
        if model != space.model or vector.shape != (space.dimension,):
            raise EmbeddingMismatchError(
                f"the query is a {model!r} vector of {vector.shape[-1]} dimensions, but this "
                f"memory holds {space.model!r} vectors of {space.dimension}"
            )
        query = vector.astype(np.float32, copy=False)
        scores = vectors.matrix @ query
        if namespace is not None:
            mask = np.fromiter((k[0] == namespace for k in vectors.keys), bool, len(vectors.keys))
            scores = np.where(mask, scores, -np.inf)
        count = min(limit, len(scores))
        top = np.argpartition(-scores, count - 1)[:count] if count < len(scores) else None
        chosen = np.arange(len(scores)) if top is None else top
        picked = [vectors.keys[i] for i in chosen.tolist() if scores[i] != -np.inf]
        if not picked:
            return []
        rows = await self._all(
            f"SELECT {_COLUMNS} FROM {{s}}.memory_items i"
            " WHERE i.scope_id = %s AND (i.namespace, i.key) IN"
            " (SELECT * FROM unnest(%s::text[], %s::text[]))",
            (vectors.scope_id, [k[0] for k in picked], [k[1] for k in picked]),
        )
        items = [_item(row) for row in rows]
        found = [
            MemoryMatch(item, float(item.vector @ query)) for item in items if item.space == space
        ]
        found.sort(key=lambda m: (-m.score, -m.item.updated_at.timestamp()))
        return found[:limit]

    async def _vectors(self, scope: MemoryScope) -> _Vectors | None:
        """The scope's vectors: the cached ones when (id, revision) still match."""
        known = self._cache.get(scope)
        async with self._connection() as conn:
            cursor = conn.cursor(binary=True)
            await cursor.execute(
                self._sql(
                    "SELECT s.id, s.revision, i.namespace, i.key, i.model, i.vector"
                    # the scope id only when the cached revision is stale: NULL finds no
                    # row in the index, so a current cache costs one indexed read
                    " FROM {s}.memory_scopes s LEFT JOIN {s}.memory_items i"
                    "  ON i.scope_id = CASE WHEN (s.id, s.revision) IS DISTINCT FROM"
                    "   (%(id)s::bigint, %(rev)s::bigint) THEN s.id END"
                    f" WHERE {_SCOPE}"
                ),
                {
                    **_who(scope),
                    "id": None if known is None else known.scope_id,
                    "rev": None if known is None else known.revision,
                },
            )
            rows = await cursor.fetchall()
        if not rows:
            self._cache.pop(scope, None)
            return None
        scope_id, revision = int(rows[0][0]), int(rows[0][1])
        if known is not None and (known.scope_id, known.revision) == (scope_id, revision):
            self._cache.move_to_end(scope)
            return known
        vectors = _read(scope_id, revision, [row for row in rows if row[2] is not None])
        self._cache[scope] = vectors
        while len(self._cache) > _CACHED_SCOPES:
            self._cache.popitem(last=False)
        return vectors

    async def delete(
        self, scope: MemoryScope, namespace: str | None = None, key: str | None = None
    ) -> int:
        """Delete one item or a namespace, or the whole scope (its row and every item)."""
        if namespace is None:
            row = await self._one(
                "DELETE FROM {s}.memory_scopes s"
                f" WHERE {_SCOPE} RETURNING (SELECT count(*) FROM {{s}}.memory_items i"
                " WHERE i.scope_id = s.id)",
                _who(scope),
            )
            self._cache.pop(scope, None)
            return 0 if row is None else int(row[0])
        row = await self._one(
            "WITH s AS (UPDATE {s}.memory_scopes s SET revision = s.revision + 1"
            f"  WHERE {_SCOPE} RETURNING id),"
            " gone AS (DELETE FROM {s}.memory_items i USING s WHERE i.scope_id = s.id"
            "  AND i.namespace = %(ns)s AND (%(k)s::text IS NULL OR i.key = %(k)s::text)"
            "  RETURNING 1)"
            " SELECT count(*) FROM gone",
            {**_who(scope), "ns": namespace, "k": key},
        )
        return 0 if row is None else int(row[0])

    async def list(
        self,
        scope: MemoryScope,
        *,
        namespace: str | None = None,
        cursor: str | None = None,
        limit: int = 50,
    ) -> MemoryPage:
        """A page of the scope's items, most recently updated first (one statement)."""
        check_limit(limit)
        after = None if cursor is None else cursor_position(cursor)
        rows = await self._all(
            f"SELECT {_COLUMNS} FROM {{s}}.memory_items i"
            " JOIN {s}.memory_scopes s ON s.id = i.scope_id"
            f" WHERE {_SCOPE} AND (%(ns)s::text IS NULL OR i.namespace = %(ns)s::text)"
            " AND (%(at)s::timestamptz IS NULL OR i.updated_at < %(at)s::timestamptz"
            "  OR (i.updated_at = %(at)s::timestamptz"
            '   AND (i.namespace COLLATE "C", i.key COLLATE "C") > (%(an)s, %(ak)s)))'
            ' ORDER BY i.updated_at DESC, i.namespace COLLATE "C", i.key COLLATE "C"'
            " LIMIT %(n)s",
            {
                **_who(scope),
                "ns": namespace,
                "at": None if after is None else _aware(after[0]),
                "an": None if after is None else after[1],
                "ak": None if after is None else after[2],
                "n": limit + 1,
            },
        )
        items = tuple(_item(row) for row in rows[:limit])
        more = len(rows) > limit
        return MemoryPage(items, encode_cursor(items[-1]) if more and items else None)


def _read(scope_id: int, revision: int, rows: Sequence[Row]) -> _Vectors:
    """The vectors of `rows` (id, revision, namespace, key, model, vector) as one matrix."""
    if not rows:
        return _Vectors(scope_id, revision, [], np.zeros((0, 0), np.float32), None)
    model = rows[0][4]
    raw = [bytes(row[5]) for row in rows]
    dimension = len(raw[0]) // _FLOAT32.itemsize
    matrix = np.frombuffer(b"".join(raw), dtype=_FLOAT32).reshape(len(rows), dimension)
    return _Vectors(
        scope_id,
        revision,
        [(row[2], row[3]) for row in rows],
        matrix.astype(np.float32),
        VectorSpace(model, dimension),
    )


def _mismatch(stored: VectorSpace, given: VectorSpace) -> str:
    return (
        f"this memory holds vectors of {stored.model!r} ({stored.dimension} dimensions), not "
        f"{given.model!r} ({given.dimension}); delete it or configure the same embeddings"
    )


def memory_store_from_url(url: str) -> PostgresMemoryStore:
    """The store a ``postgresql://`` URL names, with a pool of its own.

    The URL takes the storage URL's parameters: ``schema``, ``prepare_threshold`` and
    ``pool_size``.

    Raises:
        ConfigurationError: A parameter that is not valid.
    """
    from agentkeel.storage.postgres import from_url

    try:
        storage = from_url(url, None)
    except ConfigurationError as exc:
        raise ConfigurationError(f"memory.store: {exc.message}") from None
    return PostgresMemoryStore(
        storage.dsn,
        schema=storage.schema,
        prepare_threshold=storage.prepare_threshold,
        pool_size=storage.pool_size,
    )
