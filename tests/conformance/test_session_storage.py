"""The SessionStorage conformance suite (`agentkeel.testing`) on the built-in backends."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentkeel.storage import InMemoryStorage, LocalFileStorage
from agentkeel.testing import SessionStorageSuite, StorageFactory


class TestInMemoryStorage(SessionStorageSuite):
    @pytest.fixture
    def reopen_storage(self) -> StorageFactory:
        memory = InMemoryStorage()
        return lambda: memory


class TestLocalFileStorage(SessionStorageSuite):
    reads_only_new_messages = False  # one process writes a folder: it reads it all again

    @pytest.fixture
    def reopen_storage(self, tmp_path: Path) -> StorageFactory:
        return lambda: LocalFileStorage(tmp_path / "sessions")
