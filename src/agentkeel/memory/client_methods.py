"""The memory methods of the Python AgentClient, kept beside the memory package.

`AsyncMemoryMethods` adds ``memory()`` and ``forget_memory()`` to `AsyncAgentClient`
through the two request helpers every client method uses; `MemoryMethods` wraps them
for the blocking `AgentClient`, as its other methods wrap the async client.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Protocol, TypeVar

import httpx

from agentkeel.memory.remote import RememberedPage, decode_memory_page, memory_query

__all__ = ["AsyncMemoryMethods", "MemoryMethods"]

_T = TypeVar("_T")


class _Requests(Protocol):
    def _url(self, *parts: str) -> str: ...

    async def _request(self, method: str, url: str) -> httpx.Response: ...


class _Portal(Protocol):
    def call(self, func: Callable[..., Awaitable[_T]], *args: object) -> _T: ...


def _body(response: httpx.Response) -> object:
    try:
        return response.json()
    except ValueError:
        return None


class AsyncMemoryMethods:
    """What the agent remembers of this client's principal (docs/memory.md)."""

    async def memory(
        self: _Requests,
        query: str | None = None,
        *,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> RememberedPage:
        """The principal's items, newest first, or the best matches for `query`.

        ``GET /agents/{name}/memory``; vectors never leave the server.
        """
        url = self._url("memory") + memory_query(query, limit, cursor)
        return decode_memory_page(_body(await self._request("GET", url)))

    async def forget_memory(self: _Requests, key: str | None = None) -> int:
        """Delete one item by `key` (returns 1), or all when None (returns how many).

        Raises:
            ServerError: ``memory_not_found`` for a key with no item of this principal.
        """
        if key is not None:
            await self._request("DELETE", self._url("memory", key))
            return 1
        body = _body(await self._request("DELETE", self._url("memory")))
        deleted = body.get("deleted") if isinstance(body, dict) else None
        return deleted if isinstance(deleted, int) else 0


class _AsyncMemory(Protocol):
    async def memory(
        self, query: str | None = None, *, limit: int | None = None, cursor: str | None = None
    ) -> RememberedPage: ...

    async def forget_memory(self, key: str | None = None) -> int: ...


class _Wrapped(Protocol):
    @property
    def _portal(self) -> _Portal: ...

    @property
    def _client(self) -> _AsyncMemory: ...


class MemoryMethods:
    """The blocking twins of `AsyncMemoryMethods`."""

    def memory(
        self: _Wrapped,
        query: str | None = None,
        *,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> RememberedPage:
        """The principal's items (see `AsyncMemoryMethods.memory`)."""
        return self._portal.call(partial(self._client.memory, query, limit=limit, cursor=cursor))

    def forget_memory(self: _Wrapped, key: str | None = None) -> int:
        """Delete one item, or all (see `AsyncMemoryMethods.forget_memory`)."""
        return self._portal.call(self._client.forget_memory, key)
