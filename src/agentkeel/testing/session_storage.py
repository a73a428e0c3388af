"""The SessionStorage conformance suite, part one: history, state and run records.

`agentkeel.testing.SessionStorageSuite` gathers every part; subclass it in a test
module and give it a `reopen_storage` fixture (see `agentkeel.testing`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import anyio
import pytest

from agentkeel.errors import StorageError
from agentkeel.interrupts import Interrupt
from agentkeel.keys import SessionKey
from agentkeel.messages import (
    JSONObject,
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from agentkeel.result import ErrorInfo, ToolCallRecord, Usage
from agentkeel.storage.base import RunRecord, SessionStorage

__all__ = ["KEY", "HistorySuite", "StorageFactory", "full_record", "turn"]

StorageFactory = Callable[[], SessionStorage]

KEY = SessionKey(definition="chat", context_id="ctx-1")


def every_part_kind() -> list[Message]:
    """A turn holding each part kind, with text that JSON lines must survive."""
    return [
        Message.user('line one\nline two \u2028 "quoted" \\ tab\t nul\x00 é 日本 🎉'),
        Message(
            role="assistant",
            parts=(
                ThinkingPart(text="let me think", signature="sig-abc"),
                ThinkingPart(text="no signature"),
                TextPart(text="I will call a tool."),
                ToolCallPart(
                    id="call-1",
                    name="search",
                    input={"q": "x", "n": 3, "f": 1.5, "ok": True, "none": None, "l": [1, {}]},
                ),
                ToolCallPart(id="call-2", name="now"),
            ),
        ),
        Message(
            role="user",
            parts=(
                ToolResultPart(call_id="call-1", name="search", content={"hits": ["a", "b"]}),
                ToolResultPart(call_id="call-2", name="now", content="boom", status="error"),
            ),
        ),
        Message(role="assistant", parts=(TextPart(text=""),)),
        Message(role="assistant", parts=()),
    ]


def turn(index: int) -> list[Message]:
    return [Message.user(f"question {index}"), Message.assistant(f"answer {index}")]


def full_record(run_id: str, started_at: float) -> RunRecord:
    return RunRecord(
        run_id=run_id,
        status="suspended",
        input={"message": "book it"},
        started_at=started_at,
        ended_at=started_at + 1.25,
        text="waiting for approval",
        tool_calls=(
            ToolCallRecord(
                id="call-1", name="search", input={"q": "x"}, output=[1, 2], duration_ms=3.5
            ),
            ToolCallRecord(id="call-2", name="book", input={}, status="pending"),
        ),
        usage=Usage(input_tokens=10, output_tokens=5),
        error=ErrorInfo(code="model_error", message="upstream"),
        interrupts=(
            Interrupt(
                id="int-1",
                kind="approval",
                call_id="call-2",
                tool="book",
                tool_input={"when": "now"},
                prompt="ok?",
            ),
        ),
        stop_reason="tool_use",
    )


class HistorySuite:
    """History, state and run records: what every SessionStorage does."""

    pytestmark = [pytest.mark.anyio]

    @pytest.fixture
    def storage(self, reopen_storage: StorageFactory) -> SessionStorage:
        """One storage of the backend under test."""
        return reopen_storage()

    async def test_load_of_an_unknown_session_is_none(self, storage: SessionStorage) -> None:
        assert await storage.load(KEY) is None

    async def test_every_part_kind_and_the_state_round_trip(
        self, reopen_storage: StorageFactory
    ) -> None:
        state: JSONObject = {"user": {"name": "Ada", "tags": ["x", "ü"]}, "n": 2, "f": None}
        await reopen_storage().append(KEY, every_part_kind(), state)
        snapshot = await reopen_storage().load(KEY)
        assert snapshot is not None
        assert snapshot.messages == every_part_kind()
        assert snapshot.state == state

    async def test_appends_keep_their_order(self, reopen_storage: StorageFactory) -> None:
        storage = reopen_storage()
        for index in range(5):
            await storage.append(KEY, turn(index), {"turn": index})
        snapshot = await reopen_storage().load(KEY)
        assert snapshot is not None
        assert snapshot.messages == [message for index in range(5) for message in turn(index)]
        assert snapshot.state == {"turn": 4}
        assert snapshot.metadata.message_count == 10

    async def test_a_none_state_keeps_the_previous_one(
        self, reopen_storage: StorageFactory
    ) -> None:
        storage = reopen_storage()
        await storage.append(KEY, turn(0), {"kept": True})
        await storage.append(KEY, turn(1), None)
        snapshot = await reopen_storage().load(KEY)
        assert snapshot is not None
        assert snapshot.state == {"kept": True}
        assert len(snapshot.messages) == 4

    async def test_a_turn_may_change_only_the_state(self, reopen_storage: StorageFactory) -> None:
        storage = reopen_storage()
        await storage.append(KEY, turn(0), None)
        await storage.append(KEY, [], {"only": "state"})
        snapshot = await reopen_storage().load(KEY)
        assert snapshot is not None
        assert snapshot.messages == turn(0)
        assert snapshot.state == {"only": "state"}

    async def test_a_state_can_become_empty_again(self, reopen_storage: StorageFactory) -> None:
        storage = reopen_storage()
        await storage.append(KEY, turn(0), {"a": 1})
        await storage.append(KEY, turn(1), {})
        snapshot = await reopen_storage().load(KEY)
        assert snapshot is not None
        assert snapshot.state == {}
        await storage.append(KEY, turn(2), {"b": 2})
        snapshot = await reopen_storage().load(KEY)
        assert snapshot is not None
        assert snapshot.state == {"b": 2}
        assert len(snapshot.messages) == 6

    async def test_an_empty_append_creates_the_session(
        self, reopen_storage: StorageFactory
    ) -> None:
        await reopen_storage().append(KEY, [], None)
        snapshot = await reopen_storage().load(KEY)
        assert snapshot is not None
        assert snapshot.messages == []
        assert snapshot.state == {}

    async def test_metadata_describes_the_session(self, reopen_storage: StorageFactory) -> None:
        key = SessionKey(definition="support", context_id="ctx-meta", principal="alice")
        await reopen_storage().append(key, turn(0), None)
        await reopen_storage().append(key, turn(1), None)
        snapshot = await reopen_storage().load(key)
        assert snapshot is not None
        meta = snapshot.metadata
        assert (meta.definition, meta.context_id, meta.owner) == ("support", "ctx-meta", "alice")
        assert meta.message_count == 4
        assert meta.schema_version == 1
        assert 0 < meta.created_at <= meta.updated_at

    async def test_rewrite_replaces_history_and_state(self, reopen_storage: StorageFactory) -> None:
        storage = reopen_storage()
        for index in range(3):
            await storage.append(KEY, turn(index), {"turn": index})
        await storage.rewrite(KEY, turn(2), {"summary": "trimmed"})
        snapshot = await reopen_storage().load(KEY)
        assert snapshot is not None
        assert snapshot.messages == turn(2)
        assert snapshot.state == {"summary": "trimmed"}
        assert snapshot.metadata.message_count == 2
        # Appends continue after a rewrite, through a fresh instance and the old one.
        await reopen_storage().append(KEY, turn(3), None)
        await storage.append(KEY, turn(4), {"turn": 4})
        snapshot = await reopen_storage().load(KEY)
        assert snapshot is not None
        assert snapshot.messages == turn(2) + turn(3) + turn(4)
        assert snapshot.state == {"turn": 4}

    async def test_rewrite_to_nothing(self, reopen_storage: StorageFactory) -> None:
        storage = reopen_storage()
        await storage.append(KEY, turn(0), {"a": 1})
        await storage.rewrite(KEY, [], {})
        snapshot = await reopen_storage().load(KEY)
        assert snapshot is not None
        assert (snapshot.messages, snapshot.state) == ([], {})
        await storage.append(KEY, turn(1), None)
        snapshot = await reopen_storage().load(KEY)
        assert snapshot is not None
        assert (snapshot.messages, snapshot.state) == (turn(1), {})

    async def test_rewrite_creates_a_session(self, reopen_storage: StorageFactory) -> None:
        await reopen_storage().rewrite(KEY, turn(0), {"x": 1})
        snapshot = await reopen_storage().load(KEY)
        assert snapshot is not None
        assert (snapshot.messages, snapshot.state) == (turn(0), {"x": 1})

    @pytest.mark.parametrize(
        "other",
        [
            SessionKey(definition="chat", context_id="ctx-2"),
            SessionKey(definition="other", context_id="ctx-1"),
            SessionKey(definition="chat", context_id="ctx-1", principal="alice"),
            SessionKey(definition="chat", context_id="ctx-1", principal="bob"),
            SessionKey(definition="chat", context_id="ctx-1", principal="chat:ctx-1"),
        ],
        ids=["context", "definition", "principal", "other-principal", "principal-like-a-session"],
    )
    async def test_sessions_are_isolated(
        self, reopen_storage: StorageFactory, other: SessionKey
    ) -> None:
        storage = reopen_storage()
        mine = SessionKey(definition="chat", context_id="ctx-1", principal="alice")
        if other == mine:
            mine = KEY
        await storage.append(mine, turn(0), {"who": "mine"})
        await storage.put_run(
            mine, RunRecord(run_id="run-1", status="completed", input="hi", started_at=1.0)
        )
        assert await reopen_storage().load(other) is None
        assert await reopen_storage().get_run(other, "run-1") is None
        assert await reopen_storage().list_runs(other) == []
        await storage.append(other, turn(1), {"who": "other"})
        assert await storage.delete(other)
        snapshot = await reopen_storage().load(mine)
        assert snapshot is not None
        assert (snapshot.messages, snapshot.state) == (turn(0), {"who": "mine"})
        assert await reopen_storage().get_run(mine, "run-1") is not None

    async def test_delete_forgets_history_state_and_runs(
        self, reopen_storage: StorageFactory
    ) -> None:
        storage = reopen_storage()
        await storage.append(KEY, turn(0), {"a": 1})
        await storage.put_run(
            KEY, RunRecord(run_id="run-1", status="completed", input=None, started_at=1.0)
        )
        assert await storage.delete(KEY) is True
        assert await reopen_storage().load(KEY) is None
        assert await reopen_storage().get_run(KEY, "run-1") is None
        assert await reopen_storage().list_runs(KEY) == []
        assert await storage.delete(KEY) is False
        # The key can be used again, from scratch.
        await storage.append(KEY, turn(1), None)
        snapshot = await reopen_storage().load(KEY)
        assert snapshot is not None
        assert (snapshot.messages, snapshot.state) == (turn(1), {})

    async def test_delete_of_an_unknown_session_is_false(self, storage: SessionStorage) -> None:
        assert await storage.delete(KEY) is False

    async def test_stored_data_cannot_be_changed_through_caller_objects(
        self,
        reopen_storage: StorageFactory,
    ) -> None:
        storage = reopen_storage()
        state: JSONObject = {"items": [1]}
        tool_input: JSONObject = {"q": "x"}
        await storage.append(
            KEY,
            [Message(role="assistant", parts=(ToolCallPart(id="c", name="t", input=tool_input),))],
            state,
        )
        state["items"] = [2]
        tool_input["q"] = "changed"
        first = await reopen_storage().load(KEY)
        assert first is not None
        assert first.state == {"items": [1]}
        assert first.messages[0].tool_calls[0].input == {"q": "x"}
        first.state["items"] = [3]
        first.messages.clear()
        second = await reopen_storage().load(KEY)
        assert second is not None
        assert second.state == {"items": [1]}
        assert len(second.messages) == 1

    async def test_a_state_that_is_not_json_stores_nothing(
        self, reopen_storage: StorageFactory
    ) -> None:
        storage = reopen_storage()
        await storage.append(KEY, turn(0), {"ok": 1})
        with pytest.raises(StorageError):
            await storage.append(KEY, turn(1), cast(JSONObject, {"bad": object()}))
        snapshot = await reopen_storage().load(KEY)
        assert snapshot is not None
        assert (snapshot.messages, snapshot.state) == (turn(0), {"ok": 1})

    async def test_a_message_that_is_not_json_stores_nothing(
        self, reopen_storage: StorageFactory
    ) -> None:
        storage = reopen_storage()
        await storage.append(KEY, turn(0), {"ok": 1})
        not_json = cast(JSONObject, {"x": {1, 2}})
        bad = Message(role="assistant", parts=(ToolCallPart(id="c", name="t", input=not_json),))
        for write in (
            storage.append(KEY, [*turn(1), bad], {"ok": 2}),
            storage.rewrite(KEY, [bad], {}),
        ):
            with pytest.raises(StorageError):
                await write
        snapshot = await reopen_storage().load(KEY)
        assert snapshot is not None
        assert (snapshot.messages, snapshot.state) == (turn(0), {"ok": 1})

    async def test_concurrent_turns_never_interleave(self, reopen_storage: StorageFactory) -> None:
        storage = reopen_storage()
        keys = [SessionKey(definition="chat", context_id=f"ctx-{n}") for n in range(3)]

        async def writer(key: SessionKey, worker: int) -> None:
            for index in range(5):
                batch = [Message.user(f"{worker}:{index}:{part}") for part in range(3)]
                await storage.append(key, batch, {"last": f"{worker}:{index}"})

        async with anyio.create_task_group() as group:
            for key in keys:
                for worker in range(4):
                    group.start_soon(writer, key, worker)
        for key in keys:
            snapshot = await reopen_storage().load(key)
            assert snapshot is not None
            texts = [message.text for message in snapshot.messages]
            assert len(texts) == 60
            turns = [texts[start : start + 3] for start in range(0, 60, 3)]
            for batch in turns:
                prefix = batch[0].rsplit(":", 1)[0]
                assert batch == [f"{prefix}:{part}" for part in range(3)]
            assert snapshot.state == {"last": turns[-1][0].rsplit(":", 1)[0]}
