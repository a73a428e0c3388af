"""Runs turns forever against one session folder, to be SIGKILLed at a random instant.

Each turn calls two tools concurrently (one sleeps a little, one writes AgentState)
and every third turn needs an approval that the worker grants at once, so a kill can
land between a tool call and its result, during a save, or during a suspension.
Usage: python crash_worker.py DATA_DIR [STORAGE_URL]; with a ``postgresql://`` URL the
session and its checkpoints live in that database instead of DATA_DIR.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import anyio

from agentkeel import (
    Agent,
    AgentState,
    Approve,
    FileCheckpointer,
    LocalFileStorage,
    ScriptedModel,
    ScriptedToolCall,
    ScriptedTurn,
    SessionManager,
    tool,
)

DATA = Path(sys.argv[1])
URL = sys.argv[2] if len(sys.argv) > 2 else None


@tool
async def slow(ms: int) -> str:
    """Sleep a little."""
    await anyio.sleep(ms / 1000)
    return f"slept {ms}"


@tool
def bump(state: AgentState) -> int:
    """Count turns in the state."""
    count = int(str(state.get("count", 0))) + 1
    state.set("count", count)
    return count


@tool(requires_approval=True)
def guarded() -> str:
    """Needs approval."""
    return "guarded ran"


def script() -> list[ScriptedTurn | str]:
    turns: list[ScriptedTurn | str] = []
    for index in range(3):
        calls = [
            ScriptedToolCall("slow", {"ms": random.randint(0, 4)}),
            ScriptedToolCall("bump"),
        ]
        if index == 2:
            calls.append(ScriptedToolCall("guarded"))
        turns.append(ScriptedTurn(tool_calls=calls))
        turns.append(f"turn {index} done")
    return turns


def session_manager() -> SessionManager:
    if URL is None:
        return SessionManager(
            "crash:ctx-crash",
            LocalFileStorage(DATA / "sessions"),
            checkpointer=FileCheckpointer(DATA / "checkpoints"),
        )
    from agentkeel.storage.postgres import from_url

    storage = from_url(URL, None)
    return SessionManager("crash:ctx-crash", storage, checkpointer=storage.checkpointer())


async def main() -> None:
    manager = session_manager()
    await manager.storage.open()
    agent = Agent(
        ScriptedModel(script(), repeat=True),
        tools=[slow, bump, guarded],
        session_manager=manager,
    )
    await agent.restore()
    for pending in agent.pending_interrupts:
        await agent.resume_async(pending.id, Approve())
    while True:
        result = await agent.invoke_async("go")
        while result.status == "suspended" and result.interrupt is not None:
            result = await agent.resume_async(result.interrupt.id, Approve())


if __name__ == "__main__":
    anyio.run(main)
