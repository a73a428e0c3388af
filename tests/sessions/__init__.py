"""Helpers for tests that run each step in a new process over the same folders."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


def run_step(worker: Path, data: Path, mode: str, *args: str) -> dict[str, Any]:
    """Run `worker MODE DATA ARGS...` in a fresh interpreter; return its last JSON line."""
    done = subprocess.run(
        [sys.executable, str(worker), mode, str(data), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONWARNINGS": "error"},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def side_effects(data: Path) -> list[str]:
    """The lines the workers' tools logged (what really happened, once each)."""
    path = data / "side-effects.log"
    return path.read_text().splitlines() if path.exists() else []
