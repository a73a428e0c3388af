"""What the replica tests drive: the servers, their URLs round-robin, the shared stores."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field

import httpx

from agentkeel.storage.base import SessionKey
from agentkeel.storage.postgres import PostgresStorage
from e2e import ServerProcess

__all__ = ["LEASE_SECONDS", "Cluster"]

LEASE_SECONDS = 3
"""The replicas' lease time: short, so that a takeover after a kill fits in a test."""
AGENT = "scripted"


@dataclass
class Cluster:
    """Three replicas (three processes, or three workers behind one URL)."""

    servers: list[ServerProcess]
    urls: list[str]
    kind: str
    pg_url: str
    redis_url: str
    _turn: itertools.count[int] = field(default_factory=itertools.count)

    def next_url(self) -> str:
        """The next replica, round-robin."""
        return self.urls[next(self._turn) % len(self.urls)]

    async def send(
        self, url: str, body: Mapping[str, object], headers: Mapping[str, str] | None = None
    ) -> httpx.Response:
        """One turn on the send endpoint of the replica at `url`."""
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            return await client.post(f"/agents/{AGENT}/send", json=body, headers=headers)

    def storage(self) -> PostgresStorage:
        """The shared storage, as the replicas see it (open it, then close it)."""
        dsn, _, schema = self.pg_url.partition("?schema=")
        return PostgresStorage(dsn, schema=schema, pool_size=2)

    @staticmethod
    def key(context_id: str) -> SessionKey:
        """The session key of a context of the scripted agent."""
        return SessionKey(definition=AGENT, context_id=context_id)
