"""``"coordination": "postgresql://…"``: everything replicas share, in PostgreSQL alone.

For a deployment without Redis: the lease with its fencing token, the live frames
(batched, one NOTIFY per batch) and the Idempotency-Key claims all live in tables of
one schema, by default the storage's own (``?schema=`` picks another; the lease must
stay in the database whose storage checks its fence). ``lease`` (a duration, default
``15s``) is how long a turn's lease lasts unrenewed. The storage URL can be reused as
it is: its ``pool_size`` is ignored and its ``prepare_threshold`` kept.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from agentkeel.runtime.coordination import Coordination
from agentkeel.runtime.job_claims import RunJobClaims
from agentkeel.runtime.pg_claims import PgClaimTable
from agentkeel.runtime.pg_fanout import PgStreams
from agentkeel.runtime.pg_lease import PostgresRunLease
from agentkeel.runtime.redis_coordination import coordination_parameters, lease_seconds
from agentkeel.runtime.shared_claims import SharedClaims
from agentkeel.server_settings import Retention
from agentkeel.storage.base import SessionStorage
from agentkeel.storage.postgres_pool import PostgresPool

__all__ = ["from_url"]


def from_url(url: str, storage: SessionStorage, retention: Retention) -> Coordination[Any]:
    """The coordination a ``postgresql://`` URL names (the registry's factory)."""
    dsn, ours = coordination_parameters(url)
    parts = urlsplit(dsn)
    query = dict(parse_qsl(parts.query))
    schema = query.pop("schema", None) or str(getattr(storage, "schema", "agentkeel"))
    query.pop("pool_size", None)  # the storage URL's own parameters, when it is reused
    threshold = query.pop("prepare_threshold", "5").lower()
    prepare = None if threshold in ("none", "") else int(threshold) if threshold.isdigit() else 5
    dsn = parts._replace(query=urlencode(query)).geturl()
    fanout_pool = PostgresPool(dsn, schema=schema, pool_size=4, prepare_threshold=prepare)
    fanout = PgStreams(fanout_pool, storage, retention.events)
    table = PgClaimTable(fanout_pool)
    return Coordination(
        lease=PostgresRunLease(
            PostgresPool(dsn, schema=schema, pool_size=4, prepare_threshold=prepare)
        ),
        fanout=fanout,
        idempotency=SharedClaims(table, RunJobClaims(fanout), retention.events or 86_400.0),
        lease_ttl=lease_seconds(url, ours),
        fenced=True,
    )
