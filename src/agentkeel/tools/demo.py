"""The demo agent's tools, and `demo_agent` to build the agent they belong to.

With the built-ins these show every kind of tool call: a plain one (`current_time`),
one that uses memory (`read_state`/`write_state`), one a person must approve first
(`delete_file`) and one that asks the person a question (`ask_user`). They are safe to
expose anywhere: `delete_file` only pretends, and nothing here touches the file system
or the network.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TypedDict, Unpack

from agentkeel.agent import Agent
from agentkeel.conversation import ConversationManager
from agentkeel.hooks.registry import HookProvider
from agentkeel.interrupts import interrupt
from agentkeel.loop import RunLimits
from agentkeel.messages import JSONValue
from agentkeel.middleware import AgentMiddleware
from agentkeel.models.demo import DemoModel
from agentkeel.session import SessionManager
from agentkeel.state import AgentState
from agentkeel.tools.builtin import current_time, read_state, write_state
from agentkeel.tools.decorator import Tool, tool

__all__ = [
    "DEMO_DESCRIPTION",
    "DEMO_SYSTEM_PROMPT",
    "DEMO_TOOLS",
    "DemoAgentOptions",
    "ask_user",
    "delete_file",
    "demo_agent",
]

DEMO_SYSTEM_PROMPT = (
    "You are the agentkeel demo agent. Use current_time for the time, write_state and "
    "read_state to remember things, delete_file (after the user approves) to delete "
    "files, and ask_user when you need an answer from the user."
)
"""The demo agent's instructions (the demo model ignores them; a real model would not)."""

DEMO_DESCRIPTION = (
    "The offline demo agent: tells the time, remembers things, asks before deleting "
    "a file and asks you questions. Needs no API key."
)
"""What clients listing agents are told about the demo agent."""


@tool(requires_approval=True, describe=lambda args: f"Delete the file {args.get('path')}")
async def delete_file(path: str) -> str:
    """Delete a file; a person must approve every call first.

    This is the demo: nothing is deleted and the file system is never touched, so the
    approval flow can be tried without risk.

    Args:
        path: The file to delete, e.g. "notes.txt".
    """
    return f"deleted {path} (demo: nothing was really deleted)"


@tool
async def ask_user(question: str) -> str:
    """Ask the person a question and return their answer.

    The run suspends with an ``input`` interrupt carrying `question`; when it is resumed
    with an answer, this tool runs again and returns that answer as text.

    Args:
        question: What to ask, as one short sentence.
    """
    answer: JSONValue = interrupt(question)
    return answer if isinstance(answer, str) else json.dumps(answer)


DEMO_TOOLS: list[Tool] = [current_time, read_state, write_state, delete_file, ask_user]
"""Every tool of the demo agent, in the order the model is told about them."""


class DemoAgentOptions(TypedDict, total=False):
    """Agent options `demo_agent` passes on; each overrides the demo's default."""

    system_prompt: str | None
    name: str
    description: str
    hooks: Iterable[HookProvider]
    middleware: Sequence[AgentMiddleware]
    state: AgentState | Mapping[str, JSONValue] | None
    conversation_manager: ConversationManager | None
    session_manager: SessionManager | None
    approve: Iterable[str]
    limits: RunLimits | None


def demo_agent(*, token_delay: float = 0.01, **options: Unpack[DemoAgentOptions]) -> Agent:
    """Build the demo agent: the offline DemoModel with `DEMO_TOOLS`.

    It is what `agentkeel demo` runs, and a ready agent for servers and examples that
    must work without a key.

    Args:
        token_delay: Seconds between streamed chunks (0 streams at once).
        **options: Agent options (a session manager, hooks, a different name ...).
    """
    settings: DemoAgentOptions = {
        "system_prompt": DEMO_SYSTEM_PROMPT,
        "name": "demo",
        "description": DEMO_DESCRIPTION,
    }
    settings.update(options)
    return Agent(DemoModel(token_delay=token_delay), tools=DEMO_TOOLS, **settings)
