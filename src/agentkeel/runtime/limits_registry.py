"""Where ``server.limits`` count, by URL: ``server.limits.counters``, imported only when asked for.

``null`` (the default) counts where the coordination lives: in this process, or in
Redis for a ``redis://…`` coordination (its client and key prefix). ``memory:`` counts
in this process whatever the coordination; ``redis://…`` (or ``rediss://…``) counts
in that Redis database, so replicas sharing a PostgreSQL-only coordination can still
share their limits. Like `agentkeel.storage.registry`, a backend's module is imported on
first use, and a missing driver is a ConfigurationError naming the extra to install.
"""

from __future__ import annotations

from collections.abc import Callable

from agentkeel.errors import ConfigurationError
from agentkeel.runtime.coordination import LimitCounters
from agentkeel.storage.configured import EnvReference, scheme_url
from agentkeel.storage.registry import Backend

__all__ = ["limit_counters_url", "open_limit_counters", "register_limit_counters"]

_BACKENDS: dict[str, Backend] = {
    "memory": Backend("agentkeel.runtime.quotas:from_url"),
    "redis": Backend("agentkeel.runtime.redis_quotas:from_url", "redis"),
    "rediss": Backend("agentkeel.runtime.redis_quotas:from_url", "redis"),
}


def register_limit_counters(scheme: str, backend: Backend) -> None:
    """Make `scheme` URLs open `backend` (its factory takes the URL, returns LimitCounters)."""
    _BACKENDS[scheme.lower()] = backend


def limit_counters_url(
    value: str | EnvReference | None, refuse: Callable[[str, str], ConfigurationError]
) -> str | None:
    """``server.limits.counters`` as a URL, checked at load (an unset variable, a scheme)."""
    if value is None:
        return None
    return scheme_url(value, "server.limits.counters", _BACKENDS, refuse)[0]


def open_limit_counters(url: str) -> LimitCounters:
    """The counters `url` names; not connected yet (a shared one connects in ``running()``).

    Raises:
        ConfigurationError: The backend's driver is not installed (with the pip line).
    """
    scheme = url.partition(":")[0].lower()
    factory: Callable[[str], LimitCounters] = _BACKENDS[scheme].load(
        f"server.limits.counters {scheme!r}"
    )
    return factory(url)
