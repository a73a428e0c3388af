"""`LimitCounters` in Redis: ``server.limits`` shared by every replica on one database.

Each name is one sorted set, checked and changed by one Lua script, so two replicas at
the same instant never both take the last unit, and the clock is Redis's own (``TIME``),
so replicas whose clocks disagree still count one window.

- A turn window (`hit`) is a sliding log: one member per counted event, scored by its
  instant in milliseconds. The script drops what left the window, refuses at `limit`
  (answering when the oldest leaves), else adds; the key expires with its window, so an
  idle name costs nothing and `sweep` has nothing to do.
- A stream slot (`hold`) is a member scored by when it expires. A process renews the
  slots it holds every third of `slot_ttl` while it runs (`running()`), so the slots of
  a replica that died free themselves within `slot_ttl` instead of being lost for good.

Redis unreachable: the limits cannot be checked, and a server that refused every turn
for it would turn a cache outage into a full one, so the counters admit (fail open),
log it once, and report it in ``/readyz`` until Redis answers again.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import anyio
from redis.asyncio import Redis
from redis.commands.core import AsyncScript
from redis.exceptions import RedisError

from agentkeel.errors import ConfigurationError
from agentkeel.framework_schema import parse_duration

__all__ = ["DEFAULT_SLOT_TTL", "RedisLimitCounters", "from_url"]

logger = logging.getLogger(__name__)

DEFAULT_SLOT_TTL = 30.0
"""Seconds a stream slot of a process that stopped renewing it stays taken."""

_OWN = ("prefix", "slotTtl")

_NOW = "local now = redis.call('TIME') local t = now[1] * 1000 + math.floor(now[2] / 1000) "

_HIT = (
    _NOW
    + """
local window = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', t - window)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return math.max(tonumber(oldest[2]) + window - t, 1)
end
redis.call('ZADD', KEYS[1], t, ARGV[3])
redis.call('PEXPIRE', KEYS[1], window)
return 0
"""
)
"""Count one event unless `limit` fell within the window: 0, else the wait in ms."""

_HOLD = (
    _NOW
    + """
local ttl = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', t)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], t + ttl, ARGV[3])
redis.call('PEXPIRE', KEYS[1], ttl)
return 1
"""
)
"""Take a slot unless `limit` unexpired ones are held: 1 taken, 0 full."""

_RENEW = (
    _NOW
    + """
local ttl = tonumber(ARGV[1])
for i = 2, #ARGV do redis.call('ZADD', KEYS[1], 'XX', t + ttl, ARGV[i]) end
if redis.call('ZCARD', KEYS[1]) > 0 then redis.call('PEXPIRE', KEYS[1], ttl) end
return 0
"""
)
"""Push back the expiry of this process's slots (XX: one that already expired stays gone)."""


class RedisLimitCounters:
    """Stream slots and sliding-window counts in one Redis database.

    Args:
        client: A ``redis://`` URL (the counters open their own client in `running()`),
            or what gives a connected client (the coordination's, so one pool serves
            both).
        prefix: Put before every key, so that deployments can share a database.
        slot_ttl: Seconds an unrenewed stream slot stays taken.
    """

    def __init__(
        self,
        client: str | Callable[[], Redis],
        *,
        prefix: str = "agentkeel:",
        slot_ttl: float = DEFAULT_SLOT_TTL,
    ) -> None:
        self.url = client if isinstance(client, str) else None
        self._client: Callable[[], Redis] | None = None if isinstance(client, str) else client
        self._own: Redis | None = None
        self.prefix = prefix
        self._slot_ms = max(1, round(slot_ttl * 1000))
        self._owner = secrets.token_hex(6)
        self._held: dict[str, list[str | None]] = {}
        """This process's slots by name; None is a slot admitted while Redis was away."""
        self._failure: str | None = None
        self._scripts: dict[str, AsyncScript] = {}

    @property
    def redis(self) -> Redis:
        """The client to send to."""
        if self._client is not None:
            return self._client()
        if self._own is None:
            raise RuntimeError("RedisLimitCounters is not running (enter `running()` first)")
        return self._own

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Open the client (for a URL) and renew this process's slots until exit."""
        if self.url is not None:
            self._own = Redis.from_url(self.url)
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(self._renew_forever)
                try:
                    yield
                finally:
                    group.cancel_scope.cancel()
        finally:
            own, self._own = self._own, None
            if own is not None:
                await own.aclose()

    async def hold(self, name: str, limit: int) -> bool:
        """Take a slot of `name` unless `limit` are held (admitted when Redis is away)."""
        member = f"{self._owner}:{secrets.token_hex(6)}"
        try:
            taken = await self._run(_HOLD, self._slots(name), limit, self._slot_ms, member)
        except RedisError as exc:
            self._failed(exc)
            self._held.setdefault(name, []).append(None)
            return True
        if taken:
            self._held.setdefault(name, []).append(member)
        return bool(taken)

    async def release(self, name: str) -> None:
        """Give back a slot: one this process took, else any one of `name`."""
        mine = self._held.get(name)
        member = mine.pop() if mine else ""
        if mine is not None and not mine:
            del self._held[name]
        if member is None:
            return  # admitted while Redis was away: nothing was counted
        try:
            if member:
                await self.redis.zrem(self._slots(name), member)
            else:
                await self.redis.zpopmin(self._slots(name))
            self._recovered()
        except RedisError as exc:
            self._failed(exc)  # the slot expires by itself within slot_ttl

    async def hit(self, name: str, limit: int, window: float) -> float:
        """Count an event unless `limit` fell within `window`; else the seconds to wait."""
        window_ms = max(1, round(window * 1000))
        event = secrets.token_hex(8)
        try:
            wait_ms = await self._run(_HIT, self._hits(name), limit, window_ms, event)
        except RedisError as exc:
            self._failed(exc)
            return 0.0
        return int(wait_ms) / 1000

    def sweep(self) -> int:
        """Nothing to forget here: Redis expires every key with its window."""
        return 0

    async def health(self) -> str | None:
        """Why the limits are not being checked now (None: they are)."""
        return self._failure

    def _slots(self, name: str) -> str:
        return f"{self.prefix}limits:slots:{name}"

    def _hits(self, name: str) -> str:
        return f"{self.prefix}limits:hits:{name}"

    async def _run(self, source: str, key: str, *args: int | str) -> int:
        client = self.redis
        script = self._scripts.get(source)
        if script is None:
            script = self._scripts[source] = client.register_script(source)
        result = await script(keys=[key], args=list(args), client=client)
        self._recovered()
        return int(result)

    async def _renew_forever(self) -> None:
        while True:
            await anyio.sleep(self._slot_ms / 3000)
            for name, members in list(self._held.items()):
                live = [member for member in members if member is not None]
                if not live:
                    continue
                try:
                    await self._run(_RENEW, self._slots(name), self._slot_ms, *live)
                except RedisError as exc:
                    self._failed(exc)

    def _failed(self, exc: RedisError) -> None:
        if self._failure is None:
            logger.warning(
                "server.limits are not checked while Redis is unreachable: %s",
                type(exc).__name__,
            )
        self._failure = f"Redis is unreachable: {type(exc).__name__}"

    def _recovered(self) -> None:
        if self._failure is not None:
            logger.info("server.limits are checked again: Redis answers")
            self._failure = None


def from_url(url: str) -> RedisLimitCounters:
    """The counters a ``redis://`` URL names (the registry's factory).

    Parameters (removed before the URL reaches Redis): ``prefix`` (default
    ``agentkeel:``) and ``slotTtl`` (a duration, default ``30s``).
    """
    parts = urlsplit(url)
    ours: dict[str, str] = {}
    theirs: list[tuple[str, str]] = []
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        (ours.__setitem__(name, value) if name in _OWN else theirs.append((name, value)))
    try:
        slot_ttl = parse_duration(ours.get("slotTtl"))
    except ValueError as exc:
        raise ConfigurationError(f"server.limits.counters: slotTtl: {exc}") from None
    return RedisLimitCounters(
        urlunsplit(parts._replace(query=urlencode(theirs))),
        prefix=ours.get("prefix", "agentkeel:"),
        slot_ttl=DEFAULT_SLOT_TTL if slot_ttl is None else max(1.0, slot_ttl),
    )
