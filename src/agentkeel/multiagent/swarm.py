"""Swarm: a team of agents that hand the conversation to one another.

One member is active at a time. Every member gets a ``handoff_to_agent`` tool; when a
member calls it, its run ends after that step's tool results and the named member runs
next, with the handoff message (and its JSON `context`, as text) as its prompt. Each
member keeps its own history and AgentState; the swarm's `SharedState` is set on every
member, so their tools and hooks share it, and it never reaches a model or the wire.

A swarm run ends when a member answers without handing off (``completed``), when a
member fails or is cancelled, when a limit stops it (``failed`` with
``max_handoffs_exceeded``, ``max_iterations_exceeded`` or ``swarm_timeout``), or when a
member's tool waits for a human (``suspended``: the whole swarm waits, the decision
resumes that member, and the swarm goes on from there). The next prompt goes to the
member that ran last.

`SwarmMemory` keeps and saves the swarm's position, `SwarmLoop` runs the members, and
the Swarm is `Servable` like an Agent, with the same front (`ServableFront`): its
blocking methods run on one event loop kept for the swarm's life; `close()` stops it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence

import anyio

from agentkeel.agent import Agent
from agentkeel.context import RunContext
from agentkeel.errors import (
    ConfigurationError,
    InterruptNotFoundError,
    InterruptPendingError,
)
from agentkeel.events import RunEvent
from agentkeel.hooks.events import BeforeRunEvent
from agentkeel.hooks.registry import HookRegistry
from agentkeel.interrupts import Decision, Interrupt, check_decision
from agentkeel.messages import JSONValue, Message
from agentkeel.multiagent.handoff import HANDOFF_TOOL, enlist, index_members
from agentkeel.multiagent.loop import (
    MemberCall,
    SwarmLimits,
    SwarmLoop,
    invoke_member,
)
from agentkeel.multiagent.memory import SwarmMemory
from agentkeel.multiagent.record import SwarmRunState
from agentkeel.multiagent.result import HandoffRecord, SwarmResult
from agentkeel.multiagent.session import SwarmSession
from agentkeel.result import AgentResult
from agentkeel.rewind import Rewind
from agentkeel.servable import EventHandler, RunStart, ServableFront, prompt_message
from agentkeel.session import SessionHome
from agentkeel.state import InvocationState, SharedState
from agentkeel.tools.decorator import Tool

__all__ = ["Swarm", "SwarmStreamItem"]

SwarmStreamItem = RunEvent | SwarmResult
"""What `Swarm.stream` yields: member events (tagged with `agent`), then the SwarmResult."""


class Swarm(ServableFront[SwarmResult]):
    """Agents that hand a conversation to each other; call it like an Agent.

    Args:
        members: The agents of the swarm, with unique names.
        entry: The member (or its name) that answers the first prompt; default the first.
        max_handoffs: Handoffs one run may make (see `SwarmLimits`).
        max_iterations: Member runs one run may start.
        timeout: Seconds of member running time one run may use; None for no limit.
        name: The swarm's name (logs, the A2A card).
        description: What the swarm does, for clients listing agents.
        shared_state: Initial shared state (a mapping of JSON values, or a SharedState).
        session: Persists the swarm and its members; can also be set later, before the
            first run or restore (see `SwarmSession` for the session ids).
    """

    _owner = "Swarm"

    def __init__(
        self,
        members: Sequence[Agent],
        *,
        entry: str | Agent | None = None,
        max_handoffs: int = 20,
        max_iterations: int = 20,
        timeout: float | None = 900.0,
        name: str = "swarm",
        description: str = "",
        shared_state: SharedState | Mapping[str, JSONValue] | None = None,
        session: SwarmSession | None = None,
    ) -> None:
        self.members: dict[str, Agent] = index_members(members)
        """The members by name, in the order given."""
        entry_name = entry.name if isinstance(entry, Agent) else entry
        entry_name = next(iter(self.members)) if entry_name is None else entry_name
        if self.members.get(entry_name) is None or (
            isinstance(entry, Agent) and self.members[entry_name] is not entry
        ):
            raise ConfigurationError(f"the entry {entry_name!r} is not a member of the swarm")
        self.entry = entry_name
        self.limits = SwarmLimits(
            max_handoffs=max_handoffs, max_iterations=max_iterations, timeout=timeout
        )
        _check_session(session, self.members)  # before any member is changed
        self.name = name
        self.description = description
        self.shared_state = (
            shared_state if isinstance(shared_state, SharedState) else SharedState(shared_state)
        )
        self.hooks = HookRegistry()
        """Swarm-level hooks: BeforeRunEvent fires when a swarm run starts or resumes, with
        the swarm's run id (each member's own hooks fire inside its runs)."""
        self._memory = SwarmMemory(
            members=self.members, entry=entry_name, shared_state=self.shared_state
        )
        enlist(self.members, self.shared_state, lambda: self._memory.run)
        self.session = session
        self._loop: SwarmLoop | None = None
        self._cancelled = False
        self._drop = False
        self._init_front()

    # -- the surface the server uses ----------------------------------------------------

    @property
    def session(self) -> SwarmSession | None:
        """Where the swarm and its members persist; set it before the first run."""
        return self._memory.session

    @session.setter
    def session(self, session: SwarmSession | None) -> None:
        if self._memory.restored:
            raise ConfigurationError("attach a session before the swarm's first run or restore")
        _check_session(session, self.members)
        self._memory.session = session

    @property
    def session_manager(self) -> None:
        """Always None: a swarm persists through `session` (one SessionManager per member)."""
        return None

    @session_manager.setter
    def session_manager(self, value: object) -> None:
        raise ConfigurationError(
            "a Swarm is persisted with swarm.session = SwarmSession(definition, context_id, "
            "storage, checkpointer, principal), not with a SessionManager (docs/swarm.md)"
        )

    @property
    def active(self) -> str:
        """The member the next prompt goes to (the one that ran last)."""
        return self._memory.active

    @property
    def handoffs(self) -> tuple[HandoffRecord, ...]:
        """The handoff trail of the current run, or of the last one."""
        return self._memory.trail

    @property
    def context_id(self) -> str | None:
        """The context id of the attached session, if any."""
        session = self._memory.session
        return None if session is None else session.context_id

    @property
    def suspended_run_id(self) -> str | None:
        """The id of the suspended swarm run a decision resumes (it keeps its id)."""
        run = self._memory.run
        return None if run is None or self._memory.suspended is None else run.run_id

    @property
    def agents(self) -> tuple[Agent, ...]:
        """The agents that do the work: the members, in order."""
        return tuple(self.members.values())

    def attach_session(self, home: SessionHome) -> None:
        """Give a freshly built context its persistent memory (the swarm's and members')."""
        self.session = SwarmSession(
            home.key.definition,
            home.key.context_id,
            home.storage,
            checkpointer=home.checkpointer,
            principal=home.key.principal,
        )

    @property
    def tools(self) -> dict[str, Tool]:
        """Every member's tools except the handoff tool (the agent card's skills)."""
        union: dict[str, Tool] = {}
        for member in self.members.values():
            for tool_name, item in member.tools.items():
                if tool_name != HANDOFF_TOOL:
                    union.setdefault(tool_name, item)
        return union

    async def restore(self) -> None:
        """Load the members' memory and the swarm's record; again if storage moved on.

        A member with pending interrupts makes the swarm suspended in that member, so that
        a decision resumes there, also in a new process.
        """
        await self._memory.restore()

    def _restore_pending(self) -> bool:
        return self._memory.session is not None and not self._memory.restored

    def _pending(self) -> tuple[Interrupt, ...]:
        return self._memory.pending_interrupts

    def cancel(self, *, drop: bool = False) -> bool:
        """Cancel the swarm run in progress; False when nothing was running.

        The running member is cancelled (its history stays valid), no other member
        starts, and the run ends ``cancelled``. With `drop` (a rollback) the whole turn
        leaves the conversation as if never sent: the running member commits nothing,
        the run's messages leave the transcript, the members that answered earlier in it
        forget those turns (at their next turn, `multiagent.transcript`), and the member
        it started in is active again. The shared state is not rolled back.
        """
        if not self._lock.locked():
            return False
        self._cancelled = True
        self._drop = self._drop or drop
        if self._loop is not None:
            self._loop.cancel(drop=drop)
        return True

    async def rewind_async(
        self,
        rewind: Rewind,
        *,
        invocation_state: InvocationState | None = None,
        on_event: EventHandler = lambda event: None,
        run_id: str | None = None,
        on_start: RunStart | None = None,
    ) -> SwarmResult:
        """Edit or regenerate a message of the swarm's transcript (`Rewind`).

        The member that holds the message runs first, cutting its own history there;
        the transcript and the other members are cut as `multiagent.transcript` says.
        """
        state = InvocationState() if invocation_state is None else invocation_state
        return await self._execute(rewind, None, state, on_event, run_id, on_start)

    # -- the run ------------------------------------------------------------------------

    async def _execute(
        self,
        prompt: str | Message | Rewind | None,
        resume: tuple[str, Decision] | None,
        invocation_state: InvocationState,
        emit: EventHandler,
        run_id: str | None,
        on_start: RunStart | None,
    ) -> SwarmResult:
        state = invocation_state
        async with self._lock:
            self._cancelled = self._drop = False
            await self.restore()
            if resume is None:
                run, member, call = self._begin(prompt, state, run_id)
            else:
                run, member, call = self._resume(*resume, state)
            try:
                resumed = resume is not None
                return await self._drive(run, member, call, resumed, state, emit, on_start)
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await self._memory.abandon(run, self.context_id, drop=self._drop)
                raise
            finally:
                self._loop = None

    async def _drive(
        self,
        run: SwarmRunState,
        member: Agent,
        call: MemberCall,
        resumed: bool,
        state: InvocationState,
        emit: EventHandler,
        on_start: RunStart | None,
    ) -> SwarmResult:
        context = RunContext(
            context_id=self.context_id,
            run_id=run.run_id,
            state=self.shared_state,
            invocation_state=state,
            agent_name=self.name,
            shared_state=self.shared_state,
        )
        prompt = run.input if isinstance(run.input, str) and not resumed else None
        await self.hooks.invoke(
            BeforeRunEvent(context=context, prompt=prompt, messages=(), resumed=resumed)
        )
        if on_start is not None:
            on_start()
        loop = self._loop = SwarmLoop(
            members=self.members,
            limits=self.limits,
            run=run,
            invocation_state=state,
            emit=emit,
            on_handoff=self._memory.save,
            on_member=self._memory.commit_member,
            cut_of=self._memory.cut_of,
        )
        if self._cancelled:
            loop.cancel(drop=self._drop)
        outcome = await loop.run(member, call, fresh=not resumed)
        return await self._memory.finish(run, outcome, self.context_id, drop=self._drop)

    def _begin(
        self, prompt: str | Message | Rewind | None, state: InvocationState, run_id: str | None
    ) -> tuple[SwarmRunState, Agent, MemberCall]:
        pending = self.pending_interrupts
        if pending:
            raise InterruptPendingError(
                f"the swarm waits for a decision on interrupt {pending[0].id}",
                interrupt_id=pending[0].id,
            )
        if isinstance(prompt, Rewind):
            run, member = self._memory.begin_rewind(prompt, run_id)

            def call(on_event: EventHandler) -> Awaitable[AgentResult]:
                return member.rewind_async(prompt, invocation_state=state, on_event=on_event)

            return run, member, call
        text = prompt_message(prompt).text
        member = self.members[self._memory.active]
        cut = self._memory.cut_of(member.name)
        run = self._memory.begin(text, run_id)
        return run, member, invoke_member(member, prompt, state, cut)

    def _resume(
        self, interrupt_id: str, decision: Decision, state: InvocationState
    ) -> tuple[SwarmRunState, Agent, MemberCall]:
        match = next((item for item in self.pending_interrupts if item.id == interrupt_id), None)
        run, name = self._memory.run, self._memory.suspended
        if match is None or name is None or run is None:
            raise InterruptNotFoundError(f"no pending interrupt has the id {interrupt_id!r}")
        check_decision(match, decision)
        member = self.members[name]

        def call(on_event: EventHandler) -> Awaitable[AgentResult]:
            return member.resume_async(
                interrupt_id, decision, invocation_state=state, on_event=on_event
            )

        return run, member, call


def _check_session(session: SwarmSession | None, members: Mapping[str, Agent]) -> None:
    """Every member must get a valid session id; ConfigurationError names the one that can't."""
    if session is not None:
        for member in members:
            session.member_definition(member)
