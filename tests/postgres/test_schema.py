"""The schema: migrations that two processes may run at once, a newer database refused,
`agentkeel migrate`, and what a turn writes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import psycopg
import pytest
from psycopg import sql

from agentkeel.errors import ConcurrentWriteError
from agentkeel.keys import SessionKey
from agentkeel.messages import Message
from agentkeel.storage.postgres import PostgresStorage
from agentkeel.storage.postgres_schema import MIGRATIONS, SchemaTooNewError

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]
KEY = SessionKey(definition="chat", context_id="ctx-1", principal="alice")


def versions(database: str, schema: str) -> list[int]:
    with psycopg.connect(database) as conn:
        query = sql.SQL("SELECT version FROM {}.schema_migrations ORDER BY version")
        return [row[0] for row in conn.execute(query.format(sql.Identifier(schema)))]


async def test_processes_starting_at_once_on_an_empty_database_all_come_up(
    pg_database: str, pg_schema: str
) -> None:
    storages = [PostgresStorage(pg_database, schema=pg_schema, pool_size=1) for _ in range(4)]
    async with anyio.create_task_group() as group:
        for storage in storages:
            group.start_soon(storage.open)
    try:
        for index, storage in enumerate(storages):
            await storage.append(
                SessionKey(definition="chat", context_id=f"ctx-{index}"), [Message.user("hi")], None
            )
    finally:
        for storage in storages:
            await storage.close()
    assert versions(pg_database, pg_schema) == [m.version for m in MIGRATIONS]


async def test_a_database_newer_than_the_code_is_refused(
    pg_database: str, pg_schema: str, pg_storage: PostgresStorage
) -> None:
    with psycopg.connect(pg_database) as conn:
        conn.execute(
            sql.SQL(
                "INSERT INTO {}.schema_migrations (version, name) VALUES (999, 'future')"
            ).format(sql.Identifier(pg_schema))
        )
    later = PostgresStorage(pg_database, schema=pg_schema)
    with pytest.raises(SchemaTooNewError, match="version 999, newer than this agentkeel knows"):
        await later.open()
    assert await pg_storage.version(KEY) == 0  # the running one is untouched


def test_agentkeel_migrate_runs_the_migrations_alone(
    tmp_path: Path, pg_url: str, pg_database: str, pg_schema: str
) -> None:
    framework = tmp_path / "framework.json"
    document = {"agents": {"demo": {"model": {"provider": "demo"}}}, "storage": {"env": "DB"}}
    framework.write_text(json.dumps(document))
    code = "import sys; from agentkeel.cli import main; sys.exit(main(sys.argv[1:]))"
    run = [sys.executable, "-c", code, "migrate", str(framework)]
    env = {"DB": pg_url, "PATH": "/usr/bin:/bin"}
    first = subprocess.run(run, capture_output=True, text=True, timeout=60, env=env)
    assert first.returncode == 0, first.stderr
    every = [m.version for m in MIGRATIONS]
    assert f"migrated to version {', '.join(map(str, every))}" in first.stdout
    assert versions(pg_database, pg_schema) == every
    again = subprocess.run(run, capture_output=True, text=True, timeout=60, env=env)
    assert again.returncode == 0 and "up to date" in again.stdout


async def test_a_stale_writer_updates_nothing(pg_storage: PostgresStorage) -> None:
    await pg_storage.append(KEY, [Message.user("one")], {"n": 1}, fence=2)
    with pytest.raises(ConcurrentWriteError, match="fencing token 1 was superseded by 2"):
        await pg_storage.append(KEY, [Message.user("stale")], {"n": 9}, fence=1)
    with pytest.raises(ConcurrentWriteError, match="expected version 0"):
        await pg_storage.append(KEY, [Message.user("stale")], {"n": 9}, expected_version=0)
    snapshot = await pg_storage.load(KEY)
    assert snapshot is not None and snapshot.version == 1
    assert [m.text for m in snapshot.messages] == ["one"] and snapshot.state == {"n": 1}


async def test_concurrent_commits_on_one_version_let_exactly_one_through(
    pg_storage: PostgresStorage,
) -> None:
    await pg_storage.append(KEY, [Message.user("base")], None)
    outcomes: list[str] = []

    async def commit(index: int) -> None:
        try:
            await pg_storage.append(KEY, [Message.user(f"w{index}")], None, expected_version=1)
            outcomes.append("ok")
        except ConcurrentWriteError:
            outcomes.append("refused")

    async with anyio.create_task_group() as group:
        for index in range(4):
            group.start_soon(commit, index)
    assert sorted(outcomes) == ["ok", "refused", "refused", "refused"]
    snapshot = await pg_storage.load(KEY)
    assert snapshot is not None and len(snapshot.messages) == 2 and snapshot.version == 2


async def test_a_turn_is_one_row_per_message_keyed_by_principal(
    pg_storage: PostgresStorage, pg_database: str, pg_schema: str
) -> None:
    for index in range(3):
        await pg_storage.append(KEY, [Message.user(f"q{index}"), Message.assistant("a")], None)
    with psycopg.connect(pg_database) as conn:
        query = sql.SQL(
            "SELECT s.principal, s.definition, s.context_id, m.seq, m.body->>'role'"
            " FROM {0}.messages m JOIN {0}.sessions s ON s.id = m.session_id ORDER BY m.seq"
        ).format(sql.Identifier(pg_schema))
        rows = conn.execute(query).fetchall()
    assert [row[3] for row in rows] == [1, 2, 3, 4, 5, 6]
    assert {row[:3] for row in rows} == {("alice", "chat", "ctx-1")}
    assert [row[4] for row in rows][:2] == ["user", "assistant"]
