"""The ``handoff_to_agent`` tool a swarm injects into each member, and the handoff prompt.

The tool is built per member, so it knows who is handing off and can list the others
in its description. It only validates and records: the swarm applies the handoff when
the member's run ends, which the tool arranges by setting `RunContext.end_after_tools`
(the next member answers, not this one). A bad target is an error result the model
sees, so it can correct itself and the swarm goes on.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import cast

from agentkeel.agent import Agent
from agentkeel.context import RunContext
from agentkeel.errors import ConfigurationError
from agentkeel.hooks.events import BeforeRunEvent
from agentkeel.messages import JSONObject
from agentkeel.multiagent.record import SwarmRunState
from agentkeel.multiagent.result import HandoffRecord
from agentkeel.state import SharedState
from agentkeel.tools.decorator import Tool, ToolInputError, tool

__all__ = [
    "HANDOFF_TOOL",
    "Recorder",
    "accept_handoff",
    "enlist",
    "handoff_prompt",
    "handoff_tool",
    "index_members",
]

HANDOFF_TOOL = "handoff_to_agent"
"""The injected tool's name; a member must not have a tool of its own with this name."""

Recorder = Callable[[HandoffRecord], Awaitable[str]]
"""Validates and records a handoff; returns the tool's output or raises ToolInputError."""


def handoff_tool(member: str, roster: Mapping[str, str], record: Recorder) -> Tool:
    """The handoff tool of `member`; `roster` maps every member's name to its description."""
    others = "\n".join(
        f"- {name}: {description or 'no description'}"
        for name, description in roster.items()
        if name != member
    )
    description = (
        "Hand the conversation to another member of your team when they are better suited "
        "to continue. They see only `message` (and `context`), not this conversation, so "
        "say everything they need. After the handoff you stop; they answer the user.\n"
        f"Team members:\n{others or '- (none)'}"
    )

    async def handoff_to_agent(
        name: str, message: str, run: RunContext, context: dict[str, object] | None = None
    ) -> str:
        """Hand off to another member.

        Args:
            name: The member to hand the conversation to (one of the team members).
            message: What the member should do, with everything it needs to know.
            context: Optional extra JSON data for the member (an object).
            run: Injected by the run loop (hidden from the model).
        """
        output = await record(
            HandoffRecord(
                from_agent=member,
                to_agent=name,
                message=message,
                context=None if context is None else cast(JSONObject, context),
            )
        )
        run.end_after_tools = True
        return output

    return tool(name=HANDOFF_TOOL, description=description)(handoff_to_agent)


def handoff_prompt(handoff: HandoffRecord) -> str:
    """The prompt the next member runs with: the message, and the context as JSON text."""
    if not handoff.context:
        return handoff.message
    rendered = json.dumps(handoff.context, ensure_ascii=False, indent=2, sort_keys=True)
    return f"{handoff.message}\n\nContext from {handoff.from_agent}:\n{rendered}"


def accept_handoff(
    run: SwarmRunState | None, members: Collection[str], handoff: HandoffRecord
) -> str:
    """Record `handoff` as the run's pending handoff.

    Raises:
        ToolInputError: The target is unknown or the member itself, or the step already
            handed off; the model sees the message (with the members) and can correct it.
    """
    source = handoff.from_agent
    if run is None or run.member != source:
        raise ToolInputError(f"{HANDOFF_TOOL} only works while the swarm runs {source!r}")
    others = ", ".join(name for name in members if name != source) or "none"
    if handoff.to_agent == source:
        raise ToolInputError(f"you are {source!r}; hand off to another member: {others}")
    if handoff.to_agent not in members:
        raise ToolInputError(
            f"unknown member {handoff.to_agent!r}; the members you can hand off to are: {others}"
        )
    if not handoff.message.strip():
        raise ToolInputError("the message must tell the next member what to do")
    if run.pending is not None:
        raise ToolInputError(
            f"this step already hands off to {run.pending.to_agent!r}; hand off once"
        )
    run.pending = handoff
    return f"Handed off to {handoff.to_agent}."


def index_members(members: Sequence[Agent]) -> dict[str, Agent]:
    """The members by name; ConfigurationError for duplicates or a member of another swarm."""
    if not members:
        raise ConfigurationError("a swarm needs at least one member")
    index: dict[str, Agent] = {}
    for member in members:
        if not isinstance(member, Agent):
            raise ConfigurationError(f"swarm member {member!r} is not an Agent")
        if member.name in index:
            raise ConfigurationError(f"two swarm members are named {member.name!r}")
        if HANDOFF_TOOL in member.tools:
            raise ConfigurationError(
                f"member {member.name!r} already has a tool named {HANDOFF_TOOL!r} "
                "(is it a member of another swarm?)"
            )
        index[member.name] = member
    return index


def enlist(
    members: Mapping[str, Agent],
    shared_state: SharedState,
    current_run: Callable[[], SwarmRunState | None],
) -> None:
    """Make `members` a team: the shared state, a handoff tool each, and the resume hook.

    `current_run` returns the swarm's open run, where handoffs are recorded. The hook
    makes a member that resumes a step which already handed off end after that step,
    as it would have without the suspension.
    """
    roster = {member.name: member.description for member in members.values()}

    async def accept(handoff: HandoffRecord) -> str:
        return accept_handoff(current_run(), members, handoff)

    def on_member_start(event: BeforeRunEvent) -> None:
        run = current_run()
        if (
            event.resumed
            and run is not None
            and run.pending is not None
            and run.pending.from_agent == event.context.agent_name
        ):
            event.context.end_after_tools = True

    for member in members.values():
        member.shared_state = shared_state
        member.tools[HANDOFF_TOOL] = handoff_tool(member.name, roster, accept)
        member.hooks.add_callback(BeforeRunEvent, on_member_start)
