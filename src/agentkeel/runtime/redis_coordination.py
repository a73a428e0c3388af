"""``"coordination": "redis://…"``: frames and Idempotency-Keys in Redis, the lease in PostgreSQL.

Redis carries what is live and many (every streamed frame, every claim); the lease and
its fencing token stay in the storage's PostgreSQL database, where each commit checks
them (a lease in Redis alone could not stop a paused holder's commit). Cancels reach
the holder through the lease's channel.

URL parameters (removed before the URL reaches Redis): ``prefix`` (default
``agentkeel:``) put before every key, and ``lease`` (a duration, default ``15s``) that
a turn's lease lasts unrenewed: how soon another replica takes over the contexts of
one that died.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from agentkeel.errors import ConfigurationError
from agentkeel.framework_schema import parse_duration
from agentkeel.runtime.coordination import Coordination
from agentkeel.runtime.job_claims import RunJobClaims
from agentkeel.runtime.pg_lease import DEFAULT_LEASE_SECONDS, PostgresRunLease
from agentkeel.runtime.redis_claims import RedisClaimTable
from agentkeel.runtime.redis_fanout import RedisStreams
from agentkeel.runtime.redis_quotas import RedisLimitCounters
from agentkeel.runtime.shared_claims import SharedClaims
from agentkeel.server_settings import Retention
from agentkeel.storage.base import SessionStorage
from agentkeel.storage.postgres_pool import PostgresPool, redact

__all__ = ["coordination_parameters", "from_url", "lease_pool"]

_OWN = ("prefix", "lease")


def coordination_parameters(url: str) -> tuple[str, dict[str, str]]:
    """`url` without agentkeel's parameters, and those parameters."""
    parts = urlsplit(url)
    ours: dict[str, str] = {}
    theirs: list[tuple[str, str]] = []
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        (ours.__setitem__(name, value) if name in _OWN else theirs.append((name, value)))
    return urlunsplit(parts._replace(query=urlencode(theirs))), ours


def lease_seconds(url: str, ours: dict[str, str]) -> float:
    """The ``lease`` parameter in seconds (default 15)."""
    try:
        seconds = parse_duration(ours.get("lease"))
    except ValueError as exc:
        raise ConfigurationError(f"coordination {redact(url)}: lease: {exc}") from None
    return DEFAULT_LEASE_SECONDS if seconds is None else max(0.5, seconds)


def lease_pool(storage: SessionStorage) -> PostgresPool:
    """A small pool of the lease's own on the storage's database and schema."""
    dsn, schema = getattr(storage, "dsn", None), getattr(storage, "schema", None)
    if not isinstance(dsn, str) or not isinstance(schema, str):
        raise ConfigurationError("a shared coordination needs 'storage': 'postgresql://…'")
    threshold = getattr(storage, "prepare_threshold", 5)
    return PostgresPool(dsn, schema=schema, pool_size=4, prepare_threshold=threshold)


def from_url(url: str, storage: SessionStorage, retention: Retention) -> Coordination[Any]:
    """The coordination a ``redis://`` URL names (the registry's factory)."""
    redis_url, ours = coordination_parameters(url)
    prefix = ours.get("prefix", "agentkeel:")
    fanout = RedisStreams(redis_url, storage, retention.events, prefix=prefix)
    table = RedisClaimTable(lambda: fanout.redis, prefix=prefix)
    claims = SharedClaims(table, RunJobClaims(fanout), retention.events or 86_400.0)
    return Coordination(
        lease=PostgresRunLease(lease_pool(storage)),
        fanout=fanout,
        idempotency=claims,
        lease_ttl=lease_seconds(url, ours),
        fenced=True,
        limits=RedisLimitCounters(lambda: fanout.redis, prefix=prefix),
    )
