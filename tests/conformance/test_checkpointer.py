"""The Checkpointer conformance suite: every backend must behave exactly like this."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import pytest

from agentkeel.checkpoint import Checkpoint, Checkpointer
from agentkeel.errors import StorageError
from agentkeel.messages import JSONObject
from agentkeel.storage import SessionKey

pytestmark = pytest.mark.anyio

CheckpointerFactory = Callable[[], Checkpointer]

KEY = SessionKey(definition="chat", context_id="ctx-1")


def checkpoint(checkpoint_id: str, created_at: float, **payload: str) -> Checkpoint:
    return Checkpoint(
        id=checkpoint_id,
        run_id=f"run-of-{checkpoint_id}",
        created_at=created_at,
        payload={"messages": [{"role": "user"}], "step": 2, **payload},
    )


async def test_latest_of_an_empty_thread_is_none(checkpointer: Checkpointer) -> None:
    assert await checkpointer.latest(KEY) is None


async def test_a_checkpoint_round_trips(reopen_checkpointer: CheckpointerFactory) -> None:
    saved = Checkpoint(
        id="ckpt-1",
        run_id="run-1",
        created_at=12.5,
        payload={"nested": {"list": [1, 2.5, None, True, "é 🎉\n"]}, "empty": {}},
    )
    await reopen_checkpointer().put(KEY, saved)
    assert await reopen_checkpointer().latest(KEY) == saved


async def test_latest_is_the_newest(reopen_checkpointer: CheckpointerFactory) -> None:
    checkpointer = reopen_checkpointer()
    await checkpointer.put(KEY, checkpoint("ckpt-b", 2.0))
    await checkpointer.put(KEY, checkpoint("ckpt-c", 3.0))
    await checkpointer.put(KEY, checkpoint("ckpt-a", 1.0))
    latest = await reopen_checkpointer().latest(KEY)
    assert latest is not None and latest.id == "ckpt-c"


async def test_equal_times_are_ordered_by_id(reopen_checkpointer: CheckpointerFactory) -> None:
    checkpointer = reopen_checkpointer()
    await checkpointer.put(KEY, checkpoint("ckpt-2", 5.0))
    await checkpointer.put(KEY, checkpoint("ckpt-1", 5.0))
    latest = await reopen_checkpointer().latest(KEY)
    assert latest is not None and latest.id == "ckpt-2"


async def test_put_with_the_same_id_replaces(reopen_checkpointer: CheckpointerFactory) -> None:
    checkpointer = reopen_checkpointer()
    await checkpointer.put(KEY, checkpoint("ckpt-1", 1.0, note="first"))
    await checkpointer.put(KEY, checkpoint("ckpt-1", 1.0, note="second"))
    latest = await reopen_checkpointer().latest(KEY)
    assert latest == checkpoint("ckpt-1", 1.0, note="second")
    await checkpointer.delete(KEY, "ckpt-1")
    assert await reopen_checkpointer().latest(KEY) is None


async def test_delete_removes_one(reopen_checkpointer: CheckpointerFactory) -> None:
    checkpointer = reopen_checkpointer()
    await checkpointer.put(KEY, checkpoint("ckpt-1", 1.0))
    await checkpointer.put(KEY, checkpoint("ckpt-2", 2.0))
    await checkpointer.delete(KEY, "ckpt-2")
    latest = await reopen_checkpointer().latest(KEY)
    assert latest is not None and latest.id == "ckpt-1"
    await checkpointer.delete(KEY, "ckpt-unknown")
    await checkpointer.delete(SessionKey(definition="chat", context_id="ctx-none"), "ckpt-1")
    await checkpointer.delete(KEY, "ckpt-1")
    assert await reopen_checkpointer().latest(KEY) is None


async def test_delete_thread_removes_all(reopen_checkpointer: CheckpointerFactory) -> None:
    checkpointer = reopen_checkpointer()
    other = SessionKey(definition="chat", context_id="ctx-2")
    for index in range(3):
        await checkpointer.put(KEY, checkpoint(f"ckpt-{index}", float(index)))
    await checkpointer.put(other, checkpoint("ckpt-other", 1.0))
    await checkpointer.delete_thread(KEY)
    assert await reopen_checkpointer().latest(KEY) is None
    assert await reopen_checkpointer().latest(other) == checkpoint("ckpt-other", 1.0)
    await checkpointer.delete_thread(KEY)  # an unknown thread is fine
    await checkpointer.put(KEY, checkpoint("ckpt-new", 9.0))
    assert await reopen_checkpointer().latest(KEY) == checkpoint("ckpt-new", 9.0)


@pytest.mark.parametrize(
    "other",
    [
        SessionKey(definition="chat", context_id="ctx-2"),
        SessionKey(definition="other", context_id="ctx-1"),
        SessionKey(definition="chat", context_id="ctx-1", principal="alice"),
        SessionKey(definition="chat", context_id="ctx-1", principal="chat:ctx-1"),
    ],
    ids=["context", "definition", "principal", "principal-like-a-thread"],
)
async def test_threads_are_isolated(
    reopen_checkpointer: CheckpointerFactory, other: SessionKey
) -> None:
    checkpointer = reopen_checkpointer()
    await checkpointer.put(KEY, checkpoint("ckpt-1", 1.0))
    assert await reopen_checkpointer().latest(other) is None
    await checkpointer.put(other, checkpoint("ckpt-9", 9.0))
    await checkpointer.delete_thread(other)
    assert await reopen_checkpointer().latest(KEY) == checkpoint("ckpt-1", 1.0)


@pytest.mark.parametrize("checkpoint_id", ["../x", "/etc/passwd", "%2e%2e%2f", "a/b", "\x00", ".."])
async def test_any_checkpoint_id_is_a_key_not_a_path(
    reopen_checkpointer: CheckpointerFactory, checkpoint_id: str
) -> None:
    await reopen_checkpointer().put(KEY, checkpoint(checkpoint_id, 1.0))
    assert await reopen_checkpointer().latest(KEY) == checkpoint(checkpoint_id, 1.0)
    await reopen_checkpointer().delete(KEY, checkpoint_id)
    assert await reopen_checkpointer().latest(KEY) is None


async def test_a_stored_payload_cannot_be_changed_by_the_caller(
    reopen_checkpointer: CheckpointerFactory,
) -> None:
    payload: JSONObject = {"items": [1]}
    await reopen_checkpointer().put(
        KEY, Checkpoint(id="c", run_id="r", created_at=1.0, payload=payload)
    )
    payload["items"] = [2]
    first = await reopen_checkpointer().latest(KEY)
    assert first is not None and first.payload == {"items": [1]}
    first.payload["items"] = [3]
    second = await reopen_checkpointer().latest(KEY)
    assert second is not None and second.payload == {"items": [1]}


async def test_a_payload_that_is_not_json_is_refused(
    reopen_checkpointer: CheckpointerFactory,
) -> None:
    bad = Checkpoint(id="c", run_id="r", created_at=1.0, payload=cast(JSONObject, {"x": object()}))
    with pytest.raises(StorageError):
        await reopen_checkpointer().put(KEY, bad)
    assert await reopen_checkpointer().latest(KEY) is None
