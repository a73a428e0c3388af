"""SwarmResult and HandoffRecord: what a swarm run returns.

A SwarmResult has the fields the server reads from an AgentResult (`run_id`, `status`,
`text`, `tool_names`, `interrupt`, `interrupts`, `error`, `context_id`), so a served
swarm answers on the wire exactly like an agent, plus what only a swarm has: the
handoff trail, every member's AgentResult and a copy of the shared state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentkeel.interrupts import Interrupt
from agentkeel.messages import JSONObject
from agentkeel.result import (
    AgentResult,
    ErrorInfo,
    RunResultFront,
    RunStatus,
    ToolCallRecord,
    Usage,
)

__all__ = ["HandoffRecord", "SwarmResult"]


@dataclass(frozen=True, slots=True, kw_only=True)
class HandoffRecord:
    """One handoff: which member handed the conversation to which, and what it passed on.

    Only `message` and `context` reach the next member's model (as its prompt); the
    shared state never does.
    """

    from_agent: str
    """The member that called ``handoff_to_agent``."""
    to_agent: str
    """The member that runs next."""
    message: str
    """What the handing member told the next one to do."""
    context: JSONObject | None = None
    """Extra JSON the handing member passed along (rendered as text in the prompt)."""

    def to_json(self) -> JSONObject:
        """Encode for the swarm's session record."""
        return {
            "from": self.from_agent,
            "to": self.to_agent,
            "message": self.message,
            "context": self.context,
        }

    @classmethod
    def from_json(cls, data: JSONObject) -> HandoffRecord:
        """Decode from the swarm's session record; ValueError when malformed."""
        context = data.get("context")
        if context is not None and not isinstance(context, dict):
            raise ValueError("a handoff's context must be an object or null")
        return cls(
            from_agent=str(data["from"]),
            to_agent=str(data["to"]),
            message=str(data["message"]),
            context=context,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class SwarmResult(RunResultFront):
    """The end of a swarm run (or of the part of it before a suspension).

    Server-side only, like an AgentResult: `results`, `tool_calls` and
    `shared_context` never cross the wire; a client sees `status`, `text`,
    `tool_names`, `interrupt` and `error`, as for any agent.
    """

    run_id: str
    """The swarm run's id (one per swarm run; each member run has its own)."""
    status: RunStatus
    text: str = ""
    """The final text: the answer of the member that finished the run."""
    agent: str | None = None
    """The member that ended the run: answered, failed, or raised the interrupts."""
    handoffs: tuple[HandoffRecord, ...] = ()
    """The handoff trail of this run, in order."""
    results: tuple[AgentResult, ...] = ()
    """Each member run's AgentResult, in order (a resumed member run replaces its
    suspended result). After a restart, only runs since the restart are here."""
    tool_calls: tuple[ToolCallRecord, ...] = ()
    """Every tool call of the run, over all members, in order (kept across restarts)."""
    usage: Usage = field(default_factory=Usage)
    shared_context: JSONObject = field(default_factory=dict)
    """A copy of the swarm's shared state when the run ended."""
    interrupts: tuple[Interrupt, ...] = ()
    """Pending interrupts when `status` is ``suspended``, all raised by `agent`."""
    error: ErrorInfo | None = None
    """Why the run failed: a member's error, or a swarm limit (``max_handoffs_exceeded``,
    ``max_iterations_exceeded``, ``swarm_timeout``)."""
    context_id: str | None = None

    @property
    def output(self) -> Any:
        """The structured answer of the member that finished (if it has an output type)."""
        if self.status != "completed" or not self.results:
            return None
        return self.results[-1].output
