"""The soak: SIGKILLs during turns, load, and memory over time, as a table of figures.

Runs `tests/endurance/harness.py` against real ``agentkeel serve`` processes on loopback:

- kills on the file backend and (when PostgreSQL answers) on PostgreSQL: after each,
  every turn whose done frame reached its client is stored, the history keeps a
  strict provider's rules, and the next turn works;
- load: 50 concurrent turns on one context, 500 contexts through ``maxContexts`` 100;
- memory: a steady load; RSS and open fds after warm-up against the end.

``.venv/bin/python bench/soak.py`` is the long form (``make soak``: 200 kills per
backend, 30 minutes of steady load); ``--short`` is the CI-sized one. The figures are
printed and written to ``bench/results/soak-<form>.json``. Assertions fail the run (a
lost acknowledged turn is a bug, not a number).
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import tempfile
from pathlib import Path

import anyio

TESTS = Path(__file__).resolve().parent.parent / "tests"
sys.path.insert(0, str(TESTS))

from e2e import TOOL_LOG, ServerProcess, write_framework  # noqa: E402
from endurance.harness import (  # noqa: E402
    KillFigures,
    figures_json,
    kill_rounds,
    load,
    memory,
    percentile,
    render_table,
    server_document,
)

RESULTS = Path(__file__).resolve().parent / "results"
POSTGRES_ENV = "AGENTKEEL_BENCH_POSTGRES"
LOCAL_POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"


def postgres_url() -> str | None:
    """A fresh schema's storage URL, or None when PostgreSQL does not answer."""
    try:
        import psycopg
    except ImportError:
        return None
    dsn = os.environ.get(POSTGRES_ENV, LOCAL_POSTGRES)
    try:
        with psycopg.connect(dsn, connect_timeout=3):
            pass
    except psycopg.Error:
        return None
    return f"{dsn}?schema=soak_{secrets.token_hex(4)}"


def drop_schema(url: str) -> None:
    """Drop the soak's schema (named in `url`) from the database."""
    import psycopg
    from psycopg import sql

    dsn, _, schema = url.partition("?schema=")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


async def main(kills: int, seconds: float, warmup: float, form: str) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        os.environ[TOOL_LOG] = str(folder / "tool-runs.log")
        killed: list[KillFigures] = []
        (folder / "file").mkdir()
        killed.append(await kill_rounds(folder / "file", kills))
        pg = postgres_url()
        if pg is not None:
            (folder / "pg").mkdir()
            try:
                killed.append(await kill_rounds(folder / "pg", kills, storage=pg))
            finally:
                drop_schema(pg)
        else:
            print("PostgreSQL does not answer: kills on the file backend only")
        (folder / "load").mkdir()
        server = ServerProcess(
            write_framework(folder / "load", server_document(None, max_contexts=100))
        )
        try:
            url = server.start()
            loaded = await load(url)
            assert server.process is not None
            steady = await memory(url, server.process.pid, seconds=seconds, warmup=warmup)
        finally:
            server.stop()
    rows = []
    for part in killed:
        rows.append((f"kills survived ({part.backend})", f"{part.survived}/{part.kills}"))
        rows.append(
            (f"turns acknowledged / found ({part.backend})", f"{part.acknowledged} / {part.found}")
        )
        rows.append((f"kill-round turn p50 / p99 ({part.backend})", _latency(part.latencies)))
    rows.append(("load: turns on one context", str(loaded.one_context_turns)))
    rows.append(
        ("load: contexts (maxContexts 100) / turns", f"{loaded.contexts} / {loaded.context_turns}")
    )
    rows.append(("load: turn p50 / p99", _latency(loaded.latencies)))
    rows.append(("memory: seconds / turns", f"{steady.seconds:.0f} / {steady.turns}"))
    rows.append(("memory: turn p50 / p99", _latency(steady.latencies)))
    rows.append(
        (
            "memory: RSS start / end (KiB)",
            f"{steady.rss_start} / {steady.rss_end} ({steady.rss_drift:+.1%})",
        )
    )
    rows.append(("memory: fds start / end", f"{steady.fds_start} / {steady.fds_end}"))
    print(render_table(rows))
    RESULTS.mkdir(exist_ok=True)
    target = RESULTS / f"soak-{form}.json"
    target.write_text(figures_json(*killed, loaded, steady) + "\n", encoding="utf-8")
    print(f"written to {target}")
    assert all(part.survived == part.kills and part.found == part.acknowledged for part in killed)
    assert abs(steady.rss_drift) <= 0.10, "RSS drifted more than 10%"
    assert steady.fds_end <= steady.fds_start + 5, "file descriptors grew"


def _latency(values: list[float]) -> str:
    return f"{percentile(values, 0.5) * 1000:.1f} / {percentile(values, 0.99) * 1000:.1f} ms"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short", action="store_true", help="the CI-sized form")
    parser.add_argument("--kills", type=int, help="kills per backend (default 200; short: 6)")
    parser.add_argument(
        "--minutes", type=float, help="steady-load minutes (default 30; short: 0.5)"
    )
    args = parser.parse_args()
    kills = args.kills or (6 if args.short else 200)
    minutes = args.minutes or (0.5 if args.short else 30.0)
    seconds = minutes * 60
    form = "short" if args.short else "long"
    if (args.kills or args.minutes) and not args.short:
        form = f"partial-{kills}kills-{minutes:g}min"  # never mistaken for the long form
    anyio.run(main, kills, seconds, min(seconds / 3, 120.0), form)
