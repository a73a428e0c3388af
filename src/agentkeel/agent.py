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

import functools
import logging
import time
from collections.abc import (
    AsyncGenerator,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import replace
from types import TracebackType
from typing import cast

import anyio

from agentkeel._portal import Portal, RunStream, in_event_loop, stream_run
from agentkeel.context import RunContext
from agentkeel.conversation import ConversationManager, KeepAllConversationManager
from agentkeel.errors import (
    ConfigurationError,
    InterruptNotFoundError,
    InterruptPendingError,
    InvalidRequestError,
    RestoreRequiredError,
)
from agentkeel.events import ErrorEvent, RunEvent, StatusEvent
from agentkeel.hooks.events import AfterRunEvent, BeforeRunEvent
from agentkeel.hooks.registry import HookProvider, HookRegistry
from agentkeel.ids import new_run_id
from agentkeel.interrupts import Approve, CancelRun, Decision, InputAnswer, Interrupt, Reject
from agentkeel.loop import LoopOutcome, RunLimits, RunLoop, close_step
from agentkeel.messages import JSONValue, Message
from agentkeel.middleware import AgentMiddleware
from agentkeel.models.base import FINAL_ANSWER_TOOL, Model
from agentkeel.output import OutputType
from agentkeel.result import AgentResult, ErrorInfo, RunStatus
from agentkeel.rewind import Rewind
from agentkeel.run_state import RunState
from agentkeel.session import SessionManager
from agentkeel.state import AgentState, InvocationState, SharedState
from agentkeel.storage.usage import UsageStorage
from agentkeel.tools.decorator import Tool
from agentkeel.tools.toolset import Toolset, resolve_tools
from agentkeel.usage import TokenBudgets, UsageMeter

__all__ = ["Agent", "StreamItem"]

logger = logging.getLogger(__name__)

StreamItem = RunEvent | AgentResult
"""What `Agent.stream` yields: run events, then the AgentResult last."""
EventHandler = Callable[[RunEvent], None]


class Agent:
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
        self._lock = anyio.Lock()
        self._scope: anyio.CancelScope | None = None
        self._portal = Portal(
            "agentkeel-agent",
            refuse_in_loop="a synchronous Agent call cannot run inside an event loop; "
            "use await agent.invoke_async(...) or agent.resume_async(...)",
        )
        self._portal.bind(self)

    # -- public API ---------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        """Whether a run is in progress (the server's ``reject`` policy reads this)."""
        return self._lock.locked()

    @property
    def context_id(self) -> str | None:
        """The context id of the attached session, if any."""
        return None if self.session_manager is None else self.session_manager.context_id

    @property
    def pending_interrupts(self) -> tuple[Interrupt, ...]:
        """Interrupts waiting for a decision, also those of a run suspended before a restart.

        With a session attached, they are known only once the session is loaded. Outside
        an event loop this property loads it (through the Agent's own loop, as
        ``agent(prompt)`` would). Inside one it cannot wait, so until ``await
        agent.restore()`` (or a first run) has loaded the session it raises
        `RestoreRequiredError` rather than answer an empty tuple that may be wrong.

        Raises:
            RestoreRequiredError: In async code, before the session was restored.
        """
        if self.session_manager is not None and not self._restored:
            if in_event_loop():
                raise RestoreRequiredError(
                    "the agent's session is not loaded yet, so its pending interrupts are "
                    "unknown: call `await agent.restore()` first"
                )
            self._portal.call(self.restore)
        if self._suspended is None:
            return ()
        return tuple(p.interrupt for p in self._suspended.pending)

    async def restore(self) -> None:
        """Load memory and any suspended run from the session.

        Every run calls it first. After the first load it costs one version read, and
        loads again only when storage moved on (another process ran a turn on this
        context): a cached Agent never runs on stale memory (SPEC guarantee 9).
        """
        manager = self.session_manager
        if self._restored and (manager is None or not await manager.moved_on()):
            return
        if self.session_manager is not None:
            restored = await self.session_manager.restore()
            self.messages = restored.messages
            self.state.replace(restored.state)
            self._suspended = restored.suspended
        self._restored = True

    def __call__(self, prompt: str | Message) -> AgentResult:
        """Run one turn synchronously (outside an event loop), on the Agent's own loop."""
        return self._portal.call(self.invoke_async, prompt)

    async def invoke_async(
        self,
        prompt: str | Message | Rewind,
        *,
        invocation_state: InvocationState | None = None,
        on_event: EventHandler | None = None,
    ) -> AgentResult:
        """Run one turn (a `Rewind` edits or regenerates); `on_event` gets every event."""
        return await self._execute(
            prompt,
            None,
            InvocationState() if invocation_state is None else invocation_state,
            on_event or _ignore,
        )

    def stream(
        self, prompt: str | Message, *, invocation_state: InvocationState | None = None
    ) -> RunStream[StreamItem]:
        """Run one turn, yielding its events and then the AgentResult (``async for``)."""
        items = self._stream(prompt, None, invocation_state)
        return RunStream(items, owner="Agent", method="stream")

    def stream_sync(
        self, prompt: str | Message, *, invocation_state: InvocationState | None = None
    ) -> Iterator[StreamItem]:
        """The blocking form of `stream`, for plain ``for`` outside an event loop."""
        return self._portal.iterate(self._stream(prompt, None, invocation_state))

    def resume(self, interrupt_id: str, decision: Decision) -> AgentResult:
        """Answer a pending interrupt synchronously and continue the suspended run."""
        return self._portal.call(self.resume_async, interrupt_id, decision)

    async def resume_async(
        self,
        interrupt_id: str,
        decision: Decision,
        *,
        invocation_state: InvocationState | None = None,
        on_event: EventHandler | None = None,
    ) -> AgentResult:
        """Answer a pending interrupt and continue the same run (same run id)."""
        return await self._execute(
            None,
            (interrupt_id, decision),
            InvocationState() if invocation_state is None else invocation_state,
            on_event or _ignore,
        )

    def resume_stream(
        self,
        interrupt_id: str,
        decision: Decision,
        *,
        invocation_state: InvocationState | None = None,
    ) -> RunStream[StreamItem]:
        """Streaming form of `resume_async` (``async for``)."""
        items = self._stream(None, (interrupt_id, decision), invocation_state)
        return RunStream(items, owner="Agent", method="resume_stream")

    def resume_stream_sync(
        self,
        interrupt_id: str,
        decision: Decision,
        *,
        invocation_state: InvocationState | None = None,
    ) -> Iterator[StreamItem]:
        """The blocking form of `resume_stream`."""
        return self._portal.iterate(self._stream(None, (interrupt_id, decision), invocation_state))

    def close(self) -> None:
        """Stop the event loop thread of the blocking methods; the async ones still work.

        Idempotent. Without it the loop stops when the Agent is garbage-collected or
        the interpreter exits.
        """
        self._portal.close()

    def __enter__(self) -> Agent:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def cancel(self) -> bool:
        """Cancel the run in progress; it ends ``cancelled`` with a valid history.

        Returns False when nothing was running.
        """
        if self._scope is None:
            return False
        self._scope.cancel()
        return True

    # -- the run ------------------------------------------------------------------------

    def _stream(
        self,
        prompt: str | Message | Rewind | None,
        resume: tuple[str, Decision] | None,
        invocation_state: InvocationState | None,
    ) -> AsyncGenerator[StreamItem, None]:
        state = InvocationState() if invocation_state is None else invocation_state

        async def run(emit: Callable[[StreamItem], None]) -> StreamItem:
            return await self._execute(prompt, resume, state, emit)

        return stream_run(run)

    async def _execute(
        self,
        prompt: str | Message | Rewind | None,
        resume: tuple[str, Decision] | None,
        invocation_state: InvocationState,
        emit: EventHandler,
    ) -> AgentResult:
        async with self._lock:
            await self.restore()
            run = self._begin(prompt) if resume is None else self._apply_decision(*resume)
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
            emit(StatusEvent())
            await self.hooks.invoke(
                BeforeRunEvent(
                    context=context,
                    prompt=prompt if isinstance(prompt, str) else None,
                    messages=self.messages,
                    resumed=resume is not None,
                )
            )
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
            meter=self._meter(),
        )

    def _meter(self) -> UsageMeter | None:
        manager = self.session_manager
        if manager is not None and _keeps_usage(type(manager.storage)):
            storage = cast(UsageStorage, manager.storage)
            return UsageMeter(self.budgets, storage, manager.key)
        return UsageMeter(self.budgets) if self.budgets.any else None

    def _begin(self, prompt: str | Message | Rewind | None) -> RunState:
        if self._suspended is not None:
            first = self._suspended.pending[0].interrupt
            raise InterruptPendingError(
                f"the conversation waits for a decision on interrupt {first.id}",
                interrupt_id=first.id,
            )
        if isinstance(prompt, Rewind):
            return prompt.begin(self.messages)
        if isinstance(prompt, str):
            message = Message.user(prompt)
        elif isinstance(prompt, Message) and prompt.role == "user":
            message = prompt
        else:
            raise InvalidRequestError("a prompt must be a string or a user Message")
        return RunState(
            run_id=new_run_id(), input=message.text, started_at=time.time(), messages=[message]
        )

    def _apply_decision(self, interrupt_id: str, decision: Decision) -> RunState:
        """Validate a decision against the suspended run; nothing changes if it is refused."""
        run = self._suspended
        match = (
            None
            if run is None
            else next((p for p in run.pending if p.interrupt.id == interrupt_id), None)
        )
        if run is None or match is None:
            raise InterruptNotFoundError(f"no pending interrupt has the id {interrupt_id!r}")
        kind = match.interrupt.kind
        if not isinstance(decision, CancelRun) and (
            (kind == "approval" and not isinstance(decision, Approve | Reject))
            or (kind == "input" and not isinstance(decision, InputAnswer))
        ):
            raise InvalidRequestError(
                f"interrupt {interrupt_id} is an {kind} interrupt; "
                f"{type(decision).__name__} does not answer it"
            )
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
        commit = status != "suspended" and answered
        new_messages = [replace(m, run_id=run.run_id) for m in run.messages] if commit else []
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
            stop_reason=_stop_reason(status, run.stop_reason),
            usage=run.usage,
            messages=tuple(new_messages),
            interrupts=tuple(p.interrupt for p in run.pending) if status == "suspended" else (),
            error=outcome.error
            if status == "failed"
            else (
                ErrorInfo(code="cancelled", message="the run was cancelled")
                if status == "cancelled"
                else None
            ),
            context_id=self.context_id,
            agent=self.name,
            output=outcome.output if status == "completed" else None,
        )
        if self.session_manager is not None:
            record = run.record(result)
            if status == "suspended":
                await self.session_manager.save_suspended(record=record, run=run)
            else:
                result = await self.session_manager.finish_turn(
                    result,
                    record=record,
                    new_messages=new_messages,
                    history=self.messages,
                    state=self.state.to_dict() if self.state.dirty else None,
                    rewrite=rewrite,
                    cut=None if rewrite else run.cut,
                )
                self.state.mark_saved()
        return result


def _stop_reason(status: RunStatus, model_reason: str) -> str:
    if status == "suspended":
        return "interrupt"
    if status == "cancelled":
        return "cancelled"
    if status == "failed":
        return "error"
    return model_reason


@functools.cache
def _keeps_usage(storage_type: type) -> bool:
    """Whether a storage class keeps usage (cached: a Protocol check costs microseconds)."""
    return issubclass(storage_type, UsageStorage)


def _ignore(event: RunEvent) -> None:
    del event
