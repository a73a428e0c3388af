"""Coordinations by URL: framework.json's ``coordination`` key, imported only when asked for.

``null`` keeps everything in this process (one server). ``redis://…`` (or
``rediss://…``) shares the live frames and idempotency keys through Redis;
``postgresql://…`` shares them through PostgreSQL alone. Either way the lease (and its
fencing token) lives in the storage's PostgreSQL database, where every commit checks
it, so a distributed coordination needs ``"storage": "postgresql://…"``: files and
memory belong to one process, and are refused at start naming both keys.

Like `agentkeel.storage.registry`, a backend's module is imported on first use, and a
missing driver is a ConfigurationError naming the extra to install.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import replace
from typing import Any

from agentkeel.errors import ConfigurationError
from agentkeel.runtime.coordination import Coordination, in_process_coordination
from agentkeel.runtime.limits_registry import open_limit_counters
from agentkeel.server_settings import Retention
from agentkeel.storage.base import SessionStorage
from agentkeel.storage.configured import EnvReference, scheme_url
from agentkeel.storage.registry import Backend

__all__ = [
    "coordination_health",
    "coordination_running",
    "coordination_url",
    "open_coordination",
    "register_coordination",
]

_BACKENDS: dict[str, Backend] = {
    "redis": Backend("agentkeel.runtime.redis_coordination:from_url", "redis"),
    "rediss": Backend("agentkeel.runtime.redis_coordination:from_url", "redis"),
    "postgresql": Backend("agentkeel.runtime.pg_coordination:from_url", "postgres"),
    "postgres": Backend("agentkeel.runtime.pg_coordination:from_url", "postgres"),
}

Factory = Callable[[str, SessionStorage, Retention], Coordination[Any]]
"""A backend's factory: (URL, the storage it shares the lease's database with, retention)."""


def register_coordination(scheme: str, backend: Backend) -> None:
    """Make `scheme` URLs open `backend` (a third-party coordination plugs in here)."""
    _BACKENDS[scheme.lower()] = backend


def coordination_url(
    value: str | EnvReference | None,
    storage: SessionStorage,
    refuse: Callable[[str, str], ConfigurationError],
) -> str | None:
    """framework.json's ``coordination`` as a URL, checked against its storage at load.

    Raises (through `refuse`, which names the file): an unset variable, an unknown
    scheme, or a storage that one process keeps to itself.
    """
    if value is None:
        return None
    url, scheme = scheme_url(value, "coordination", _BACKENDS, refuse)
    if not _shared(storage):
        raise refuse(
            "coordination",
            f"a {scheme} coordination shares contexts between server processes, but "
            f"storage is {type(storage).__name__}, which one process keeps to itself "
            "(sessionDir, a file: or memory: storage); set storage to 'postgresql://…' "
            "or remove coordination",
        )
    return url


def _shared(storage: SessionStorage) -> bool:
    """Whether replicas can share `storage` (a database: it names a DSN and a schema)."""
    return isinstance(getattr(storage, "dsn", None), str) and hasattr(storage, "schema")


def open_coordination(
    url: str | None, storage: SessionStorage, retention: Retention, *, limits: str | None = None
) -> Coordination[Any]:
    """The coordination `url` names (in this process for None); not connected yet.

    `limits` is ``server.limits.counters``: where the limits count, when not in the
    coordination's own backend (`agentkeel.runtime.limits_registry`).

    Raises:
        ConfigurationError: The backend's driver is not installed (with the pip line).
    """
    coordination: Coordination[Any]
    if url is None:
        coordination = in_process_coordination(storage, retention=retention.events)
    else:
        scheme = url.partition(":")[0].lower()
        factory: Factory = _BACKENDS[scheme].load(f"coordination backend {scheme!r}")
        coordination = factory(url, storage, retention)
    if limits is None:
        return coordination
    return replace(coordination, limits=open_limit_counters(limits))


@asynccontextmanager
async def coordination_running(coordination: Coordination[Any]) -> AsyncIterator[None]:
    """Connect every part that connects (``running()``), and close them on exit."""
    async with AsyncExitStack() as stack:
        seen: set[int] = set()
        parts = (coordination.lease, coordination.fanout, coordination.idempotency)
        for part in (*parts, coordination.limits):
            running = getattr(part, "running", None)
            if callable(running) and id(part) not in seen:
                seen.add(id(part))
                await stack.enter_async_context(running())
        yield


async def coordination_health(coordination: Coordination[Any]) -> dict[str, str]:
    """What is degraded in the coordination now, by part (empty: nothing)."""
    found: dict[str, str] = {}
    for name in ("lease", "fanout", "idempotency", "limits"):
        health = getattr(getattr(coordination, name), "health", None)
        if callable(health):
            try:
                detail = await health()
            except Exception as exc:
                detail = f"{type(exc).__name__}: {exc}"
            if detail:
                found[name] = str(detail)
    return found
