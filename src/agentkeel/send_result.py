"""SendResult: the end of one turn as a client reads it off the wire (SPEC 3)."""

from __future__ import annotations

from dataclasses import dataclass, field

from agentkeel.events import InterruptEvent
from agentkeel.messages import JSONValue
from agentkeel.result import ErrorInfo, RunStatus, Usage

__all__ = ["SendResult"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SendResult:
    """The end of one turn as the wire reports it: the ``send`` body or the ``done`` frame."""

    context_id: str
    """The conversation this turn belongs to; the client sends it back to continue."""
    run_id: str
    """The run's id; a resumed run keeps it."""
    status: RunStatus
    """``completed``, ``suspended`` (see `interrupt`), ``failed`` (see `error`), ``cancelled``."""
    text: str = ""
    """The authoritative completion text of the run."""
    tool_calls: tuple[str, ...] = ()
    """Names of the tools that ran, in call order (inputs and outputs stay on the server)."""
    interrupt: InterruptEvent | None = None
    """The pending decision when `status` is ``suspended``: answer it with `resume`."""
    error: ErrorInfo | None = None
    """Why the run failed, when `status` is ``failed``."""
    usage: Usage = field(default_factory=Usage)
    """The tokens the run used, over all its model calls."""
    cost: float | None = None
    """What the run cost, when the server has a price for the agent's model."""
    output: JSONValue = None
    """The validated structured answer of an agent with an output type, as JSON."""
