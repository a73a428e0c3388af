"""framework.json's ``coordination`` key: what is accepted, and what is refused at load."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from agentkeel.errors import ConfigurationError
from agentkeel.framework import load_framework
from agentkeel.runtime.coordination_registry import open_coordination
from agentkeel.runtime.pg_lease import PostgresRunLease
from agentkeel.runtime.quotas import InProcessLimitCounters
from agentkeel.runtime.redis_fanout import RedisStreams
from agentkeel.runtime.redis_quotas import RedisLimitCounters
from agentkeel.server.serve import run_serve


def _write(folder: Path, **keys: object) -> Path:
    path = folder / "framework.json"
    document = {"agents": {"a": {"model": {"provider": "demo"}}}, **keys}
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def test_a_distributed_coordination_with_file_storage_is_refused(tmp_path: Path) -> None:
    """Files belong to one process: the message names both keys and the file."""
    path = _write(tmp_path, sessionDir="./sessions", coordination="redis://127.0.0.1:6379/3")
    with pytest.raises(ConfigurationError) as caught:
        load_framework(path)
    message = caught.value.message
    assert "framework.json: coordination:" in message
    assert "storage" in message and "sessionDir" in message


def test_memory_storage_is_refused_too(tmp_path: Path) -> None:
    path = _write(tmp_path, coordination="postgresql://127.0.0.1/x")
    with pytest.raises(ConfigurationError, match="coordination.*storage"):
        load_framework(path)


def test_an_unknown_scheme_names_the_known_ones(tmp_path: Path) -> None:
    path = _write(tmp_path, storage="postgresql://127.0.0.1/x", coordination="etcd://h")
    with pytest.raises(ConfigurationError, match="unknown coordination scheme 'etcd'.*redis"):
        load_framework(path)


def test_an_unset_variable_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_SUCH_COORDINATION", raising=False)
    path = _write(
        tmp_path,
        storage="postgresql://127.0.0.1/x",
        coordination={"env": "NO_SUCH_COORDINATION"},
    )
    with pytest.raises(ConfigurationError, match="coordination.env.*NO_SUCH_COORDINATION"):
        load_framework(path)


def test_a_redis_coordination_keeps_the_lease_in_the_storages_database(tmp_path: Path) -> None:
    """Nothing connects at load; the lease uses the storage's database and schema."""
    path = _write(
        tmp_path,
        storage="postgresql://app@127.0.0.1:5432/agents?schema=deploy",
        coordination="redis://:secret@127.0.0.1:6379/3?prefix=app:&lease=4s",
    )
    framework = load_framework(path)
    assert "secret" not in repr(framework)
    coordination = open_coordination(framework.coordination, framework.storage, framework.retention)
    assert coordination.fenced and coordination.lease_ttl == 4.0
    assert isinstance(coordination.lease, PostgresRunLease)
    assert coordination.lease.pool.schema == "deploy"
    assert isinstance(coordination.fanout, RedisStreams)
    assert coordination.fanout.prefix == "app:"
    assert "prefix" not in coordination.fanout.url and "lease" not in coordination.fanout.url
    assert isinstance(coordination.limits, RedisLimitCounters), "replicas share the limits"
    assert coordination.limits.prefix == "app:"


def test_server_limits_counters_override_the_coordinations(tmp_path: Path) -> None:
    """A PostgreSQL-only coordination counts in this process unless counters name Redis."""
    url = "postgresql://app@127.0.0.1:5432/agents"
    limits = {"counters": "redis://127.0.0.1:6379/4?prefix=lim:"}
    framework = load_framework(_write(tmp_path, storage=url, coordination=url))
    alone = open_coordination(framework.coordination, framework.storage, framework.retention)
    assert isinstance(alone.limits, InProcessLimitCounters)
    path = _write(tmp_path, storage=url, coordination=url, server={"limits": limits})
    framework = load_framework(path)
    shared = open_coordination(
        framework.coordination,
        framework.storage,
        framework.retention,
        limits=framework.server.limits.counters,
    )
    assert isinstance(shared.limits, RedisLimitCounters) and shared.limits.prefix == "lim:"


def test_a_bad_lease_duration_is_refused(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        storage="postgresql://127.0.0.1/x",
        coordination="redis://127.0.0.1:6379/3?lease=soon",
    )
    framework = load_framework(path)
    with pytest.raises(ConfigurationError, match="lease"):
        open_coordination(framework.coordination, framework.storage, framework.retention)


def test_workers_need_a_shared_coordination(tmp_path: Path) -> None:
    """--workers 2 over an in-process coordination would run one context twice."""
    path = _write(tmp_path)
    args = argparse.Namespace(framework=str(path), host=None, port=0, workers=2)
    with pytest.raises(ConfigurationError, match="--workers 2.*coordination"):
        run_serve(args)


def test_the_storage_url_can_be_reused_for_a_postgresql_coordination(tmp_path: Path) -> None:
    """Its own parameters (pool_size, prepare_threshold, schema) do not reach libpq."""
    url = "postgresql://app@127.0.0.1:5432/agents?schema=s1&pool_size=3&prepare_threshold=none"
    path = _write(tmp_path, storage=url, coordination=url + "&lease=5s")
    framework = load_framework(path)
    coordination = open_coordination(framework.coordination, framework.storage, framework.retention)
    assert isinstance(coordination.lease, PostgresRunLease)
    pool = coordination.lease.pool
    assert pool.schema == "s1" and pool.prepare_threshold is None
    assert "pool_size" not in pool.dsn and "schema" not in pool.dsn and "lease" not in pool.dsn
    assert coordination.lease_ttl == 5.0
