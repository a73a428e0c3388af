"""Memory on a served agent whose sessions are in PostgreSQL: the memory defaults to the
same database, recalls in a new conversation and after a real restart, and a principal's
DELETE leaves no row of it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest
from psycopg import sql

from agentkeel.framework import load_framework
from agentkeel.memory.postgres import PostgresMemoryStore
from e2e import ServerProcess, write_framework

pytestmark = [pytest.mark.postgres]

TOOLS = ["agentkeel.tools:remember", "agentkeel.tools:recall", "agentkeel.tools:forget"]
ASSISTANT = {"model": {"provider": "demo"}, "tools": TOOLS}
TELL = "Remember for next time that my favourite colour is blue"
ASK = "What is my favourite colour?"


def send(url: str, message: str) -> dict[str, object]:
    response = httpx.post(f"{url}/agents/assistant/send", json={"message": message}, timeout=60)
    assert response.status_code == 200, response.text
    body: dict[str, object] = response.json()
    return body


def document(pg_url: str, **memory: object) -> dict[str, object]:
    return {
        "agents": {"assistant": ASSISTANT},
        "storage": pg_url,
        "memory": {"embeddings": "offline", **memory},
        "server": {"heartbeatSeconds": 1, "shutdownTimeoutSeconds": 5},
    }


@pytest.fixture
def process(tmp_path: Path, pg_url: str) -> Iterator[ServerProcess]:
    server = ServerProcess(write_framework(tmp_path, document(pg_url)))
    try:
        yield server
    finally:
        server.stop()


def memory_rows(database: str, schema: str) -> tuple[int, int]:
    with psycopg.connect(database) as conn:
        row = conn.execute(
            sql.SQL(
                "SELECT (SELECT count(*) FROM {s}.memory_scopes),"
                " (SELECT count(*) FROM {s}.memory_items)"
            ).format(s=sql.Identifier(schema))
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def test_recall_across_conversations_and_a_restart_then_delete_all(
    process: ServerProcess, pg_database: str, pg_schema: str
) -> None:
    url = process.start()
    told = send(url, TELL)
    assert told["toolCalls"] == ["remember"], told
    assert memory_rows(pg_database, pg_schema) == (1, 1), "memory is not in PostgreSQL"
    process.stop()
    url = process.start()
    again = send(url, ASK)  # a new conversation, after a restart
    assert again["contextId"] != told["contextId"]
    assert again["toolCalls"] == ["recall"] and "blue" in str(again["text"]), again
    listed = httpx.get(f"{url}/agents/assistant/memory").json()
    assert [i["key"] for i in listed["items"]] == ["favourite colour"]
    assert httpx.delete(f"{url}/agents/assistant/memory").json() == {"deleted": 1}
    assert memory_rows(pg_database, pg_schema) == (0, 0), "a deleted memory left rows"


def test_the_store_follows_the_storage_or_names_its_own(tmp_path: Path, pg_url: str) -> None:
    beside = load_framework(write_framework(tmp_path, document(pg_url)))
    assert beside.memory is not None and isinstance(beside.memory.store, PostgresMemoryStore)
    own = load_framework(write_framework(tmp_path, document(pg_url, store=pg_url)))
    assert own.memory is not None and isinstance(own.memory.store, PostgresMemoryStore)
    assert own.memory.store.schema == beside.memory.store.schema
