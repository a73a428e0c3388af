"""The swarm's own bookkeeping, in a form its session can hold as JSON.

`SwarmRunState` is one swarm run in progress (or suspended): the run id, the handoff
trail, the counters the limits read, and a handoff a member recorded but the swarm has
not applied yet. `SwarmRecord` is everything the swarm persists between runs: the shared
state, the active member, the suspended member and the current run.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agentkeel.messages import SCHEMA_VERSION, JSONObject, JSONValue
from agentkeel.multiagent.result import HandoffRecord
from agentkeel.result import AgentResult, ToolCallRecord, Usage

__all__ = ["SwarmRecord", "SwarmRunState"]


@dataclass(slots=True, kw_only=True)
class SwarmRunState:
    """The mutable state of one swarm run."""

    run_id: str
    input: JSONValue
    started_at: float
    member: str | None = None
    """The member running now, or suspended."""
    iterations: int = 0
    """Member runs started (a resumed member run is the same iteration)."""
    elapsed: float = 0.0
    """Seconds spent running members (time waiting for a human does not count)."""
    handoffs: list[HandoffRecord] = field(default_factory=list)
    pending: HandoffRecord | None = None
    """A handoff the running member's tool recorded; applied when its run ends."""
    results: list[AgentResult] = field(default_factory=list)
    """AgentResults of this process's member runs (never persisted)."""
    earlier_tool_calls: list[ToolCallRecord] = field(default_factory=list)
    """Tool calls of member runs that ended before this process restored the run."""
    earlier_usage: Usage = field(default_factory=Usage)
    cut: int | None = None
    """An edit or regenerate: where the swarm's transcript is cut when the rewinding member
    commits (None once it did, or for a plain turn)."""
    cuts: dict[str, str] = field(default_factory=dict)
    """The other members' cuts (see `multiagent.transcript`), adopted with that commit."""
    transcript_start: int | None = None
    """Where this run's messages begin in the swarm's transcript (a rollback cuts there)."""

    def add_result(self, result: AgentResult) -> None:
        """Keep `result`; a resumed member run replaces its suspended result."""
        for index, existing in enumerate(self.results):
            if existing.run_id == result.run_id:
                self.results[index] = result
                return
        self.results.append(result)

    def tool_calls(self, *, finished_only: bool = False) -> tuple[ToolCallRecord, ...]:
        """Every tool call of the run in order (or only those of ended member runs)."""
        calls = list(self.earlier_tool_calls)
        for result in self.results:
            if not finished_only or result.status != "suspended":
                calls.extend(result.tool_calls)
        return tuple(calls)

    def usage(self, *, finished_only: bool = False) -> Usage:
        """Token usage summed over the run's member runs."""
        total = self.earlier_usage
        for result in self.results:
            if not finished_only or result.status != "suspended":
                total = total + result.usage
        return total

    def to_json(self) -> JSONObject:
        """Encode for the swarm's session record.

        A suspended member's calls stay in its own checkpoint, so only the member runs
        that ended are counted here.
        """
        usage = self.usage(finished_only=True)
        return {
            "run_id": self.run_id,
            "input": self.input,
            "started_at": self.started_at,
            "member": self.member,
            "iterations": self.iterations,
            "elapsed": self.elapsed,
            "handoffs": [item.to_json() for item in self.handoffs],
            "pending": None if self.pending is None else self.pending.to_json(),
            "tool_calls": [item.to_json() for item in self.tool_calls(finished_only=True)],
            "usage": usage.to_json(),
            "cut": self.cut,
            "cuts": dict(self.cuts),
            "transcript_start": self.transcript_start,
        }

    @classmethod
    def from_json(cls, data: JSONObject) -> SwarmRunState:
        """Decode; raises ValueError, KeyError or TypeError when malformed."""
        handoffs = data.get("handoffs") or []
        calls = data.get("tool_calls") or []
        usage = data.get("usage") or {}
        pending = data.get("pending")
        started, elapsed, iterations = (
            data["started_at"],
            data.get("elapsed", 0),
            data["iterations"],
        )
        member = data.get("member")
        cut, start = _position(data.get("cut")), _position(data.get("transcript_start"))
        if (
            not isinstance(handoffs, list)
            or not isinstance(calls, list)
            or not isinstance(usage, dict)
            or not isinstance(started, int | float)
            or not isinstance(elapsed, int | float)
            or not isinstance(iterations, int)
            or (pending is not None and not isinstance(pending, dict))
        ):
            raise ValueError("malformed swarm run")
        input_tokens, output_tokens = usage.get("input_tokens", 0), usage.get("output_tokens", 0)
        return cls(
            run_id=str(data["run_id"]),
            input=data.get("input"),
            started_at=float(started),
            member=None if member is None else str(member),
            iterations=iterations,
            elapsed=float(elapsed),
            handoffs=[HandoffRecord.from_json(item) for item in handoffs if isinstance(item, dict)],
            pending=None if pending is None else HandoffRecord.from_json(pending),
            earlier_tool_calls=[
                ToolCallRecord.from_json(item) for item in calls if isinstance(item, dict)
            ],
            earlier_usage=Usage(
                input_tokens=input_tokens if isinstance(input_tokens, int) else 0,
                output_tokens=output_tokens if isinstance(output_tokens, int) else 0,
            ),
            cut=cut,
            cuts=_cuts(data.get("cuts")),
            transcript_start=start,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class SwarmRecord:
    """What a swarm keeps in its own session between runs and across restarts."""

    members: tuple[str, ...]
    """The member names when it was saved (so the session can be deleted without them)."""
    active: str
    """The member the next prompt goes to: the one that ran last."""
    shared: JSONObject
    """The shared state."""
    suspended: str | None = None
    """The member whose pending interrupts suspend the swarm."""
    run: SwarmRunState | None = None
    """The run in progress or suspended; None between runs."""
    handoffs: tuple[HandoffRecord, ...] = ()
    """The handoff trail of the current run, or of the last one when none is open."""
    cuts: dict[str, str] = field(default_factory=dict)
    """Member cuts waiting for the member's next turn: member -> the id of the prompt of
    its first turn to forget (`multiagent.transcript`)."""
    schema_version: int = SCHEMA_VERSION

    def to_json(self) -> JSONObject:
        """Encode as the swarm session's state document."""
        return {
            "schema_version": self.schema_version,
            "members": list(self.members),
            "active": self.active,
            "shared": self.shared,
            "suspended": self.suspended,
            "run": None if self.run is None else self.run.to_json(),
            "handoffs": [item.to_json() for item in self.handoffs],
            "cuts": dict(self.cuts),
        }

    @classmethod
    def from_json(cls, data: JSONObject) -> SwarmRecord:
        """Decode; raises ValueError, KeyError or TypeError when malformed."""
        members, shared, run = data.get("members") or [], data["shared"], data.get("run")
        handoffs, suspended = data.get("handoffs") or [], data.get("suspended")
        version = data.get("schema_version", SCHEMA_VERSION)
        if (
            not isinstance(members, list)
            or not isinstance(shared, dict)
            or not isinstance(handoffs, list)
            or (run is not None and not isinstance(run, dict))
        ):
            raise ValueError("malformed swarm record")
        if isinstance(version, int) and version > SCHEMA_VERSION:
            raise ValueError("the swarm record was written by a newer agentkeel")
        return cls(
            members=tuple(str(name) for name in members),
            active=str(data["active"]),
            shared=shared,
            suspended=None if suspended is None else str(suspended),
            run=None if run is None else SwarmRunState.from_json(run),
            handoffs=tuple(
                HandoffRecord.from_json(item) for item in handoffs if isinstance(item, dict)
            ),
            cuts=_cuts(data.get("cuts")),
            schema_version=version if isinstance(version, int) else SCHEMA_VERSION,
        )


def _position(value: JSONValue) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError("malformed swarm run: a transcript position")
    return value


def _cuts(value: JSONValue) -> dict[str, str]:
    """Member cuts as stored (absent in records written before 0.3)."""
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ValueError("malformed swarm record: cuts")
    return {str(name): str(cut) for name, cut in value.items()}
