"""A stateful test of every storage backend: random appends, rewrites, deletes and reopens.

A model (a dict of histories, states and versions) runs beside the backend, and after
every step the two must agree. Reopening builds a new backend instance on the same
place (folder, schema): it must hold exactly the committed turns. For the file backend a
kill between two writes is simulated by leaving a torn tail (half a line, a stray temp
file) before reopening, as a process killed mid-write would.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from agentkeel.errors import ConcurrentWriteError
from agentkeel.keys import SessionKey
from agentkeel.messages import JSONObject, Message
from agentkeel.storage.base import SessionStorage
from agentkeel.storage.file import LocalFileStorage
from agentkeel.storage.memory import InMemoryStorage

Factory = Callable[[], SessionStorage]

_CONTEXTS = ("ctx-a", "ctx-b", "ctx-c")
_texts = st.text(max_size=12)
_turn = st.lists(
    st.builds(Message, role=st.sampled_from(["user", "assistant"]), parts=st.just(())).flatmap(
        lambda m: _texts.map(
            lambda text: Message.user(text) if m.role == "user" else Message.assistant(text)
        )
    ),
    min_size=1,
    max_size=3,
)
_states = st.none() | st.dictionaries(st.sampled_from(["a", "b"]), st.integers(0, 9), max_size=2)


@dataclass
class Model:
    """What the backend must hold: per context, the history, the state and the version."""

    histories: dict[str, list[Message]] = field(default_factory=dict)
    states: dict[str, JSONObject] = field(default_factory=dict)
    versions: dict[str, int] = field(default_factory=dict)


class StorageMachine(RuleBasedStateMachine):
    """Random steps on one backend beside the model; `machine` binds the backend."""

    portal: BlockingPortal
    factory: Factory
    torn: Callable[[], None] | None = None

    @initialize()
    def start(self) -> None:
        self.model = Model()
        self.definition = "m" + secrets.token_hex(4)  # each example its own sessions
        self.storage = type(self).factory()
        self.portal.call(self.storage.open)

    def key(self, context: str) -> SessionKey:
        return SessionKey(definition=self.definition, context_id=context)

    @rule(context=st.sampled_from(_CONTEXTS), turn=_turn, state=_states)
    def append(self, context: str, turn: list[Message], state: JSONObject | None) -> None:
        version = self.model.versions.get(context, 0)
        got = self.portal.call(
            lambda: self.storage.append(self.key(context), turn, state, expected_version=version)
        )
        self.model.histories.setdefault(context, []).extend(turn)
        if state is not None:
            self.model.states[context] = state
        else:
            self.model.states.setdefault(context, {})
        self.model.versions[context] = got
        assert got > version

    @rule(context=st.sampled_from(_CONTEXTS), keep=st.integers(0, 6), state=_states)
    def rewrite(self, context: str, keep: int, state: JSONObject | None) -> None:
        """A cut (keep the first `keep` messages) is a rewrite of the whole history."""
        if context not in self.model.histories:
            return
        history = self.model.histories[context][:keep]
        version = self.model.versions[context]
        got = self.portal.call(
            lambda: self.storage.rewrite(
                self.key(context), history, state, expected_version=version
            )
        )
        self.model.histories[context] = history
        if state is not None:
            self.model.states[context] = state
        self.model.versions[context] = got

    @rule(context=st.sampled_from(_CONTEXTS))
    def stale_write_is_refused(self, context: str) -> None:
        stale = self.model.versions.get(context, 0) + 7
        with pytest.raises(ConcurrentWriteError):
            self.portal.call(
                lambda: self.storage.append(
                    self.key(context), [Message.user("x")], None, expected_version=stale
                )
            )

    @rule(context=st.sampled_from(_CONTEXTS))
    def delete(self, context: str) -> None:
        existed = self.portal.call(self.storage.delete, self.key(context))
        assert existed == (context in self.model.histories)
        for part in (self.model.histories, self.model.states, self.model.versions):
            part.pop(context, None)

    @rule(kill=st.booleans())
    def reopen(self, kill: bool) -> None:
        """A new instance on the same place; with `kill`, after a torn write."""
        self.portal.call(self.storage.close)
        torn = type(self).torn
        if kill and torn is not None:
            torn()
        self.storage = type(self).factory()
        self.portal.call(self.storage.open)

    @invariant()
    def agrees(self) -> None:
        if not hasattr(self, "storage"):
            return
        for context in _CONTEXTS:
            snapshot = self.portal.call(self.storage.load, self.key(context))
            if context not in self.model.histories:
                assert snapshot is None or snapshot.messages == []
                continue
            assert snapshot is not None
            assert snapshot.messages == self.model.histories[context]
            assert snapshot.state == self.model.states[context]
            assert snapshot.version == self.model.versions[context]

    def teardown(self) -> None:
        if hasattr(self, "storage"):
            self.portal.call(self.storage.close)


def machine(
    portal: BlockingPortal, factory: Factory, *, torn: Callable[[], None] | None = None
) -> type[StorageMachine]:
    """The state machine over backends built by `factory` (one per reopen)."""
    attributes = {
        "portal": portal,
        "factory": staticmethod(factory),
        "torn": staticmethod(torn) if torn else None,
    }
    return type("BoundStorageMachine", (StorageMachine,), attributes)


@contextmanager
def _portal() -> Iterator[BlockingPortal]:
    with start_blocking_portal(backend="asyncio") as portal:
        yield portal


def _run(cls: type[RuleBasedStateMachine]) -> None:
    cls.TestCase.settings = settings(
        settings(),  # the loaded profile (ci or long)
        stateful_step_count=20,
        max_examples=max(10, settings().max_examples // 3),
    )
    cls.TestCase().runTest()


def test_memory_storage_agrees_with_the_model() -> None:
    shared: dict[str, Any] = {}

    def factory() -> SessionStorage:
        # memory storage lives in its instance: a reopen keeps the same one
        shared.setdefault("storage", InMemoryStorage())
        return shared["storage"]  # type: ignore[no-any-return]

    with _portal() as portal:
        _run(machine(portal, factory))


def _tear(folder: Path) -> None:
    """What a process killed mid-write leaves: half a line after the last commit, a temp file."""
    for path in folder.rglob("messages.jsonl"):
        with path.open("ab") as torn:
            torn.write(b'{"turn": 999, "role": "user", "parts": [{"kind": "te')
        (path.parent / ".messages.jsonl.tmp-killed").write_bytes(b'{"half')


def test_file_storage_agrees_with_the_model_across_torn_writes(tmp_path: Path) -> None:
    with _portal() as portal:
        _run(
            machine(
                portal,
                lambda: LocalFileStorage(tmp_path / "sessions"),
                torn=lambda: _tear(tmp_path / "sessions"),
            )
        )


@pytest.mark.postgres
def test_postgres_storage_agrees_with_the_model(pg_database: str, pg_schema: str) -> None:
    from agentkeel.storage.postgres import PostgresStorage

    with _portal() as portal:
        _run(machine(portal, lambda: PostgresStorage(pg_database, schema=pg_schema, pool_size=2)))
