"""RunContext: the typed object handed to tools, hooks and middleware during a run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentkeel.state import AgentState, InvocationState, SharedState

if TYPE_CHECKING:
    from agentkeel.memory.memory import AgentMemory

__all__ = ["RunContext"]


@dataclass(slots=True, kw_only=True)
class RunContext:
    """Who is running and what they may share.

    A tool receives it by declaring a parameter annotated `RunContext` (or `AgentState`,
    or `InvocationState` for just that part). `step` advances as the run loop does.
    """

    context_id: str | None
    """The conversation's context id (None for an agent used without one)."""
    run_id: str
    state: AgentState
    invocation_state: InvocationState
    agent_name: str
    step: int = 0
    principal: str | None = None
    """Who is calling, when the server authenticates; None otherwise."""
    shared_state: SharedState | None = None
    """The swarm's shared state when the agent runs as a swarm member, else None."""
    end_after_tools: bool = False
    """Set by a tool to end the run once this step's tool results are in, without another
    model call (a swarm's handoff does this: the next member answers, not this one)."""
    memory: AgentMemory | None = None
    """The caller's memory across conversations (set by `agentkeel.memory.MemoryHook`;
    None when the agent has none). The semantic tools read it."""
