"""A cut (edit, regenerate) is part of its turn: SIGKILL at any instant leaves the history
as it was before the turn or as it is after it, never cut without the turn's messages."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentkeel import LocalFileStorage
from agentkeel.keys import SessionKey
from agentkeel.storage.base import SessionStorage
from agentkeel.storage.postgres import PostgresStorage

WORKER = Path(__file__).with_name("cut_worker.py")
KEY = SessionKey(definition="cut", context_id="ctx-cut")
KILLS = 15


async def check(storage: SessionStorage) -> int:
    """The history is whole: exchanges that match, and the state its last turn wrote."""
    snapshot = await storage.load(KEY)
    if snapshot is None:
        return 0
    messages = snapshot.messages
    assert [m.role for m in messages] == ["user", "assistant"] * (len(messages) // 2)
    for question, answer in zip(messages[::2], messages[1::2], strict=True):
        assert answer.text.split("-")[0] == "a" + question.text[1:], (question, answer)
    assert snapshot.state.get("count") == snapshot.version
    assert snapshot.state.get("length") == len(messages)
    assert len({m.id for m in messages}) == len(messages)
    return snapshot.version


async def sigkill_during_cuts(tmp_path: Path, storage: SessionStorage, url: str | None) -> None:
    rng = random.Random(20261201)
    versions = [0]
    for _ in range(KILLS):
        worker = subprocess.Popen(
            [sys.executable, str(WORKER), str(tmp_path), *([url] if url else [])],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert worker.stdout is not None
        assert worker.stdout.readline() == b"ready\n"  # EOF instead if the worker died
        time.sleep(rng.uniform(0.05, 0.4))
        worker.send_signal(signal.SIGKILL)
        _, errors = worker.communicate(timeout=10)
        assert worker.returncode == -signal.SIGKILL, errors.decode()
        versions.append(await check(storage))
    assert versions == sorted(versions)
    assert sum(b > a for a, b in zip(versions, versions[1:], strict=False)) >= KILLS - 2


@pytest.mark.anyio
async def test_sigkill_during_cuts_on_files(tmp_path: Path) -> None:
    await sigkill_during_cuts(tmp_path, LocalFileStorage(tmp_path / "sessions"), None)


@pytest.mark.anyio
@pytest.mark.postgres
async def test_sigkill_during_cuts_on_postgresql(
    tmp_path: Path, pg_url: str, pg_storage: PostgresStorage
) -> None:
    await sigkill_during_cuts(tmp_path, pg_storage.sharing(), pg_url)
