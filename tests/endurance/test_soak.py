"""The soak's short form (CI): a few kills per backend, the load, a short memory window.

The long form is ``make soak`` (`bench/soak.py`); both print their figures as a table.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e import ServerProcess, write_framework
from endurance.harness import kill_rounds, load, memory, percentile, render_table, server_document

pytestmark = pytest.mark.anyio

KILLS = 4


@pytest.fixture
def tool_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "tool-runs.log"
    monkeypatch.setenv("AGENTKEEL_E2E_TOOL_LOG", str(path))
    return path


@pytest.fixture
def server(tmp_path: Path, tool_log: Path) -> Iterator[ServerProcess]:
    del tool_log
    process = ServerProcess(write_framework(tmp_path, server_document(None, max_contexts=100)))
    try:
        yield process
    finally:
        process.stop()


async def test_kills_on_the_file_backend(tmp_path: Path, tool_log: Path) -> None:
    del tool_log
    figures = await kill_rounds(tmp_path, KILLS)
    print(
        render_table(
            [
                ("kills survived", f"{figures.survived}/{figures.kills}"),
                ("turns acknowledged / found", f"{figures.acknowledged}/{figures.found}"),
            ]
        )
    )
    assert figures.survived == KILLS
    assert figures.found == figures.acknowledged
    assert figures.acknowledged >= KILLS, "the clients made progress between kills"


@pytest.mark.postgres
async def test_kills_on_postgresql(tmp_path: Path, tool_log: Path, pg_url: str) -> None:
    del tool_log
    figures = await kill_rounds(tmp_path, KILLS, storage=pg_url)
    assert figures.survived == KILLS
    assert figures.found == figures.acknowledged
    assert figures.acknowledged >= KILLS


async def test_load_and_memory(server: ServerProcess) -> None:
    url = server.start()
    figures = await load(url, concurrent=50, contexts=500)
    assert figures.contexts == 500
    process = server.process
    assert process is not None
    steady = await memory(url, process.pid, seconds=20.0, warmup=8.0)
    p50, p99 = percentile(figures.latencies, 0.5), percentile(figures.latencies, 0.99)
    latency = f"{p50:.3f} / {p99:.3f}"
    print(
        render_table(
            [
                (
                    "load p50 / p99 s",
                    latency,
                ),
                ("rss start / end KiB", f"{steady.rss_start} / {steady.rss_end}"),
                ("fds start / end", f"{steady.fds_start} / {steady.fds_end}"),
            ]
        )
    )
    assert steady.turns > 50
    assert abs(steady.rss_drift) <= 0.10, f"RSS drifted {steady.rss_drift:.1%}"
    assert steady.fds_end <= steady.fds_start + 5, "file descriptors grew"
