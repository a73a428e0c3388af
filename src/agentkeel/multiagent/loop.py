"""The swarm loop: run members one after another, following handoffs, within the limits.

Like the agent's RunLoop, it knows no storage: it works on a SwarmRunState, reports
progress through `on_handoff` (the Swarm saves there), and ends in a SwarmOutcome. Each
member run's events reach `emit` tagged with the member's name.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Literal

import anyio

from agentkeel.agent import Agent
from agentkeel.errors import ConfigurationError, InvalidRequestError
from agentkeel.events import ErrorEvent, RunEvent
from agentkeel.interrupts import Interrupt
from agentkeel.messages import Message
from agentkeel.multiagent.handoff import handoff_prompt
from agentkeel.multiagent.record import SwarmRunState
from agentkeel.multiagent.result import HandoffRecord
from agentkeel.result import CANCELLED_ERROR, AgentResult, ErrorInfo, RunStatus
from agentkeel.rewind import Rewind
from agentkeel.state import InvocationState

__all__ = ["MemberCall", "SwarmLimits", "SwarmLoop", "SwarmOutcome", "invoke_member"]

EventHandler = Callable[[RunEvent], None]
MemberCall = Callable[[EventHandler], Awaitable[AgentResult]]
"""Starts or resumes one member run, given where its events go."""
_Ending = tuple[RunStatus, ErrorInfo | None]
_CANCEL_RETRY_SECONDS = 0.01


@dataclass(frozen=True, slots=True, kw_only=True)
class SwarmLimits:
    """Bounds on one swarm run, so that members cannot hand off to each other forever."""

    max_handoffs: int = 20
    """Handoffs a run may make; one more fails with ``max_handoffs_exceeded``."""
    max_iterations: int = 20
    """Member runs a run may start; one more fails with ``max_iterations_exceeded``."""
    timeout: float | None = 900.0
    """Seconds of member running time per run (waiting for a human does not count);
    then the running member is cancelled and the run fails with ``swarm_timeout``."""

    def __post_init__(self) -> None:
        if self.max_handoffs < 0 or self.max_iterations < 1:
            raise ConfigurationError("max_handoffs must be >= 0 and max_iterations >= 1")
        if self.timeout is not None and self.timeout <= 0:
            raise ConfigurationError("timeout must be a positive number of seconds, or None")


@dataclass(frozen=True, slots=True, kw_only=True)
class SwarmOutcome:
    """How a swarm run ended, and in which member."""

    status: RunStatus
    agent: str
    text: str = ""
    error: ErrorInfo | None = None
    interrupts: tuple[Interrupt, ...] = ()


class SwarmLoop:
    """Runs the members of one swarm run. Built per run (or resumed run)."""

    def __init__(
        self,
        *,
        members: Mapping[str, Agent],
        limits: SwarmLimits,
        run: SwarmRunState,
        invocation_state: InvocationState,
        emit: EventHandler,
        on_handoff: Callable[[SwarmRunState], Awaitable[None]],
        on_member: Callable[[SwarmRunState, AgentResult], Awaitable[None]] | None = None,
        cut_of: Callable[[str], str | None] = lambda member: None,
    ) -> None:
        self._members = members
        self._limits = limits
        self._run = run
        self._state = invocation_state
        self._emit = emit
        self._on_handoff = on_handoff
        self._on_member = on_member
        self._cut_of = cut_of
        self._stop: Literal["cancelled", "timeout"] | None = None
        self._current: Agent | None = None

    def cancel(self, *, drop: bool = False) -> None:
        """Cancel the running member and start no other one (`drop`: as `Agent.cancel`)."""
        self._stop = "cancelled"
        if self._current is not None:
            self._current.cancel(drop=drop)

    async def run(self, member: Agent, call: MemberCall, *, fresh: bool) -> SwarmOutcome:
        """Run `call` in `member`, then whoever it hands off to, until the run ends.

        `fresh` is False when `call` resumes a suspended member run (same iteration).
        """
        run = self._run
        if self._stop == "cancelled":  # cancelled before the first member started
            return SwarmOutcome(status="cancelled", agent=member.name, error=CANCELLED_ERROR)
        while True:
            if fresh:
                run.iterations += 1
            run.member = member.name
            result = await self._run_member(member, call)
            run.add_result(result)
            if result.status == "suspended":
                return SwarmOutcome(
                    status="suspended", agent=member.name, interrupts=result.interrupts
                )
            if self._on_member is not None:
                await self._on_member(run, result)
            handoff, run.pending = run.pending, None
            ending = self._ending(result, handoff)
            if ending is not None:
                status, error = ending
                if status == "failed" and error is not None and error is not result.error:
                    self._emit(
                        ErrorEvent(code=error.code, message=error.message, agent=member.name)
                    )
                text = result.text if status == "completed" else ""
                return SwarmOutcome(status=status, agent=member.name, text=text, error=error)
            if handoff is None:  # _ending returns None only for a handoff
                raise RuntimeError("internal error: a member run continued without a handoff")
            run.handoffs.append(handoff)
            member = self._members[handoff.to_agent]
            run.member = member.name
            await self._on_handoff(run)
            prompt, cut = handoff_prompt(handoff), self._cut_of(member.name)
            call, fresh = invoke_member(member, prompt, self._state, cut), True

    def _ending(self, result: AgentResult, handoff: HandoffRecord | None) -> _Ending | None:
        """How the run ends after `result`, or None when `handoff` continues it."""
        if result.status == "cancelled":
            if self._stop == "timeout":
                return "failed", self._timeout_error()
            return "cancelled", result.error
        if result.status == "failed":
            return "failed", result.error
        if handoff is None:
            return "completed", None
        limits = self._limits
        if len(self._run.handoffs) >= limits.max_handoffs:
            return "failed", ErrorInfo(
                code="max_handoffs_exceeded",
                message=f"{handoff.from_agent} tried to hand off to {handoff.to_agent}, but "
                f"the swarm already made its {limits.max_handoffs} handoffs",
            )
        if self._stop == "cancelled":
            return "cancelled", CANCELLED_ERROR
        if self._stop == "timeout" or (
            limits.timeout is not None and self._run.elapsed >= limits.timeout
        ):
            return "failed", self._timeout_error()
        if self._run.iterations >= limits.max_iterations:
            return "failed", ErrorInfo(
                code="max_iterations_exceeded",
                message=f"the swarm ran all {limits.max_iterations} member runs without finishing",
            )
        return None

    def _timeout_error(self) -> ErrorInfo:
        return ErrorInfo(
            code="swarm_timeout",
            message=f"the swarm used all {self._limits.timeout} seconds without finishing",
        )

    async def _run_member(self, member: Agent, call: MemberCall) -> AgentResult:
        """One member run, its events tagged with its name, within the time left."""

        def tagged(event: RunEvent) -> None:
            self._emit(replace(event, agent=member.name))

        timeout = self._limits.timeout
        self._current = member
        started = anyio.current_time()
        try:
            if timeout is None:
                return await call(tagged)
            return await self._within(timeout - self._run.elapsed, member, call, tagged)
        finally:
            self._current = None
            self._run.elapsed += anyio.current_time() - started

    async def _within(
        self, seconds: float, member: Agent, call: MemberCall, tagged: EventHandler
    ) -> AgentResult:
        """Run `call`; past `seconds` the member is cancelled (it ends with a valid history)."""
        result: AgentResult | None = None
        failure: Exception | None = None
        async with anyio.create_task_group() as group:
            group.start_soon(self._watchdog, seconds, member)
            try:
                result = await call(tagged)
            except Exception as exc:  # re-raised below, not wrapped in an ExceptionGroup
                failure = exc
            group.cancel_scope.cancel()
        if failure is not None:
            raise failure
        if result is None:
            raise RuntimeError("internal error: a member run returned nothing")
        return result

    async def _watchdog(self, seconds: float, member: Agent) -> None:
        await anyio.sleep(max(seconds, 0.0))
        self._stop = self._stop or "timeout"
        while not member.cancel():  # not inside its run loop yet: try again shortly
            await anyio.sleep(_CANCEL_RETRY_SECONDS)


def invoke_member(
    member: Agent, prompt: str | Message | None, state: InvocationState, cut: str | None = None
) -> MemberCall:
    """A MemberCall that starts a new run of `member` with `prompt`.

    With `cut` (a member cut waiting in the swarm, `multiagent.transcript`), the run first
    forgets the member's turns from that prompt on, in the same commit as its own.
    """
    if prompt is None:
        raise InvalidRequestError("a prompt must be a string or a user Message")

    def call(on_event: EventHandler) -> Awaitable[AgentResult]:
        if cut is not None and any(message.id == cut for message in member.messages):
            rewind = Rewind(cut, prompt)
            return member.rewind_async(rewind, invocation_state=state, on_event=on_event)
        return member.invoke_async(prompt, invocation_state=state, on_event=on_event)

    return call
