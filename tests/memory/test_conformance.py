"""The MemoryStore conformance suite against the in-process backends (PostgreSQL runs it
in tests/postgres/test_memory_store.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from agentkeel.memory import FileMemoryStore, InMemoryMemoryStore, MemoryStore
from agentkeel.testing.memory_store import MEMORY_STORE_CHECKS, Reopen

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["memory", "file"])
def reopen(request: pytest.FixtureRequest, tmp_path: Path) -> Reopen:
    if request.param == "memory":
        store: MemoryStore = InMemoryMemoryStore()
        return lambda: store
    return lambda: FileMemoryStore(tmp_path / "memory")


@pytest.mark.parametrize("check", MEMORY_STORE_CHECKS, ids=lambda c: c.__name__)
async def test_memory_store_conformance(
    check: Callable[[Reopen], Awaitable[None]], reopen: Reopen
) -> None:
    await check(reopen)


def test_backends_implement_the_protocol(tmp_path: Path) -> None:
    assert isinstance(InMemoryMemoryStore(), MemoryStore)
    assert isinstance(FileMemoryStore(tmp_path), MemoryStore)


async def test_deleting_a_scope_leaves_no_file(tmp_path: Path) -> None:
    from agentkeel.memory import MemoryScope
    from agentkeel.testing.memory_store import make_item

    store = FileMemoryStore(tmp_path / "memory")
    await store.put(MemoryScope("carol"), [make_item("a", [1, 0])])
    assert any((tmp_path / "memory").rglob("*.jsonl"))
    await store.delete(MemoryScope("carol"))
    assert list((tmp_path / "memory").iterdir()) == [], "the principal's folder stayed"
