"""Guarantee 2: a process killed at any instant leaves a history a provider accepts."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentkeel import (
    Agent,
    Approve,
    FileCheckpointer,
    LocalFileStorage,
    SessionManager,
)
from agentkeel.messages import Message
from agentkeel.models.openai import OpenAIModel
from agentkeel.storage.postgres import PostgresStorage
from fakes.openai_server import FakeOpenAI, echo_responder

WORKER = Path(__file__).with_name("crash_worker.py")
KILLS = 25


def assert_provider_valid(messages: list[Message]) -> None:
    """Every tool call is answered by the next message, one result per call."""
    for index, message in enumerate(messages):
        if message.tool_calls:
            assert index + 1 < len(messages), "a tool call without its result"
            answered = [r.call_id for r in messages[index + 1].tool_results]
            assert answered == [c.id for c in message.tool_calls]
        if message.tool_results:
            assert index > 0 and messages[index - 1].tool_calls


def agent_on(data: Path, model: OpenAIModel, storage: PostgresStorage | None = None) -> Agent:
    if storage is not None:
        manager = SessionManager(
            "crash:ctx-crash", storage.sharing(), checkpointer=storage.checkpointer()
        )
        return Agent(model, session_manager=manager)
    return Agent(
        model,
        session_manager=SessionManager(
            "crash:ctx-crash",
            LocalFileStorage(data / "sessions"),
            checkpointer=FileCheckpointer(data / "checkpoints"),
        ),
    )


@pytest.mark.anyio
async def test_sigkill_at_random_instants_never_breaks_the_history(tmp_path: Path) -> None:
    await sigkill_at_random_instants(tmp_path)


@pytest.mark.anyio
@pytest.mark.postgres
async def test_sigkill_at_random_instants_on_postgresql(
    tmp_path: Path, pg_url: str, pg_storage: PostgresStorage
) -> None:
    await sigkill_at_random_instants(tmp_path, pg_url, pg_storage)


async def sigkill_at_random_instants(
    tmp_path: Path, url: str | None = None, storage: PostgresStorage | None = None
) -> None:
    rng = random.Random(20261130)
    fake = FakeOpenAI(responder=echo_responder)
    grew = 0
    with fake.serve() as base_url:
        model = OpenAIModel("fake-model", base_url=base_url, max_retries=0)
        previous = 0
        for _ in range(KILLS):
            worker = subprocess.Popen(
                [sys.executable, str(WORKER), str(tmp_path), *([url] if url else [])],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            time.sleep(rng.uniform(0.15, 0.6))
            worker.send_signal(signal.SIGKILL)
            worker.wait(timeout=10)
            agent = agent_on(tmp_path, model, storage)
            await agent.restore()
            assert_provider_valid(agent.messages)
            for pending in agent.pending_interrupts:
                assert pending.tool == "guarded"
            if agent.pending_interrupts:
                done = await agent.resume_async(agent.pending_interrupts[0].id, Approve())
                assert done.status in ("completed", "suspended")
            # the next turn goes through a provider that rejects orphan tool calls
            result = await agent.invoke_async("are you still there?")
            assert result.status == "completed", result.error
            assert result.text == "echo: are you still there?"
            grew += len(agent.messages) > previous
            previous = len(agent.messages)
            assert_provider_valid(agent.messages)
    assert grew >= KILLS - 2  # the workers really made progress between kills
