"""A served agent on PostgreSQL: restarts, an approval across a restart, a database that
goes away while serving and one that is not there at start."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx
import psycopg
import pytest
from psycopg import sql

from e2e import TESTS_DIR, ServerProcess, stream_turn, tool_runs, write_framework
from postgres.proxy import cuttable_proxy

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]
SEND = "/agents/scripted/send"


def framework_on(folder: Path, url: str) -> Path:
    return write_framework(
        folder,
        {
            "agents": {"scripted": {"factory": "e2e:scripted_agent"}},
            "storage": url,
            "server": {"heartbeatSeconds": 1, "shutdownTimeoutSeconds": 10},
        },
    )


@pytest.fixture
def server(tmp_path: Path, tool_log: Path, pg_url: str) -> Iterator[ServerProcess]:
    del tool_log  # its environment variable reaches the subprocess
    process = ServerProcess(framework_on(tmp_path, pg_url))
    try:
        yield process
    finally:
        process.stop()


async def send(url: str, body: dict[str, object]) -> httpx.Response:
    async with httpx.AsyncClient(base_url=url, timeout=20) as client:
        return await client.post(SEND, json=body)


async def test_a_restart_continues_the_conversation(server: ServerProcess, pg_url: str) -> None:
    url = server.start()
    first = await send(url, {"message": "before the restart", "contextId": "ctx-pg"})
    assert first.status_code == 200, first.text
    assert server.stop() in (0, -signal.SIGTERM)
    url = server.start()
    history = await send(url, {"message": "history", "contextId": "ctx-pg"})
    assert history.json()["text"] == "before the restart|history"
    async with httpx.AsyncClient(base_url=url, timeout=20) as client:
        assert (await client.delete("/agents/scripted/contexts/ctx-pg")).status_code == 204
    assert rows_of(pg_url) == {}  # guarantee 13: nothing of it is left in any table
    fresh = await send(url, {"message": "history", "contextId": "ctx-pg"})
    assert fresh.json()["text"] == "history"


def rows_of(url: str) -> dict[str, int]:
    """How many rows each table of the test's schema holds (tables with none left out)."""
    dsn, _, schema = url.partition("?schema=")
    counts = {}
    with psycopg.connect(dsn) as conn:
        for table in ("sessions", "messages", "runs", "frames", "documents", "checkpoints"):
            query = sql.SQL("SELECT count(*) FROM {}.{}").format(
                sql.Identifier(schema), sql.Identifier(table)
            )
            row = conn.execute(query).fetchone()
            if row and row[0]:
                counts[table] = int(row[0])
    return counts


async def test_an_approval_survives_a_restart_and_runs_the_tool_once(
    server: ServerProcess, tool_log: Path
) -> None:
    url = server.start()
    async with httpx.AsyncClient(base_url=url, timeout=20) as client:
        first = await stream_turn(
            client, "scripted", {"message": "delete r.txt", "contextId": "ctx-h"}
        )
    interrupt = first[-1].data["interrupt"]
    assert isinstance(interrupt, dict)
    server.kill()  # no clean shutdown: the checkpoint must already be in the database
    url = server.start()
    resume = {"interruptId": interrupt["id"], "decision": {"approved": True}}
    async with httpx.AsyncClient(base_url=url, timeout=20) as client:
        second = await stream_turn(client, "scripted", {"contextId": "ctx-h", "resume": resume})
    assert second[-1].data["status"] == "completed"
    assert second[-1].data["runId"] == first[-1].data["runId"]
    assert tool_runs(tool_log) == ["delete_file r.txt"]


async def test_a_lost_database_fails_turns_with_503_and_recovers_by_itself(
    tmp_path: Path, tool_log: Path, pg_url: str
) -> None:
    del tool_log
    with cuttable_proxy() as proxy:
        parts = urlsplit(pg_url)
        through = urlunsplit(parts._replace(netloc=f"postgres@127.0.0.1:{proxy.port}"))
        server = ServerProcess(framework_on(tmp_path, through))
        try:
            url = server.start()
            assert (await send(url, {"message": "one", "contextId": "ctx-cut"})).status_code == 200
            proxy.cut()
            failed = await send(url, {"message": "two", "contextId": "ctx-cut"})
            assert failed.status_code == 503, failed.text
            assert failed.json()["error"]["code"] == "storage_unavailable"
            assert httpx.get(f"{url}/readyz").status_code == 503
            assert httpx.get(f"{url}/healthz").status_code == 200
            proxy.restore()
            deadline = time.monotonic() + 10
            while httpx.get(f"{url}/readyz").status_code != 200:
                assert time.monotonic() < deadline, "readyz did not recover"
                time.sleep(0.1)
            again = await send(url, {"message": "history", "contextId": "ctx-cut"})
            assert again.status_code == 200, again.text
            assert again.json()["text"] == "one|history"  # the refused turn left nothing
        finally:
            server.stop()


def test_an_unreachable_database_at_start_exits_naming_storage(tmp_path: Path) -> None:
    framework = framework_on(tmp_path, "postgresql://agent:hunter2@127.0.0.1:1/nowhere")
    code = "import sys; from agentkeel.cli import main; sys.exit(main(sys.argv[1:]))"
    env = {"PYTHONPATH": str(TESTS_DIR)}
    for command in (["serve", str(framework), "--port", "0"], ["migrate", str(framework)]):
        done = subprocess.run(
            [sys.executable, "-c", code, *command],
            capture_output=True, text=True, timeout=60, env=env,
        )  # fmt: skip
        assert done.returncode != 0
        assert "storage" in done.stderr and "127.0.0.1" in done.stderr
        assert "hunter2" not in done.stderr + done.stdout
        assert "Traceback" not in done.stderr
