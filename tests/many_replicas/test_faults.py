"""Losing Redis while replicas serve (SPEC 11): no turn is lost, and it recovers by itself.

Redis is reached through a loopback proxy that the test cuts and restores, standing
for a Redis that goes away (the machine's Redis, which other tests use, keeps running).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import httpx
import pytest

from e2e import ServerProcess, frames_of, reconnect
from many_replicas.cluster import AGENT, Cluster
from many_replicas.conftest import _own_copy, cluster_framework
from postgres.proxy import CuttableProxy, cuttable_proxy

pytestmark = [pytest.mark.anyio, pytest.mark.postgres, pytest.mark.redis, pytest.mark.timeout(180)]


@pytest.fixture
def cut_redis(
    tmp_path: Path, tool_log: Path, pg_url: str, redis_db_url: str, redis_prefix: str
) -> Iterator[tuple[Cluster, CuttableProxy]]:
    """Two replicas whose Redis is behind a proxy the test can cut."""
    del tool_log
    parts = urlsplit(redis_db_url)
    with cuttable_proxy(parts.port or 6379) as proxy:
        proxied = parts._replace(netloc=f"127.0.0.1:{proxy.port}").geturl()
        framework = cluster_framework(tmp_path, pg_url, proxied, redis_prefix)
        servers = [ServerProcess(_own_copy(framework, index)) for index in range(2)]
        try:
            urls = [server.start() for server in servers]
            yield Cluster(servers, urls, "processes", pg_url, redis_db_url), proxy
        finally:
            for server in servers:
                server.stop()


async def _readiness(url: str) -> str:
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        return str((await client.get("/readyz")).json()["status"])


async def test_losing_redis_mid_run_loses_no_turn(cut_redis: tuple[Cluster, CuttableProxy]) -> None:
    """The run finishes and commits, /readyz says degraded, a reconnect elsewhere falls
    back to storage, and everything is back once Redis is."""
    cluster, proxy = cut_redis
    first, second = cluster.urls
    assert await _readiness(first) == "ok"
    seen = []
    with anyio.fail_after(90):
        async with httpx.AsyncClient(base_url=first, timeout=30) as client:
            body = {"message": "slow 2", "contextId": "lost"}
            async with client.stream("POST", f"/agents/{AGENT}/stream", json=body) as response:
                async for frame in frames_of(response):
                    seen.append(frame)
                    if len(seen) == 2:
                        proxy.cut()  # Redis goes away mid-run
        assert seen[-1].done and seen[-1].data["status"] == "completed"
        assert await _readiness(first) == "degraded"
        async with httpx.AsyncClient(base_url=second, timeout=30) as client:
            replay = await reconnect(client, AGENT, "lost", 0)  # from storage
        assert [f.raw for f in replay] == [f.raw for f in seen]
        after = await cluster.send(second, {"message": "history", "contextId": "lost"})
        assert after.status_code == 200, after.text
        assert after.json()["text"] == "slow 2|history"
        proxy.restore()
        while await _readiness(first) != "ok":
            await anyio.sleep(0.2)
        again = await cluster.send(first, {"message": "history", "contextId": "lost"})
    assert again.json()["text"] == "slow 2|history|history"
