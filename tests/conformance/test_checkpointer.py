"""The Checkpointer conformance suite (`agentkeel.testing`) on the built-in checkpointers."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentkeel.checkpoint import FileCheckpointer, InMemoryCheckpointer
from agentkeel.testing import CheckpointerFactory, CheckpointerSuite


class TestInMemoryCheckpointer(CheckpointerSuite):
    @pytest.fixture
    def reopen_checkpointer(self) -> CheckpointerFactory:
        memory = InMemoryCheckpointer()
        return lambda: memory


class TestFileCheckpointer(CheckpointerSuite):
    @pytest.fixture
    def reopen_checkpointer(self, tmp_path: Path) -> CheckpointerFactory:
        return lambda: FileCheckpointer(tmp_path / "checkpoints")
