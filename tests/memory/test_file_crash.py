"""The file backend survives a SIGKILL in the middle of a write.

A child process appends large batches as fast as it can and prints each key once its
`put` returned; the parent kills it with SIGKILL at varying moments, several times over
the same folder. Each time, a fresh store must open the log, hold every acknowledged
batch whole, and never half a batch.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from agentkeel.memory import FileMemoryStore, MemoryScope

pytestmark = pytest.mark.anyio

_CHILD = textwrap.dedent(
    """
    import sys, anyio, numpy as np
    from agentkeel.memory import FileMemoryStore, MemoryScope
    from agentkeel.testing.memory_store import make_item

    async def main() -> None:
        store = FileMemoryStore(sys.argv[1])
        scope = MemoryScope("alice")
        rng = np.random.default_rng(int(sys.argv[2]))
        batch = 0
        while True:
            items = [
                make_item(f"r{sys.argv[2]}-b{batch}-{i}", rng.normal(size=384), text="x" * 4000)
                for i in range(40)
            ]
            await store.put(scope, items)
            print(f"r{sys.argv[2]}-b{batch}", flush=True)
            batch += 1

    anyio.run(main)
    """
)


async def test_sigkill_mid_write_leaves_whole_batches(tmp_path: Path) -> None:
    folder = tmp_path / "memory"
    acked: list[str] = []
    for round_ in range(6):
        child = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(folder), str(round_)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None
        for _ in range(2 + round_):
            line = child.stdout.readline().strip()
            assert line, "the child died before acknowledging a batch"
            acked.append(line)
        time.sleep(0.003 * round_)  # land the kill at different points of the next append
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        acked.extend(line.strip() for line in child.stdout if line.strip())
        child.stdout.close()

        store = FileMemoryStore(folder)
        page_keys: set[str] = set()
        cursor = None
        while True:
            page = await store.list(MemoryScope("alice"), cursor=cursor, limit=200)
            page_keys.update(i.key for i in page.items)
            cursor = page.next_cursor
            if cursor is None:
                break
        batches: dict[str, int] = {}
        for key in page_keys:
            batch = key.rsplit("-", 1)[0]
            batches[batch] = batches.get(batch, 0) + 1
        assert all(n == 40 for n in batches.values()), f"half a batch survived: {batches}"
        missing = [b for b in acked if b not in batches]
        assert not missing, f"acknowledged batches lost: {missing}"
    log = next(folder.rglob("memory.jsonl")).read_bytes()
    assert log.endswith(b"\n"), "a torn tail was left in the log"
