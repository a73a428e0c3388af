"""The event loop the conformance suites run on, and backends for module-level suites.

The suites of `agentkeel.testing` are classes whose subclasses give their own
`reopen_storage`; a module-level test here gets every built-in backend from this one.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from agentkeel.storage import InMemoryStorage, LocalFileStorage, SessionStorage

StorageFactory = Callable[[], SessionStorage]


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
