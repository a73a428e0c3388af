"""RedisClaimTable: the shared Idempotency-Key claims in Redis (``SET NX EX``).

A claim is one string key holding a small JSON object; the atomic ``SET NX`` decides
who claimed first. Each context keeps a set of its claims' keys, so that deleting the
context drops them (guarantee 13); both expire after the claims' ttl. The conditional
writes (an owner's update, a takeover) are ``WATCH``/``MULTI`` transactions: the check
and the write are one step, whoever else writes in between.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from redis.asyncio import Redis
from redis.exceptions import RedisError, WatchError

from agentkeel.errors import StorageUnavailableError
from agentkeel.messages import JSONObject

__all__ = ["RedisClaimTable"]


class RedisClaimTable:
    """`ClaimTable` over a Redis client (the fan-out's, so one pool serves both).

    Args:
        client: Gives the connected client (the fan-out's, once it is running).
        prefix: Put before every key.
    """

    def __init__(self, client: Callable[[], Redis], *, prefix: str = "agentkeel:") -> None:
        self._client = client
        self.prefix = prefix

    @property
    def redis(self) -> Redis:
        """The client to send to."""
        return self._client()

    def _key(self, name: str) -> str:
        return f"{self.prefix}claim:{name}"

    def _context_key(self, context: str) -> str:
        return f"{self.prefix}claims:{context}"

    async def insert(
        self, name: str, value: JSONObject, context: str, ttl: float
    ) -> JSONObject | None:
        """``SET NX`` the claim; None if it was set, else the value already there.

        Raises:
            StorageUnavailableError: Redis cannot be reached (``503``): a claim that
                cannot be checked must not run, or a retry could run it twice.
        """
        try:
            return await self._insert(name, value, context, ttl)
        except RedisError as exc:
            raise StorageUnavailableError(
                f"coordination: Redis is unavailable, so the Idempotency-Key cannot be "
                f"checked: {type(exc).__name__}"
            ) from None

    async def _insert(
        self, name: str, value: JSONObject, context: str, ttl: float
    ) -> JSONObject | None:
        seconds = max(1, round(ttl))
        key = self._key(name)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.set(key, json.dumps(value), nx=True, ex=seconds)
            pipe.get(key)
            pipe.sadd(self._context_key(context), key)
            pipe.expire(self._context_key(context), seconds)
            inserted, current, _, _ = await pipe.execute()
        if inserted:
            return None
        return _decode(current) or {}

    async def get(self, name: str) -> JSONObject | None:
        """The claim, or None."""
        return _decode(await self.redis.get(self._key(name)))

    async def update(self, name: str, fields: JSONObject, *, owner: str | None = None) -> bool:
        """Merge `fields` into the claim, keeping its expiry, if `owner` still holds it."""
        return await self._swap(
            name,
            lambda current: owner is None or current.get("owner") == owner,
            lambda current: {**current, **fields},
        )

    async def replace(self, name: str, expected: JSONObject, value: JSONObject) -> bool:
        """Set the claim to `value` (keeping its expiry) if it still is `expected`."""
        return await self._swap(name, lambda current: current == expected, lambda _: value)

    async def _swap(
        self,
        name: str,
        holds: Callable[[JSONObject], bool],
        new: Callable[[JSONObject], JSONObject],
    ) -> bool:
        key = self._key(name)
        async with self.redis.pipeline(transaction=True) as pipe:
            while True:
                try:
                    await pipe.watch(key)
                    current = _decode(await pipe.get(key))
                    if current is None or not holds(current):
                        return False  # leaving the pipeline unwatches the key
                    pipe.multi()  # type: ignore[no-untyped-call]
                    pipe.set(key, json.dumps(new(current)), xx=True, keepttl=True)
                    await pipe.execute()
                    return True
                except WatchError:
                    continue  # written meanwhile: check again against what is there now

    async def delete(self, name: str) -> None:
        """Drop the claim."""
        await self.redis.delete(self._key(name))

    async def delete_context(self, context: str) -> None:
        """Drop every claim of `context`, and its set."""
        context_key = self._context_key(context)
        members = await self.redis.smembers(context_key)
        await self.redis.delete(context_key, *members)


def _decode(raw: object) -> JSONObject | None:
    if raw is None:
        return None
    try:
        value = json.loads(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return value if isinstance(value, dict) else None
