"""One fixture per interface, parametrized over every backend the conformance suite covers.

Each backend is given as a factory: every call returns an instance over the *same*
stored data (for a file backend, a fresh object on the same folder, so reads go to the
disk and not to a cache; for an in-memory backend, the one instance). A new backend is
done when it is added here and the suite passes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from agentkeel.checkpoint import Checkpointer, FileCheckpointer, InMemoryCheckpointer
from agentkeel.storage import InMemoryStorage, LocalFileStorage, SessionStorage

StorageFactory = Callable[[], SessionStorage]
CheckpointerFactory = Callable[[], Checkpointer]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["memory", "file"])
def reopen_storage(request: pytest.FixtureRequest, tmp_path: Path) -> StorageFactory:
    if request.param == "memory":
        memory = InMemoryStorage()
        return lambda: memory
    return lambda: LocalFileStorage(tmp_path / "sessions")


@pytest.fixture
def storage(reopen_storage: StorageFactory) -> SessionStorage:
    return reopen_storage()


@pytest.fixture(params=["memory", "file"])
def reopen_checkpointer(request: pytest.FixtureRequest, tmp_path: Path) -> CheckpointerFactory:
    if request.param == "memory":
        memory = InMemoryCheckpointer()
        return lambda: memory
    return lambda: FileCheckpointer(tmp_path / "checkpoints")


@pytest.fixture
def checkpointer(reopen_checkpointer: CheckpointerFactory) -> Checkpointer:
    return reopen_checkpointer()
