"""Replicas as real processes: ``agentkeel serve`` three times, or once with --workers 3.

Every cluster shares one fresh PostgreSQL schema (`pg_url`) and one Redis database
number of its own (`redis_db_url`), and runs the scripted agent of the end-to-end kit,
with a short lease so that takeovers fit in a test. Each process is started and
stopped by its pid (`ServerProcess`), and every wait is bounded.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from coordination.redis_fixtures import *  # noqa: F403
from e2e import ServerProcess, write_framework
from e2e.conftest import tool_log
from many_replicas.cluster import LEASE_SECONDS, Cluster
from postgres.fixtures import *  # noqa: F403

__all__ = ["tool_log"]


def cluster_framework(folder: Path, pg_url: str, redis_url: str | None, prefix: str) -> Path:
    """The framework.json every replica of a test serves (PostgreSQL alone without Redis)."""
    coordination = (
        f"{pg_url}&lease={LEASE_SECONDS}s"
        if redis_url is None
        else f"{redis_url}?prefix={prefix}&lease={LEASE_SECONDS}s"
    )
    return write_framework(
        folder,
        {
            "agents": {"scripted": {"factory": "e2e:scripted_agent"}},
            "storage": pg_url,
            "coordination": coordination,
            "server": {"heartbeatSeconds": 1, "shutdownTimeoutSeconds": 5},
        },
    )


@pytest.fixture(params=["processes", "workers", "postgresql-only"])
def cluster(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    tool_log: Path,
    pg_url: str,
    redis_db_url: str,
    redis_prefix: str,
) -> Iterator[Cluster]:
    """Three replicas: three processes (on Redis, or on PostgreSQL alone), or one
    ``--workers 3`` server (one URL)."""
    del tool_log  # its environment variable reaches the processes
    redis_url = None if request.param == "postgresql-only" else redis_db_url
    framework = cluster_framework(tmp_path, pg_url, redis_url, redis_prefix)
    if request.param != "workers":
        with three_processes(framework, request.param, pg_url, redis_db_url) as cluster:
            yield cluster
        return
    servers = [ServerProcess(framework)]
    try:
        urls = [servers[0].start("--workers", "3", timeout=40)] * 3
        yield Cluster(servers, urls, request.param, pg_url, redis_db_url)
    finally:
        servers[0].stop()


@contextmanager
def three_processes(
    framework: Path, kind: str, pg_url: str, redis_db_url: str
) -> Iterator[Cluster]:
    """Three `agentkeel serve` processes on copies of `framework`, each stopped by its
    pid afterwards, also when one of them failed to start."""
    servers = [ServerProcess(_own_copy(framework, index)) for index in range(3)]
    try:
        urls = [server.start() for server in servers]
        yield Cluster(servers, urls, kind, pg_url, redis_db_url)
    finally:
        for server in servers:
            server.stop()


@pytest.fixture
def processes(
    tmp_path: Path, tool_log: Path, pg_url: str, redis_db_url: str, redis_prefix: str
) -> Iterator[Cluster]:
    """Three replicas as three processes (for the tests that kill or pause one)."""
    del tool_log
    framework = cluster_framework(tmp_path, pg_url, redis_db_url, redis_prefix)
    servers = [ServerProcess(_own_copy(framework, index)) for index in range(3)]
    try:
        urls = [server.start() for server in servers]
        yield Cluster(servers, urls, "processes", pg_url, redis_db_url)
    finally:
        for server in servers:
            server.stop()


def _own_copy(framework: Path, index: int) -> Path:
    """The framework in a folder of the replica's own (its stdout and stderr go there)."""
    folder = framework.parent / f"replica-{index}"
    folder.mkdir(exist_ok=True)
    copy = folder / "framework.json"
    copy.write_text(framework.read_text(encoding="utf-8"), encoding="utf-8")
    return copy
