"""Agent: a model, its tools and its memory, run one turn at a time.

The Agent holds its collaborators and its memory (history, AgentState, a suspended
run) and delegates the run itself to `RunLoop`. It decides what a run commits:

- a run's messages join the history when the run ends, with any tool call left open
  (cancellation) closed by an error result, so the history is always valid;
- a run that ends before the model answered at all (it failed or was cancelled on the
  first model call) leaves the history as it was;
- a suspended run keeps its messages in its checkpoint until it ends.

With a SessionManager, all of this is saved before the result is returned.

The blocking methods (``agent(prompt)``, `resume`, `stream_sync`) run the async ones on
one event loop that lives as long as the Agent, in a thread of its own (`Portal`);
`close()`, or leaving ``with Agent(...) as agent:``, stops it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

import anyio

from agentkeel.context import RunContext
from agentkeel.conversation import ConversationManager, KeepAllConversationManager
from agentkeel.errors import (
    ConfigurationError,
    InterruptNotFoundError,
    InterruptPendingError,
)
from agentkeel.events import ErrorEvent, RunEvent, StatusEvent
from agentkeel.hooks.events import AfterRunEvent, BeforeRunEvent
from agentkeel.hooks.registry import HookProvider, HookRegistry
from agentkeel.ids import new_run_id
from agentkeel.interrupts import CancelRun, Decision, Interrupt, check_decision
from agentkeel.loop import LoopOutcome, RunLimits, RunLoop, close_step
from agentkeel.messages import JSONValue, Message, committed
from agentkeel.middleware import AgentMiddleware
from agentkeel.models.base import FINAL_ANSWER_TOOL, Model
from agentkeel.output import OutputType
from agentkeel.result import AgentResult, RunStatus, run_error, stop_reason
from agentkeel.rewind import Rewind
from agentkeel.run_state import RunState
from agentkeel.servable import EventHandler, RunStart, ServableFront, prompt_message
from agentkeel.session import SessionHome, SessionManager, meter_for
from agentkeel.state import AgentState, InvocationState, SharedState
from agentkeel.tools.decorator import Tool
from agentkeel.tools.toolset import Toolset, resolve_tools
from agentkeel.usage import TokenBudgets

__all__ = ["Agent", "StreamItem"]

logger = logging.getLogger(__name__)

StreamItem = RunEvent | AgentResult
"""What `Agent.stream` yields: run events, then the AgentResult last."""


class Agent(ServableFront[AgentResult]):
    """An AI agent: call it with a prompt, get an AgentResult.

    Args:
        model: The model provider (see `agentkeel.models`).
        tools: Tools the model may call: functions decorated with `@tool`, and toolsets
            whose tools are listed at the start of each run (an `MCPServer`).
        system_prompt: Instructions sent with every model call.
        name: The agent's name (logs, swarm members, the A2A card).
        description: What the agent does, for clients listing agents.
        hooks: Hook providers registered in order.
        middleware: Agent middleware; the first is the outermost.
        state: Initial AgentState (a mapping of JSON values, or an AgentState).
        conversation_manager: What the model sees and what history is kept.
        session_manager: Persists memory and suspended runs; can also be set later,
            before the first run.
        approve: Names of tools that suspend the run for a human approval.
        limits: Step budget and default tool timeout.
        output_type: The type of the answer (a pydantic model, a dataclass, a
            TypedDict, a union or a list of them): the run ends with a validated
            instance in `AgentResult.output`.
        output_retries: How many invalid answers go back to the model with their
            validation errors before the run fails with ``output_invalid``; None
            keeps `limits.output_retries` (1).
        budgets: Token budgets, checked before every model call.
    """

    def __init__(
        self,
        model: Model,
        *,
        tools: Iterable[Tool | Toolset] = (),
        system_prompt: str | None = None,
        name: str = "agent",
        description: str = "",
        hooks: Iterable[HookProvider] = (),
        middleware: Sequence[AgentMiddleware] = (),
        state: AgentState | Mapping[str, JSONValue] | None = None,
        conversation_manager: ConversationManager | None = None,
        session_manager: SessionManager | None = None,
        approve: Iterable[str] = (),
        limits: RunLimits | None = None,
        output_type: object = None,
        output_retries: int | None = None,
        budgets: TokenBudgets | None = None,
    ) -> None:
        if not isinstance(model, Model):
            raise ConfigurationError("model must implement agentkeel.models.Model")
        self.model = model
        self.tools: dict[str, Tool] = {}
        self.toolsets: list[Toolset] = []
        """Sources of tools known only at run time (MCP servers)."""
        for item in tools:
            if isinstance(item, Toolset) and not isinstance(item, Tool):
                self.toolsets.append(item)
                continue
            if not isinstance(item, Tool):
                raise ConfigurationError(
                    f"{item!r} is not a Tool; decorate the function with @tool"
                )
            if item.name in self.tools:
                raise ConfigurationError(f"two tools are named {item.name!r}")
            self.tools[item.name] = item
        self.system_prompt = system_prompt
        self.name = name
        self.description = description
        self.hooks = HookRegistry()
        for provider in hooks:
            self.hooks.add_provider(provider)
        self.middleware = list(middleware)
        self.state = state if isinstance(state, AgentState) else AgentState(state)
        self.conversation_manager = conversation_manager or KeepAllConversationManager()
        self.session_manager = session_manager
        self.approve = frozenset(approve)
        self.limits = limits or RunLimits()
        if output_retries is not None:
            if output_retries < 0:
                raise ConfigurationError("output_retries must not be negative")
            self.limits = replace(self.limits, output_retries=output_retries)
        self.output = (
            output_type
            if output_type is None or isinstance(output_type, OutputType)
            else OutputType.of(output_type)
        )
        """The prepared output type, or None for a text answer."""
        if self.output is not None and FINAL_ANSWER_TOOL in self.tools:
            raise ConfigurationError(
                f"a tool named {FINAL_ANSWER_TOOL!r} would hide the final answer of "
                "an agent with an output_type; rename the tool"
            )
        self.budgets = budgets or TokenBudgets()
        self.messages: list[Message] = []
        self.shared_state: SharedState | None = None
        """Set by a Swarm on its members; handed to tools through the RunContext."""
        self._suspended: RunState | None = None
        self._restored = False
        self._scope: anyio.CancelScope | None = None
        self._drop = False  # the run in progress is cancelled to be dropped (`cancel`)
        self._init_front()

    # -- public API ---------------------------------------------------------------------

    @property
    def context_id(self) -> str | None:
        """The context id of the attached session, if any."""
        return None if self.session_manager is None else self.session_manager.context_id

    @property
    def suspended_run_id(self) -> str | None:
        """The id of the suspended run a decision resumes (a resumed run keeps it)."""
        return None if self._suspended is None else self._suspended.run_id

    @property
    def agents(self) -> tuple[Agent]:
        """The agents that do the work: this one."""
        return (self,)

    def attach_session(self, home: SessionHome) -> None:
        """Give a freshly built context its persistent memory."""
        self.session_manager = home.manager()

    async def restore(self) -> None:
        """Load memory and any suspended run from the session.

        Every run calls it first. After the first load it costs one read, which loads
        again only when storage moved on (another process ran a turn on this context),
        and then only the turns it lacks when storage can tell which: a cached Agent
        never runs on stale memory (SPEC guarantee 9).
        """
        manager = self.session_manager
        if manager is not None:
            if self._restored:
                restored = await manager.refresh(self.messages)
                if restored is None:
                    return
            else:
                restored = await manager.restore(self.messages)
            self.messages = self.messages[: restored.kept] + restored.messages
            self.state.replace(restored.state)
            self._suspended = restored.suspended
        self._restored = True

    def _restore_pending(self) -> bool:
        return self.session_manager is not None and not self._restored

    def _pending(self) -> tuple[Interrupt, ...]:
        if self._suspended is None:
            return ()
        return tuple(p.interrupt for p in self._suspended.pending)

    def cancel(self, *, drop: bool = False) -> bool:
        """Cancel the run in progress; it ends ``cancelled`` with a valid history.

        Args:
            drop: Leave the whole turn out of the history, as if it was never sent
                (a server's ``rollback``); its run record still says what it did.

        Returns False when nothing was running.
        """
        if self._scope is None:
            return False
        self._drop = self._drop or drop
        self._scope.cancel()
        return True

    # -- the run ------------------------------------------------------------------------

    async def rewind_async(
        self,
        rewind: Rewind,
        *,
        invocation_state: InvocationState | None = None,
        on_event: EventHandler = lambda event: None,
        run_id: str | None = None,
        on_start: RunStart | None = None,
    ) -> AgentResult:
        """Run a turn that first cuts the history: an edit or a regenerate (`Rewind`)."""
        state = InvocationState() if invocation_state is None else invocation_state
        return await self._execute(rewind, None, state, on_event, run_id, on_start)

    async def _execute(
        self,
        prompt: str | Message | Rewind | None,
        resume: tuple[str, Decision] | None,
        invocation_state: InvocationState,
        emit: EventHandler,
        run_id: str | None,
        on_start: RunStart | None,
    ) -> AgentResult:
        async with self._lock:
            self._drop = False
            await self.restore()
            if resume is None:
                run = self._begin(prompt, run_id or new_run_id())
            else:
                run = self._apply_decision(*resume)
            context = RunContext(
                context_id=self.context_id,
                run_id=run.run_id,
                state=self.state,
                invocation_state=invocation_state,
                agent_name=self.name,
                step=run.step,
                shared_state=self.shared_state,
                principal=None
                if self.session_manager is None
                else self.session_manager.key.principal,
            )
            await self.hooks.invoke(
                BeforeRunEvent(
                    context=context,
                    prompt=prompt if isinstance(prompt, str) else None,
                    messages=self.messages,
                    resumed=resume is not None,
                )
            )
            if on_start is not None:
                on_start()
            emit(StatusEvent())
            cancelled_by_caller = False
            outcome = LoopOutcome(status="failed")
            try:
                if resume is not None and isinstance(resume[1], CancelRun):
                    outcome = LoopOutcome(status="completed")
                    cancelled_by_caller = True
                else:
                    with anyio.CancelScope() as scope:
                        self._scope = scope
                        tools = self.tools
                        if self.toolsets:
                            tools = await resolve_tools(self.tools, self.toolsets, context)
                        outcome = await self._loop(run, context, emit, tools).run(run)
                    cancelled_by_caller = scope.cancelled_caught
            except anyio.get_cancelled_exc_class():
                with anyio.CancelScope(shield=True):
                    await self._finish(run, "cancelled", LoopOutcome(status="failed"))
                raise
            finally:
                self._scope = None
            status: RunStatus = "cancelled" if cancelled_by_caller else outcome.status
            result = await self._finish(run, status, outcome)
            if result.error is not None and result.status == "failed":
                emit(ErrorEvent(code=result.error.code, message=result.error.message))
            await self.hooks.invoke(AfterRunEvent(context=context, result=result))
            return result

    def _loop(
        self, run: RunState, context: RunContext, emit: EventHandler, tools: Mapping[str, Tool]
    ) -> RunLoop:
        return RunLoop(
            model=self.model,
            tools=tools,
            approve=self.approve,
            system_prompt=self.system_prompt,
            history=self.messages if run.cut is None else self.messages[: run.cut],
            conversation_manager=self.conversation_manager,
            hooks=self.hooks,
            middleware=self.middleware,
            limits=self.limits,
            context=context,
            emit=emit,
            output=self.output,
            meter=meter_for(self.session_manager, self.budgets),
        )

    def _begin(self, prompt: str | Message | Rewind | None, run_id: str) -> RunState:
        if self._suspended is not None:
            first = self._suspended.pending[0].interrupt
            raise InterruptPendingError(
                f"the conversation waits for a decision on interrupt {first.id}",
                interrupt_id=first.id,
            )
        if isinstance(prompt, Rewind):
            return prompt.begin(self.messages, run_id)
        message = prompt_message(prompt)
        return RunState(
            run_id=run_id, input=message.text, started_at=time.time(), messages=[message]
        )

    def _apply_decision(self, interrupt_id: str, decision: Decision) -> RunState:
        """Validate a decision against the suspended run; nothing changes if it is refused."""
        run = self._suspended
        pending = () if run is None else run.pending
        match = next((p for p in pending if p.interrupt.id == interrupt_id), None)
        if run is None or match is None:
            raise InterruptNotFoundError(f"no pending interrupt has the id {interrupt_id!r}")
        check_decision(match.interrupt, decision)
        match.decision = decision
        return run

    async def _finish(self, run: RunState, status: RunStatus, outcome: LoopOutcome) -> AgentResult:
        """Commit the run to memory, save it, and build its result."""
        answered = any(message.role == "assistant" for message in run.messages)
        if status == "suspended":
            self._suspended = run
        else:
            self._suspended = None
            for pending in run.pending:
                pending.decision = None
            close_step(run, missing="cancelled before the tool finished")
        commit = status != "suspended" and answered and not (self._drop and status == "cancelled")
        new_messages = committed(run.messages, run.run_id) if commit else []
        rewrite = False
        if commit:
            self.messages[len(self.messages) if run.cut is None else run.cut :] = new_messages
            trimmed = self.conversation_manager.trim(self.messages)
            if trimmed is not None:
                self.messages[:] = trimmed
                rewrite = True
        result = AgentResult(
            run_id=run.run_id,
            status=status,
            text=outcome.text,
            tool_calls=run.ordered_records(),
            stop_reason=stop_reason(status, run.stop_reason),
            usage=run.usage,
            messages=tuple(new_messages),
            interrupts=tuple(p.interrupt for p in run.pending) if status == "suspended" else (),
            error=run_error(status, outcome.error),
            context_id=self.context_id,
            agent=self.name,
            output=outcome.output if status == "completed" else None,
        )
        if self.session_manager is not None:
            if status == "suspended":
                await self.session_manager.save_suspended(run=run, result=result)
            else:
                result = await self.session_manager.finish_turn(
                    result,
                    run=run,
                    new_messages=new_messages,
                    history=self.messages,
                    state=self.state.to_dict() if self.state.dirty else None,
                    rewrite=rewrite,
                )
                self.state.mark_saved()
        return result
