"""A turn's usage and retained frames in its commit's statement (BundledCommitStorage).

The extras must land exactly when the commit does: on a saved session (the one-statement
path), on a new one (the locking transaction), on a cut, with a run record only; and a
commit that the version or fence refuses must leave none of them behind. A served turn
then stores its frames, ``done`` frame included, and its tokens, without writes of their
own, and a budget counts the tokens of a run that has not saved yet.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agentkeel import Agent, ScriptedModel, ScriptedToolCall, SessionManager
from agentkeel.errors import ConcurrentWriteError
from agentkeel.messages import Message
from agentkeel.models.scripted import ScriptedTurn
from agentkeel.result import RunStatus, Usage
from agentkeel.storage import RunRecord, SessionKey
from agentkeel.storage.bundled import BundledCommitStorage, CommitExtras
from agentkeel.storage.postgres import PostgresStorage
from agentkeel.storage.usage import utc_day
from agentkeel.tools import tool
from agentkeel.usage import TokenBudgets
from e2e import ServerProcess, stream_turn, write_framework

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]

KEY = SessionKey(definition="chat", context_id="ctx-1", principal="alice")
DAY = "2026-12-01"
CALL = Usage(input_tokens=100, output_tokens=20, cached_tokens=60, reasoning_tokens=5)


def turn(index: int) -> list[Message]:
    return [Message.user(f"question {index}"), Message.assistant(f"answer {index}")]


def extras(body: bytes | None = None, usage: Usage = CALL) -> CommitExtras:
    frames = None if body is None else (f"run-{len(body)}", body)
    return CommitExtras(usage=usage, day=DAY, frames=frames)


def record(run_id: str, status: RunStatus = "completed") -> RunRecord:
    return RunRecord(run_id=run_id, status=status, input="q", started_at=1.0, ended_at=2.0)


async def test_the_storage_has_the_capability(pg_storage: PostgresStorage) -> None:
    assert isinstance(pg_storage, BundledCommitStorage)


async def test_a_new_and_a_saved_session_store_usage_and_frames_with_the_turn(
    pg_storage: PostgresStorage,
) -> None:
    first = await pg_storage.append_bundled(
        KEY, turn(0), {"a": 1}, extras=extras(b"one"), run=record("run-a")
    )  # a new session: the locking transaction
    assert first == 1
    assert await pg_storage.get_frames(KEY, "run-3") == b"one"
    second = await pg_storage.append_bundled(
        KEY, turn(1), None, extras=extras(b"second"), expected_version=1, run=record("run-b")
    )  # a saved session: the one statement
    assert second == 2
    assert await pg_storage.get_frames(KEY, "run-6") == b"second"
    assert await pg_storage.get_frames(KEY, "run-3") is None  # replaced, as put_frames does
    assert await pg_storage.context_usage(KEY) == CALL + CALL
    assert await pg_storage.principal_usage("alice", DAY) == CALL + CALL
    snapshot = await pg_storage.load(KEY)
    assert snapshot is not None and len(snapshot.messages) == 4
    assert snapshot.state == {"a": 1}
    assert (await pg_storage.latest_run(KEY)) == record("run-b")


async def test_a_refused_commit_leaves_no_usage_and_no_frames(
    pg_storage: PostgresStorage,
) -> None:
    await pg_storage.append_bundled(KEY, turn(0), None, extras=extras(b"kept"))
    with pytest.raises(ConcurrentWriteError):
        await pg_storage.append_bundled(
            KEY, turn(1), None, extras=extras(b"stale"), expected_version=0
        )
    await pg_storage.append_bundled(KEY, turn(1), None, extras=extras(b"x"), fence=5)
    with pytest.raises(ConcurrentWriteError):  # a fence lower than the highest accepted
        await pg_storage.append_bundled(KEY, turn(2), None, extras=extras(b"stale"), fence=4)
    assert await pg_storage.get_frames(KEY, "run-5") is None
    assert await pg_storage.get_frames(KEY, "run-1") == b"x"
    assert await pg_storage.context_usage(KEY) == CALL + CALL
    assert await pg_storage.principal_usage("alice", DAY) == CALL + CALL


async def test_a_cut_stores_its_extras_in_its_transaction(pg_storage: PostgresStorage) -> None:
    await pg_storage.append(KEY, turn(0) + turn(1), None)
    version = await pg_storage.append_bundled(
        KEY, turn(2), None, extras=extras(b"edited"), expected_version=1, cut=2
    )
    assert version == 2
    snapshot = await pg_storage.load(KEY)
    assert snapshot is not None
    assert [m.text for m in snapshot.messages] == [
        "question 0",
        "answer 0",
        *["question 2", "answer 2"],
    ]
    assert await pg_storage.get_frames(KEY, "run-6") == b"edited"
    assert await pg_storage.context_usage(KEY) == CALL


async def test_no_usage_writes_no_day_and_a_run_alone_takes_its_extras(
    pg_storage: PostgresStorage,
) -> None:
    await pg_storage.append_bundled(KEY, turn(0), None, extras=extras(b"a", usage=Usage()))
    assert await pg_storage.principal_usage("alice", DAY) == Usage()
    other = SessionKey(definition="chat", context_id="ctx-new", principal="alice")
    await pg_storage.put_run_bundled(other, record("run-s", "suspended"), extras=extras(b"waits"))
    await pg_storage.put_run_bundled(KEY, record("run-t", "failed"), extras=extras(None))
    assert await pg_storage.get_run(other, "run-s") == record("run-s", "suspended")
    assert await pg_storage.get_frames(other, "run-5") == b"waits"
    assert await pg_storage.load(other) is None  # a run record saves no session
    assert await pg_storage.context_usage(other) == CALL
    assert await pg_storage.context_usage(KEY) == CALL
    assert await pg_storage.get_frames(KEY, "run-1") == b"a"  # kept: no frames in that put
    assert await pg_storage.principal_usage("alice", DAY) == CALL + CALL


@pytest.fixture
def server(tmp_path: Path, tool_log: Path, pg_url: str) -> Iterator[ServerProcess]:
    del tool_log  # its environment variable reaches the subprocess
    document = {
        "agents": {"scripted": {"factory": "e2e:scripted_agent"}},
        "storage": pg_url,
        "server": {"heartbeatSeconds": 1, "shutdownTimeoutSeconds": 10},
    }
    process = ServerProcess(write_framework(tmp_path, document))
    try:
        yield process
    finally:
        process.stop()


async def test_a_served_turn_stores_its_frames_and_tokens_with_its_commit(
    server: ServerProcess, pg_storage: PostgresStorage
) -> None:
    url = server.start()
    spent = Usage()
    async with httpx.AsyncClient(base_url=url, timeout=20) as client:
        for text in ("first", "second"):
            body = {"message": text, "contextId": "ctx-served"}
            frames = await stream_turn(client, "scripted", body)
            done = frames[-1]
            assert done.done and done.data["status"] == "completed"
            used = done.data["usage"]
            assert isinstance(used, dict)
            spent = spent + Usage(
                input_tokens=int(str(used["inputTokens"])),
                output_tokens=int(str(used["outputTokens"])),
            )
    key = SessionKey(definition="scripted", context_id="ctx-served")
    stored = await pg_storage.get_frames(key, str(done.data["runId"]))
    assert stored is not None
    sent = b"".join(b"id: %d\ndata: %s\n\n" % (f.id, f.raw.encode()) for f in frames)
    assert stored.startswith(sent)  # every frame the client got, the done frame included
    assert b'"done":true' in stored
    assert spent.total_tokens > 0
    assert await pg_storage.context_usage(key) == spent
    assert await pg_storage.principal_usage(None, utc_day()) == spent
    assert await pg_storage.version(key) == 2


@tool
def step() -> str:
    """Do one more step."""
    return "done"


async def test_a_budget_sees_the_tokens_a_run_has_not_written_yet(
    pg_storage: PostgresStorage,
) -> None:
    call = Usage(input_tokens=10, output_tokens=5)
    model = ScriptedModel(
        [
            ScriptedTurn(tool_calls=[ScriptedToolCall("step")], usage=call),
            ScriptedTurn(text="over the budget", usage=call),
        ]
    )
    agent = Agent(
        model,
        tools=[step],
        session_manager=SessionManager("chat:ctx-budget", pg_storage),
        budgets=TokenBudgets(tokens_per_context=15),
    )
    result = await agent.invoke_async("go")
    assert result.error is not None and result.error.code == "budget_exceeded"
    assert len(model.requests) == 1  # the first call's tokens, unsaved then, stopped the second
    key = SessionKey(definition="chat", context_id="ctx-budget")
    assert await pg_storage.context_usage(key) == call  # written with the run's save
    assert await pg_storage.principal_usage(None, utc_day()) == call
    assert agent.session_manager is not None
    assert agent.session_manager.unsaved.usage == Usage()
