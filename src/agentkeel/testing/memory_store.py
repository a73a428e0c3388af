"""The MemoryStore conformance suite: what every memory backend must do.

Each check is an async function taking `reopen`, a factory that returns the backend
over the *same* stored data (a file backend: a fresh instance on the same folder, so
reads go to the disk; an in-memory backend: the one instance). A test runner calls
every function of `MEMORY_STORE_CHECKS`; a backend is done when all of them pass::

    @pytest.mark.parametrize("check", MEMORY_STORE_CHECKS, ids=lambda c: c.__name__)
    async def test_conformance(check, tmp_path):
        await check(lambda: FileMemoryStore(tmp_path))

The checks raise AssertionError with a message saying what the backend got wrong.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta

import numpy as np

from agentkeel.memory.errors import EmbeddingMismatchError, InvalidMemoryKeyError
from agentkeel.memory.records import MemoryItem, MemoryScope, MemorySource
from agentkeel.memory.store import MemoryStore
from agentkeel.messages import JSONValue

__all__ = ["MEMORY_STORE_CHECKS", "Reopen", "make_item"]

Reopen = Callable[[], MemoryStore]
_T0 = datetime(2026, 1, 1, tzinfo=UTC)
ALICE = MemoryScope("alice")
BOB = MemoryScope("bob")
ALICE_HELPER = MemoryScope("alice", "helper")


def make_item(
    key: str,
    vector: Sequence[float],
    *,
    text: str | None = None,
    namespace: str = "memories",
    value: JSONValue = None,
    model: str = "test-model",
    at: int = 0,
) -> MemoryItem:
    """An item whose vector is `vector` normalised, updated `at` seconds after a fixed time."""
    row = np.asarray(vector, dtype=np.float32)
    row = row / np.linalg.norm(row)
    stamp = _T0 + timedelta(seconds=at)
    return MemoryItem(
        namespace=namespace,
        key=key,
        text=text or f"text of {key}",
        value=value,
        created_at=stamp,
        updated_at=stamp,
        source=MemorySource(context_id="ctx-1", agent="helper", run_id="run-1"),
        model=model,
        vector=row.astype(np.float32),
    )


async def _raises(kind: type[Exception], action: Awaitable[object], what: str) -> None:
    try:
        await action
    except kind:
        return
    raise AssertionError(f"{what} should raise {kind.__name__}")


async def round_trip_keeps_every_field(reopen: Reopen) -> None:
    """What is put comes back whole: text, value, times, source, model and vector."""
    item = make_item("colour", [1, 0, 0], text="favourite colour is blue", value={"c": "blue"})
    await reopen().put(ALICE, [item])
    got = await reopen().get(ALICE, "memories", "colour")
    assert got is not None, "a stored item was not found"
    assert (got.text, got.value, got.model) == (item.text, item.value, item.model)
    assert (got.created_at, got.updated_at, got.source) == (
        item.created_at,
        item.updated_at,
        item.source,
    )
    assert np.allclose(got.vector, item.vector), "the vector changed in storage"
    assert await reopen().get(ALICE, "memories", "other") is None


async def put_replaces_the_same_key(reopen: Reopen) -> None:
    """A key holds one item: putting it again replaces it."""
    store = reopen()
    await store.put(ALICE, [make_item("k", [1, 0], text="old")])
    await store.put(ALICE, [make_item("k", [0, 1], text="new", at=5)])
    page = await reopen().list(ALICE)
    assert [i.text for i in page.items] == ["new"], "a replaced item is still listed"


async def scopes_never_see_each_other(reopen: Reopen) -> None:
    """Principals are isolated, and an agent's scope is apart from the shared one."""
    store = reopen()
    await store.put(ALICE, [make_item("k", [1, 0], text="alice's")])
    await store.put(BOB, [make_item("k", [1, 0], text="bob's")])
    await store.put(ALICE_HELPER, [make_item("h", [1, 0], text="helper's")])
    store = reopen()
    bob = await store.get(BOB, "memories", "k")
    assert bob is not None and bob.text == "bob's", "one principal's put overwrote another's"
    assert await store.get(BOB, "memories", "h") is None
    assert await store.get(ALICE, "memories", "h") is None, "an agent scope leaked"
    found = await store.search(BOB, np.array([1, 0], np.float32), model="test-model", limit=10)
    assert [m.item.text for m in found] == ["bob's"], "search crossed principals"
    assert [i.text for i in (await store.list(ALICE)).items] == ["alice's"]


async def search_ranks_by_cosine(reopen: Reopen) -> None:
    """Best match first, scores are cosines, `limit` and `namespace` are honoured."""
    await reopen().put(
        ALICE,
        [
            make_item("east", [1, 0, 0]),
            make_item("north-east", [1, 1, 0]),
            make_item("north", [0, 1, 0]),
            make_item("other-ns", [1, 0, 0], namespace="notes"),
        ],
    )
    store = reopen()
    query = np.array([1, 0, 0], np.float32)
    found = await store.search(ALICE, query, model="test-model", namespace="memories", limit=2)
    assert [m.item.key for m in found] == ["east", "north-east"], "wrong order or limit"
    assert abs(found[0].score - 1.0) < 1e-5 and abs(found[1].score - 0.7071) < 1e-3
    everywhere = await store.search(ALICE, query, model="test-model", limit=10)
    assert {m.item.key for m in everywhere} == {"east", "north-east", "north", "other-ns"}
    assert await store.search(BOB, query, model="test-model") == []


async def vectors_of_two_models_never_mix(reopen: Reopen) -> None:
    """Another model or dimension is refused, on put (all or none) and on search."""
    store = reopen()
    await store.put(ALICE, [make_item("a", [1, 0, 0])])
    await _raises(
        EmbeddingMismatchError,
        store.put(ALICE, [make_item("b", [1, 0, 0], model="other")]),
        "a put with another model",
    )
    await _raises(
        EmbeddingMismatchError,
        store.put(ALICE, [make_item("c", [1, 0, 0]), make_item("d", [1, 0])]),
        "a batch with another dimension",
    )
    assert await reopen().get(ALICE, "memories", "c") is None, "a refused batch was half stored"
    await _raises(
        EmbeddingMismatchError,
        reopen().search(ALICE, np.array([1, 0, 0], np.float32), model="other"),
        "a search with another model",
    )
    await reopen().put(BOB, [make_item("b", [1, 0], model="other")])  # another scope may


async def delete_removes_one_a_namespace_or_all(reopen: Reopen) -> None:
    """Deleting counts what went; deleting a scope leaves nothing of it."""
    await reopen().put(
        ALICE,
        [
            make_item("a", [1, 0]),
            make_item("b", [0, 1]),
            make_item("n", [1, 1], namespace="notes"),
        ],
    )
    await reopen().put(BOB, [make_item("a", [1, 0])])
    assert await reopen().delete(ALICE, "memories", "a") == 1
    assert await reopen().delete(ALICE, "memories", "a") == 0, "deleted twice"
    assert await reopen().get(ALICE, "memories", "a") is None, "a deleted item came back"
    assert await reopen().delete(ALICE, "notes") == 1
    assert await reopen().delete(ALICE) == 1
    store = reopen()
    assert (await store.list(ALICE)).items == ()
    assert await store.search(ALICE, np.array([1, 0], np.float32), model="test-model") == []
    assert await store.get(BOB, "memories", "a") is not None, "deleting one scope hit another"
    await store.put(ALICE, [make_item("x", [1, 0, 0, 0], model="new")])  # a fresh start


async def list_pages_newest_first(reopen: Reopen) -> None:
    """Pages are complete, never repeat an item, and run newest first."""
    await reopen().put(ALICE, [make_item(f"k{i:02d}", [1, i], at=i) for i in range(25)])
    store = reopen()
    seen: list[str] = []
    cursor = None
    for _ in range(10):
        page = await store.list(ALICE, cursor=cursor, limit=10)
        seen.extend(i.key for i in page.items)
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == [f"k{i:02d}" for i in reversed(range(25))], "pages lost, repeated or misordered"
    await _raises(InvalidMemoryKeyError, store.list(ALICE, cursor="garbage!"), "a forged cursor")
    await _raises(InvalidMemoryKeyError, store.list(ALICE, limit=0), "a limit of 0")


async def bad_keys_are_refused(reopen: Reopen) -> None:
    """Keys with slashes or control characters and bad namespaces never reach storage."""
    store = reopen()
    for key in ("", "a/b", "..\\x", "tab\there", " padded"):
        await _raises(InvalidMemoryKeyError, store.put(ALICE, [make_item(key, [1])]), repr(key))
    await _raises(
        InvalidMemoryKeyError, store.put(ALICE, [make_item("k", [1], namespace="../x")]), "ns"
    )
    assert (await reopen().list(ALICE)).items == ()


MEMORY_STORE_CHECKS: tuple[Callable[[Reopen], Awaitable[None]], ...] = (
    round_trip_keeps_every_field,
    put_replaces_the_same_key,
    scopes_never_see_each_other,
    search_ranks_by_cosine,
    vectors_of_two_models_never_mix,
    delete_removes_one_a_namespace_or_all,
    list_pages_newest_first,
    bad_keys_are_refused,
)
"""Every check, in order; run each against a fresh, empty backend."""
