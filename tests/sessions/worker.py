"""A separate process that runs one scripted agent step against a session folder.

The restart tests run it several times over the same folder: each invocation is a
fresh process, so whatever the next one sees came from disk. Usage:

    python worker.py MODE DATA_DIR [ARG]
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio

from agentkeel import (
    Agent,
    AgentkeelError,
    AgentState,
    Approve,
    CancelRun,
    Decision,
    FileCheckpointer,
    InputAnswer,
    InvocationState,
    LocalFileStorage,
    Reject,
    RunContext,
    ScriptedModel,
    ScriptedToolCall,
    ScriptedTurn,
    SessionManager,
    SlidingWindowConversationManager,
    interrupt,
    tool,
)
from agentkeel.hooks import BeforeRunEvent, HookRegistry
from agentkeel.messages import messages_to_json

DATA = Path(sys.argv[2])
SIDE_EFFECTS = DATA / "side-effects.log"


def side_effect(line: str) -> None:
    with SIDE_EFFECTS.open("a", encoding="utf-8") as handle:
        handle.write(line + "\n")


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file (needs approval)."""
    side_effect(f"deleted {path}")
    return f"deleted {path}"


@tool
def ask_name(context: RunContext) -> str:
    """Ask the person for a name."""
    name = interrupt("What name?")
    tracker = context.invocation_state.get("tracker")
    side_effect(f"named {name} tracker={tracker}")
    return f"name is {name}"


@tool
def remember(key: str, value: str, state: AgentState) -> str:
    """Remember something."""
    state.set(key, value)
    return "ok"


class Tracker:
    """Rebuilds the per-run tracker in the invocation state, also on resume."""

    def register_hooks(self, registry: HookRegistry) -> None:
        registry.add_callback(BeforeRunEvent, self.before)

    def before(self, event: BeforeRunEvent) -> None:
        state: InvocationState = event.context.invocation_state
        state.setdefault("tracker", f"rebuilt(resumed={event.resumed})")


SCRIPTS: dict[str, list[ScriptedTurn | str]] = {
    "remember": [
        ScriptedTurn(tool_calls=[ScriptedToolCall("remember", {"key": "colour", "value": "blue"})]),
        "Noted.",
    ],
    "recall": ["You said blue."],
    "delete": [
        ScriptedTurn(tool_calls=[ScriptedToolCall("delete_file", {"path": "a.txt"})]),
    ],
    "delete-two": [
        ScriptedTurn(
            tool_calls=[
                ScriptedToolCall("delete_file", {"path": "1.txt"}),
                ScriptedToolCall("delete_file", {"path": "2.txt"}),
            ]
        ),
    ],
    "ask": [ScriptedTurn(tool_calls=[ScriptedToolCall("ask_name")])],
    "after-decision": ["Finished."],
}


def build(mode: str) -> Agent:
    storage = LocalFileStorage(DATA / "sessions")
    checkpointer = FileCheckpointer(DATA / "checkpoints")
    model = ScriptedModel(SCRIPTS.get(mode, ["Finished."]))
    return Agent(
        model,
        tools=[delete_file, ask_name, remember],
        hooks=[Tracker()],
        conversation_manager=SlidingWindowConversationManager(4) if mode == "trim" else None,
        session_manager=SessionManager("assistant:ctx-restart", storage, checkpointer=checkpointer),
    )


async def main() -> None:
    mode = sys.argv[1]
    agent = build(mode)
    await agent.restore()
    if mode in ("approve", "reject", "answer", "cancel", "unknown"):
        interrupt_id = sys.argv[3]
        decisions: dict[str, Decision] = {
            "approve": Approve(),
            "reject": Reject("not this one"),
            "answer": InputAnswer("Ada"),
            "cancel": CancelRun(),
            "unknown": Approve(),
        }
        decision = decisions[mode]
        try:
            result = await agent.resume_async(interrupt_id, decision)
        except AgentkeelError as exc:
            print(json.dumps({"error": exc.code, "pending": len(agent.pending_interrupts)}))
            return
    elif mode == "inspect":
        result = None
    else:
        prompt = os.environ.get("PROMPT", mode)
        result = await agent.invoke_async(prompt)
    report = {
        "messages": messages_to_json(agent.messages),
        "state": agent.state.to_dict(),
        "pending": [i.to_json() for i in agent.pending_interrupts],
        "requests": [messages_to_json(r.messages) for r in agent.model.requests],  # type: ignore[attr-defined]
    }
    if result is not None:
        report["result"] = {
            "status": result.status,
            "text": result.text,
            "run_id": result.run_id,
            "interrupts": [i.to_json() for i in result.interrupts],
            "tool_names": result.tool_names,
        }
    print(json.dumps(report))


if __name__ == "__main__":
    anyio.run(main)
