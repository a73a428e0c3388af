"""The Checkpointer conformance suite: every backend must behave exactly like this.

Subclass `CheckpointerSuite` in a test module and give it a `reopen_checkpointer`
fixture: a factory whose every call returns a checkpointer over the *same* stored data
(a fresh object for a persistent backend, so that reads reach the store)::

    class TestMyCheckpointer(CheckpointerSuite):
        @pytest.fixture
        def reopen_checkpointer(self) -> CheckpointerFactory:
            return lambda: MyCheckpointer(...)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import cast

import pytest

from agentkeel.checkpoint import Checkpoint, Checkpointer
from agentkeel.errors import StorageError
from agentkeel.keys import SessionKey
from agentkeel.messages import JSONObject

__all__ = ["CheckpointerFactory", "CheckpointerSuite"]

CheckpointerFactory = Callable[[], Checkpointer]

KEY = SessionKey(definition="chat", context_id="ctx-1")


def checkpoint(checkpoint_id: str, created_at: float, **payload: str) -> Checkpoint:
    return Checkpoint(
        id=checkpoint_id,
        run_id=f"run-of-{checkpoint_id}",
        created_at=created_at,
        payload={"messages": [{"role": "user"}], "step": 2, **payload},
    )


def unnumbered(item: Checkpoint | None) -> Checkpoint | None:
    """`item` with the sequence its checkpointer gave it taken off, to compare with a put."""
    return None if item is None else replace(item, sequence=0)


class CheckpointerSuite:
    """What every Checkpointer does; a subclass provides `reopen_checkpointer`."""

    pytestmark = [pytest.mark.anyio]

    @pytest.fixture
    def checkpointer(self, reopen_checkpointer: CheckpointerFactory) -> Checkpointer:
        """One checkpointer of the backend under test."""
        return reopen_checkpointer()

    async def test_latest_of_an_empty_thread_is_none(self, checkpointer: Checkpointer) -> None:
        assert await checkpointer.latest(KEY) is None

    async def test_a_checkpoint_round_trips(self, reopen_checkpointer: CheckpointerFactory) -> None:
        saved = Checkpoint(
            id="ckpt-1",
            run_id="run-1",
            created_at=12.5,
            payload={"nested": {"list": [1, 2.5, None, True, "é 🎉\n"]}, "empty": {}},
        )
        sequence = await reopen_checkpointer().put(KEY, saved)
        assert sequence >= 1
        assert await reopen_checkpointer().latest(KEY) == replace(saved, sequence=sequence)

    async def test_latest_is_the_one_put_last_whatever_the_clock(
        self, reopen_checkpointer: CheckpointerFactory
    ) -> None:
        checkpointer = reopen_checkpointer()
        await checkpointer.put(KEY, checkpoint("ckpt-b", 2.0))
        await checkpointer.put(KEY, checkpoint("ckpt-c", 3.0))
        await checkpointer.put(KEY, checkpoint("ckpt-a", 1.0))  # a clock stepped back
        latest = await reopen_checkpointer().latest(KEY)
        assert latest is not None and latest.id == "ckpt-a"

    async def test_sequences_only_grow(self, reopen_checkpointer: CheckpointerFactory) -> None:
        checkpointer = reopen_checkpointer()
        first = await checkpointer.put(KEY, checkpoint("ckpt-2", 5.0))
        second = await reopen_checkpointer().put(KEY, checkpoint("ckpt-1", 5.0))
        assert second > first
        latest = await reopen_checkpointer().latest(KEY)
        assert latest is not None and (latest.id, latest.sequence) == ("ckpt-1", second)

    async def test_put_with_the_same_id_replaces(
        self, reopen_checkpointer: CheckpointerFactory
    ) -> None:
        checkpointer = reopen_checkpointer()
        await checkpointer.put(KEY, checkpoint("ckpt-1", 1.0, note="first"))
        sequence = await checkpointer.put(KEY, checkpoint("ckpt-1", 1.0, note="second"))
        latest = await reopen_checkpointer().latest(KEY)
        assert latest == replace(checkpoint("ckpt-1", 1.0, note="second"), sequence=sequence)
        await checkpointer.delete(KEY, "ckpt-1")
        assert await reopen_checkpointer().latest(KEY) is None

    async def test_a_key_that_is_not_a_session_key_is_a_type_error(
        self, checkpointer: Checkpointer
    ) -> None:
        wrong = cast(SessionKey, "chat:ctx-1")
        for call in (
            lambda: checkpointer.put(wrong, checkpoint("ckpt-1", 1.0)),
            lambda: checkpointer.latest(wrong),
            lambda: checkpointer.delete(wrong, "ckpt-1"),
            lambda: checkpointer.delete_thread(wrong),
        ):
            with pytest.raises(TypeError, match=r"SessionKey\.parse\('chat:ctx-1'\)"):
                await call()

    async def test_delete_removes_one(self, reopen_checkpointer: CheckpointerFactory) -> None:
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

    async def test_delete_thread_removes_all(
        self, reopen_checkpointer: CheckpointerFactory
    ) -> None:
        checkpointer = reopen_checkpointer()
        other = SessionKey(definition="chat", context_id="ctx-2")
        for index in range(3):
            await checkpointer.put(KEY, checkpoint(f"ckpt-{index}", float(index)))
        await checkpointer.put(other, checkpoint("ckpt-other", 1.0))
        await checkpointer.delete_thread(KEY)
        assert await reopen_checkpointer().latest(KEY) is None
        assert unnumbered(await reopen_checkpointer().latest(other)) == checkpoint(
            "ckpt-other", 1.0
        )
        await checkpointer.delete_thread(KEY)  # an unknown thread is fine
        await checkpointer.put(KEY, checkpoint("ckpt-new", 9.0))
        assert unnumbered(await reopen_checkpointer().latest(KEY)) == checkpoint("ckpt-new", 9.0)

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
        self, reopen_checkpointer: CheckpointerFactory, other: SessionKey
    ) -> None:
        checkpointer = reopen_checkpointer()
        await checkpointer.put(KEY, checkpoint("ckpt-1", 1.0))
        assert await reopen_checkpointer().latest(other) is None
        await checkpointer.put(other, checkpoint("ckpt-9", 9.0))
        await checkpointer.delete_thread(other)
        assert unnumbered(await reopen_checkpointer().latest(KEY)) == checkpoint("ckpt-1", 1.0)

    @pytest.mark.parametrize(
        "checkpoint_id", ["../x", "/etc/passwd", "%2e%2e%2f", "a/b", "\x00", ".."]
    )
    async def test_any_checkpoint_id_is_a_key_not_a_path(
        self, reopen_checkpointer: CheckpointerFactory, checkpoint_id: str
    ) -> None:
        await reopen_checkpointer().put(KEY, checkpoint(checkpoint_id, 1.0))
        assert unnumbered(await reopen_checkpointer().latest(KEY)) == checkpoint(checkpoint_id, 1.0)
        await reopen_checkpointer().delete(KEY, checkpoint_id)
        assert await reopen_checkpointer().latest(KEY) is None

    async def test_a_stored_payload_cannot_be_changed_by_the_caller(
        self,
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
        self,
        reopen_checkpointer: CheckpointerFactory,
    ) -> None:
        bad = Checkpoint(
            id="c", run_id="r", created_at=1.0, payload=cast(JSONObject, {"x": object()})
        )
        with pytest.raises(StorageError):
            await reopen_checkpointer().put(KEY, bad)
        assert await reopen_checkpointer().latest(KEY) is None
