"""What a blocking ``agent(prompt)`` call costs, beside a new event loop per call.

Two ways to run the same turns of one ScriptedModel agent from blocking code, alternating
turn by turn (so disk and scheduler noise hits both alike), in the
same process and run:

- portal: ``agent(prompt)``, which runs on the one event loop the Agent keeps for its
  life (a background thread started on the first call);
- fresh loop (baseline): ``anyio.run(agent.invoke_async, prompt)``, a new event loop per
  call, which is what ``agent(prompt)`` did before it kept one.

Each with no session and with a LocalFileStorage session (whose fsynced writes run in
the loop's worker threads: a fresh loop starts fresh workers on every call). Printed:
wall time per turn (median of the turns), the OS threads started during the turns
(counted by wrapping ``threading.Thread.start`` in this script) and the portal/fresh
ratio.

Run ``.venv/bin/python bench/sync_api.py [--turns N]``. Prints, never asserts.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import anyio

from agentkeel import Agent, LocalFileStorage, ScriptedModel, SessionManager, tool


@tool
def note(text: str) -> str:
    """A sync tool (it runs in a worker thread of the loop)."""
    return text


def make_agent(folder: Path | None) -> Agent:
    session = None if folder is None else SessionManager("bench:ctx-sync", LocalFileStorage(folder))
    return Agent(ScriptedModel(["fine"], repeat=True, chunk_size=8), session_manager=session)


_starts = 0
_start = threading.Thread.start


def _counting_start(self: threading.Thread) -> None:
    global _starts
    _starts += 1
    _start(self)


threading.Thread.start = _counting_start  # type: ignore[method-assign]


def measure(
    portal: Callable[[], object], fresh: Callable[[], object], turns: int
) -> tuple[tuple[float, int], tuple[float, int]]:
    """Median ms per turn and OS threads started, for each way; turns alternate."""
    times: dict[str, list[float]] = {"portal": [], "fresh": []}
    starts = {"portal": 0, "fresh": 0}
    for _ in range(turns):
        for name, turn in (("portal", portal), ("fresh", fresh)):
            first = _starts
            started = time.perf_counter()
            turn()
            times[name].append((time.perf_counter() - started) * 1000)
            starts[name] += _starts - first
    return (
        (statistics.median(times["portal"]), starts["portal"]),
        (statistics.median(times["fresh"]), starts["fresh"]),
    )


def row(name: str, folder: Path | None, turns: int) -> None:
    portal_agent = make_agent(None if folder is None else folder / "portal")
    fresh_agent = make_agent(None if folder is None else folder / "fresh")
    portal_agent("warm up")
    anyio.run(fresh_agent.invoke_async, "warm up")
    (portal_ms, portal_threads), (fresh_ms, fresh_threads) = measure(
        lambda: portal_agent("hello"),
        lambda: anyio.run(fresh_agent.invoke_async, "hello"),
        turns,
    )
    portal_agent.close()
    print(
        f"{name:<10} portal {portal_ms:7.3f} ms/turn ({portal_threads:3d} threads)"
        f" | fresh loop {fresh_ms:7.3f} ms/turn ({fresh_threads:3d} threads)"
        f" | ratio {portal_ms / fresh_ms:5.2f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    args = parser.parse_args()
    print(f"{args.turns} turns per row and way, alternating, after one warm-up turn each")
    row("memory", None, args.turns)
    with tempfile.TemporaryDirectory() as folder:
        row("file", Path(folder), args.turns)


if __name__ == "__main__":
    main()
