"""The run loop: model call, then the requested tool calls, until the model stops.

The loop knows no storage and no HTTP. It works on a RunState, reports what happens
through `emit` (typed run events), and ends in one of four ways: completed, suspended
(pending interrupts are in the state), failed, or with the caller's cancellation. The
Agent decides what to persist.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import anyio

from agentkeel.answers import AnswerChecker
from agentkeel.context import RunContext
from agentkeel.conversation import ConversationManager
from agentkeel.errors import AgentkeelError, MaxStepsExceededError, ModelError
from agentkeel.events import (
    InterruptEvent,
    RunEvent,
    StepEvent,
    ThinkingEvent,
    TokenEvent,
)
from agentkeel.hooks.events import (
    AfterModelCallEvent,
    AfterToolCallEvent,
    BeforeModelCallEvent,
    BeforeToolCallEvent,
    MessageAddedEvent,
)
from agentkeel.hooks.registry import HookRegistry
from agentkeel.ids import new_call_id, new_interrupt_id
from agentkeel.interrupts import (
    InputAnswer,
    Interrupt,
    InterruptRequested,
    Reject,
    approval_prompt,
    enter_interrupt_scope,
    exit_interrupt_scope,
)
from agentkeel.messages import (
    JSONObject,
    JSONValue,
    Message,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from agentkeel.middleware import AgentMiddleware, ModelResponse, ToolOutcome, compose_tool
from agentkeel.models.base import (
    FINAL_ANSWER_TOOL,
    Finish,
    Model,
    ModelRequest,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
)
from agentkeel.output import OutputType
from agentkeel.result import ErrorInfo, ToolCallRecord, Usage
from agentkeel.run_state import PendingCall, RunState
from agentkeel.tools.decorator import Tool, ToolInputError
from agentkeel.tools.exposure import call_event, result_event

__all__ = ["LoopOutcome", "RunLimits", "RunLoop", "RunMeter", "close_step"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunLimits:
    """Bounds on one run."""

    max_steps: int = 25
    """Model calls a run may make before it fails with ``max_steps_exceeded``."""
    tool_timeout: float | None = 60.0
    """Seconds one tool call may take unless the tool sets its own `timeout`."""
    output_retries: int = 1
    """Answers that fail the output type's validation are sent back this many times."""


class RunMeter(Protocol):
    """Counts a run's tokens and stops it before a model call a budget no longer allows."""

    async def check(self, run_usage: Usage) -> None:
        """Raise BudgetExceededError if another model call would go over a budget."""
        ...

    async def record(self, usage: Usage) -> None:
        """Count what one model call used."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class LoopOutcome:
    """How the loop ended."""

    status: Literal["completed", "suspended", "failed"]
    text: str = ""
    error: ErrorInfo | None = None
    output: Any = None
    """The validated structured answer (agents with an output type)."""


@dataclass(slots=True)
class _Assembly:
    """Fragments of one streamed model answer."""

    text: list[str] = field(default_factory=list)
    thinking: list[str] = field(default_factory=list)
    signature: str | None = None
    calls: dict[int, tuple[str | None, str | None, list[str]]] = field(default_factory=dict)
    finish: Finish | None = None


class RunLoop:
    """Runs one run of one agent. Built per run; holds the agent's collaborators."""

    def __init__(
        self,
        *,
        model: Model,
        tools: Mapping[str, Tool],
        approve: frozenset[str],
        system_prompt: str | None,
        history: Sequence[Message],
        conversation_manager: ConversationManager,
        hooks: HookRegistry,
        middleware: Sequence[AgentMiddleware],
        limits: RunLimits,
        context: RunContext,
        emit: Callable[[RunEvent], None],
        agent_label: str | None = None,
        output: OutputType | None = None,
        meter: RunMeter | None = None,
    ) -> None:
        self._model = model
        self._tools = tools
        self._approve = approve
        self._system_prompt = system_prompt
        self._history = history
        self._conversation = conversation_manager
        self._hooks = hooks
        self._middleware = middleware
        self._limits = limits
        self._context = context
        self._emit = emit
        self._label = agent_label
        self._specs = tuple(tool.spec for tool in tools.values())
        self._invalid_arguments: dict[str, str] = {}
        self._output = output
        self._checker = None if output is None else AnswerChecker(output, limits.output_retries)
        self._meter = meter
        self._raw_arguments: dict[str, str] = {}

    async def run(self, state: RunState) -> LoopOutcome:
        """Advance `state` until the run completes, suspends or fails."""
        try:
            if state.pending or state.step_calls:
                await self._resume_step(state)
                if state.pending:
                    return self._suspend(state)
                self._close_step(state)
                if self._context.end_after_tools:
                    return LoopOutcome(status="completed", text=_last_text(state))
            while True:
                outcome = await self._step(state)
                if outcome is not None:
                    return outcome
        except AgentkeelError as exc:
            return LoopOutcome(status="failed", error=ErrorInfo(code=exc.code, message=exc.message))
        except Exception:
            logger.exception("run=<%s> | the run failed unexpectedly", state.run_id)
            return LoopOutcome(
                status="failed",
                error=ErrorInfo(code="internal_error", message="the run failed unexpectedly"),
            )

    async def _step(self, state: RunState) -> LoopOutcome | None:
        """One cycle: a model call, then its tool calls; an outcome if the run ends."""
        if state.step >= self._limits.max_steps:
            raise MaxStepsExceededError(
                f"the run used all {self._limits.max_steps} steps without finishing"
            )
        if self._meter is not None:
            await self._meter.check(state.usage)
        state.step += 1
        self._context.step = state.step
        self._emit(StepEvent(step=state.step, agent=self._label))
        message = await self._call_model(state)
        await self._add_message(state, message)
        calls = list(message.tool_calls)
        if self._output is not None:
            answer = next((c for c in calls if c.name == FINAL_ANSWER_TOOL), None)
            if answer is not None or not calls:
                return await self._take_output(state, message, answer)
        if not calls:
            return LoopOutcome(status="completed", text=message.text)
        state.step_calls = calls
        state.step_outcomes = {}
        await self._run_calls(state, [(call, None) for call in calls])
        if state.pending:
            return self._suspend(state)
        self._close_step(state)
        if self._context.end_after_tools:
            return LoopOutcome(status="completed", text=_last_text(state))
        return None

    # -- model ------------------------------------------------------------------------

    async def _call_model(self, state: RunState) -> Message:
        visible = self._conversation.select(self._history, state.messages)
        request = ModelRequest(
            messages=visible,
            system_prompt=self._system_prompt,
            tools=self._specs,
            output=None if self._output is None else self._output.schema,
        )
        for layer in self._middleware:
            request = await layer.before_model(self._context, request)
        if self._hooks.has_callbacks(BeforeModelCallEvent):
            event = await self._hooks.invoke(
                BeforeModelCallEvent(context=self._context, request=request)
            )
            request = event.request
        assembly = await self._stream(request)
        message = self._assemble(assembly)
        finish = assembly.finish or Finish()
        state.usage = state.usage + finish.usage
        if self._meter is not None:
            await self._meter.record(finish.usage)
        response = ModelResponse(message=message, stop_reason=finish.stop_reason)
        for layer in reversed(self._middleware):
            response = await layer.after_model(self._context, response)
        streamed = "".join(assembly.text)
        final = response.message.text
        if final != streamed and final.startswith(streamed):
            self._emit(TokenEvent(text=final[len(streamed) :], agent=self._label))
        state.stop_reason = response.stop_reason
        if self._hooks.has_callbacks(AfterModelCallEvent):
            await self._hooks.invoke(
                AfterModelCallEvent(
                    context=self._context,
                    message=response.message,
                    stop_reason=response.stop_reason,
                    usage=finish.usage,
                )
            )
        return response.message

    async def _stream(self, request: ModelRequest) -> _Assembly:
        assembly = _Assembly()
        chunks = self._model.stream(request)
        try:
            async for chunk in chunks:
                if isinstance(chunk, TextDelta):
                    if chunk.text:
                        assembly.text.append(chunk.text)
                        self._emit(TokenEvent(text=chunk.text, agent=self._label))
                elif isinstance(chunk, ThinkingDelta):
                    if chunk.text:
                        assembly.thinking.append(chunk.text)
                        self._emit(ThinkingEvent(text=chunk.text, agent=self._label))
                    if chunk.signature:
                        assembly.signature = chunk.signature
                elif isinstance(chunk, ToolCallDelta):
                    call_id, name, fragments = assembly.calls.get(chunk.index, (None, None, []))
                    fragments.append(chunk.arguments)
                    name = name or chunk.name
                    assembly.calls[chunk.index] = (call_id or chunk.id, name, fragments)
                    if chunk.arguments and name == FINAL_ANSWER_TOOL and self._output is not None:
                        # the answer's JSON streams as tokens, as it would in text
                        self._emit(TokenEvent(text=chunk.arguments, agent=self._label))
                else:
                    assembly.finish = chunk
        except ModelError:
            raise
        except Exception as exc:
            logger.exception("model=<%s> | the model provider raised", self._model.name)
            raise ModelError(f"the model provider failed: {type(exc).__name__}") from exc
        finally:
            # a stream left early (cancellation) must release its HTTP connection now
            close = getattr(chunks, "aclose", None)
            if close is not None:
                with anyio.CancelScope(shield=True):
                    await close()
        return assembly

    def _assemble(self, assembly: _Assembly) -> Message:
        parts: list[Part] = []
        if assembly.thinking or assembly.signature:
            parts.append(
                ThinkingPart(text="".join(assembly.thinking), signature=assembly.signature)
            )
        if assembly.text:
            parts.append(TextPart(text="".join(assembly.text)))
        for index in sorted(assembly.calls):
            call_id, name, fragments = assembly.calls[index]
            call_id = call_id or new_call_id()
            raw = "".join(fragments).strip()
            if name == FINAL_ANSWER_TOOL:
                self._raw_arguments[call_id] = raw
            tool_input: JSONObject = {}
            try:
                parsed = json.loads(raw) if raw else {}
                if not isinstance(parsed, dict):
                    raise ValueError("the arguments must be a JSON object")
                tool_input = parsed
            except ValueError as exc:
                self._invalid_arguments[call_id] = f"the arguments were not valid JSON: {exc}"
            parts.append(ToolCallPart(id=call_id, name=name or "", input=tool_input))
        return Message(role="assistant", parts=tuple(parts))

    # -- structured output --------------------------------------------------------------

    async def _take_output(
        self, state: RunState, message: Message, answer: ToolCallPart | None
    ) -> LoopOutcome | None:
        """Judge the model's answer: an outcome, or None after sending the errors back."""
        if self._checker is None:
            raise RuntimeError("internal error: no output type to validate against")
        raw = message.text if answer is None else self._raw_arguments.get(answer.id, "")
        problem = None if answer is None else self._invalid_arguments.pop(answer.id, None)
        verdict = self._checker.check(message, answer, raw, problem)
        for added in verdict.messages:
            await self._add_message(state, added)
        if verdict.accepted:
            return LoopOutcome(status="completed", text=verdict.text, output=verdict.value)
        if verdict.error is not None:
            return LoopOutcome(status="failed", text=verdict.text, error=verdict.error)
        return None

    # -- tools ------------------------------------------------------------------------

    async def _run_calls(
        self, state: RunState, calls: Sequence[tuple[ToolCallPart, PendingCall | None]]
    ) -> None:
        """Run `calls` concurrently; gated or interrupted ones become pending."""
        if len(calls) == 1:
            await self._run_one(state, *calls[0])
            return
        async with anyio.create_task_group() as group:
            for call, pending in calls:
                group.start_soon(self._run_one, state, call, pending)

    def _needs_approval(self, call: ToolCallPart) -> bool:
        tool = self._tools.get(call.name)
        return call.name in self._approve or (tool is not None and tool.requires_approval)

    async def _run_one(
        self, state: RunState, call: ToolCallPart, pending: PendingCall | None
    ) -> None:
        approved = pending is not None and pending.interrupt.kind == "approval"
        if not approved and self._needs_approval(call) and call.id not in self._invalid_arguments:
            state.pending.append(
                PendingCall(
                    call=call,
                    interrupt=Interrupt(
                        id=new_interrupt_id(),
                        kind="approval",
                        call_id=call.id,
                        tool=call.name,
                        tool_input=call.input,
                        prompt=approval_prompt(call.name, call.input, self._tools.get(call.name)),
                    ),
                )
            )
            return
        answers = list(pending.answers) if pending is not None else []
        if pending is None or not pending.started:
            self._emit(call_event(call, self._tools.get(call.name), self._label))
        started = time.perf_counter()
        try:
            outcome = await self._execute(call, answers)
        except InterruptRequested as signal:
            state.pending.append(
                PendingCall(
                    call=call,
                    interrupt=Interrupt(
                        id=new_interrupt_id(),
                        kind="input",
                        call_id=call.id,
                        tool=call.name,
                        tool_input=call.input,
                        prompt=signal.prompt,
                    ),
                    answers=answers,
                    started=True,
                )
            )
            return
        self._finish_call(
            state, call, outcome, "success" if outcome.status == "success" else "error", started
        )

    def _finish_call(
        self,
        state: RunState,
        call: ToolCallPart,
        outcome: ToolOutcome,
        status: Literal["success", "error", "rejected", "cancelled"],
        started: float | None,
    ) -> None:
        state.step_outcomes[call.id] = outcome
        duration = 0.0 if started is None else (time.perf_counter() - started) * 1000
        state.records[call.id] = ToolCallRecord(
            id=call.id,
            name=call.name,
            input=call.input,
            output=outcome.content,
            status=status,
            duration_ms=round(duration, 3),
        )
        if status in ("success", "error"):
            self._emit(result_event(call, self._tools.get(call.name), outcome, self._label))

    async def _execute(self, call: ToolCallPart, answers: list[JSONValue]) -> ToolOutcome:
        """Hooks around the middleware chain around the tool; errors become outcomes."""
        if call.id in self._invalid_arguments:
            return ToolOutcome(content=self._invalid_arguments[call.id], status="error")
        tool_input = call.input
        if self._hooks.has_callbacks(BeforeToolCallEvent):
            before = await self._hooks.invoke(
                BeforeToolCallEvent(
                    context=self._context,
                    call_id=call.id,
                    tool_name=call.name,
                    tool_input=tool_input,
                )
            )
            if before.cancel is not None:
                return ToolOutcome(content=before.cancel, status="error")
            tool_input = before.tool_input
            call = ToolCallPart(id=call.id, name=call.name, input=tool_input)

        async def innermost(actual: ToolCallPart) -> ToolOutcome:
            return await self._invoke_tool(actual, answers)

        outcome = await compose_tool(self._middleware, self._context, innermost)(call)
        if self._hooks.has_callbacks(AfterToolCallEvent):
            after = await self._hooks.invoke(
                AfterToolCallEvent(
                    context=self._context,
                    call_id=call.id,
                    tool_name=call.name,
                    tool_input=call.input,
                    output=outcome.content,
                    status=outcome.status,
                )
            )
            outcome = ToolOutcome(content=after.output, status=outcome.status)
        return outcome

    async def _invoke_tool(self, call: ToolCallPart, answers: list[JSONValue]) -> ToolOutcome:
        tool = self._tools.get(call.name)
        if tool is None:
            known = ", ".join(sorted(self._tools)) or "none"
            return ToolOutcome(
                content=f"unknown tool {call.name!r}; available tools: {known}", status="error"
            )
        timeout = tool.timeout if tool.timeout is not None else self._limits.tool_timeout
        token = enter_interrupt_scope(list(answers))
        try:
            with anyio.fail_after(timeout):
                content = await tool.invoke(call.input, self._context)
            return ToolOutcome(content=content)
        except InterruptRequested:
            raise
        except ToolInputError as exc:
            return ToolOutcome(content=str(exc), status="error")
        except TimeoutError:
            return ToolOutcome(
                content=f"tool {call.name!r} timed out after {timeout} seconds", status="error"
            )
        except Exception as exc:
            logger.warning(
                "tool=<%s>, call=<%s> | tool raised %s",
                call.name,
                call.id,
                type(exc).__name__,
                exc_info=True,
            )
            return ToolOutcome(content=f"{type(exc).__name__}: {exc}", status="error")
        finally:
            exit_interrupt_scope(token)

    async def _resume_step(self, state: RunState) -> None:
        """Apply the decisions given to pending calls; undecided ones stay pending."""
        decided = [p for p in state.pending if p.decision is not None]
        state.pending = [p for p in state.pending if p.decision is None]
        to_run: list[tuple[ToolCallPart, PendingCall | None]] = []
        for pending in decided:
            decision = pending.decision
            if isinstance(decision, Reject):
                self._finish_call(
                    state,
                    pending.call,
                    ToolOutcome(content=f"rejected: {decision.reason}", status="error"),
                    "rejected",
                    None,
                )
            elif isinstance(decision, InputAnswer):
                pending.answers.append(decision.value)
                to_run.append((pending.call, pending))
            else:
                to_run.append((pending.call, pending))
        if to_run:
            await self._run_calls(state, to_run)

    def _suspend(self, state: RunState) -> LoopOutcome:
        for pending in state.pending:
            interrupt = pending.interrupt
            self._emit(
                InterruptEvent(
                    id=interrupt.id,
                    kind=interrupt.kind,
                    tool=interrupt.tool,
                    prompt=interrupt.prompt,
                    agent=self._label,
                )
            )
        return LoopOutcome(status="suspended")

    def _close_step(self, state: RunState) -> None:
        close_step(state, missing="the tool call did not complete")

    async def _add_message(self, state: RunState, message: Message) -> None:
        state.messages.append(message)
        if self._hooks.has_callbacks(MessageAddedEvent):
            await self._hooks.invoke(MessageAddedEvent(context=self._context, message=message))


def close_step(state: RunState, *, missing: str) -> None:
    """Append the step's tool results in the model's call order, then clear the step.

    A call with no outcome (the run was cancelled, or a suspended run was abandoned) gets
    an error result saying `missing`, so no tool call is ever left without a result.
    """
    parts: list[Part] = []
    for call in state.step_calls:
        outcome = state.step_outcomes.get(call.id)
        if outcome is None:
            outcome = ToolOutcome(content=missing, status="error")
            state.records[call.id] = ToolCallRecord(
                id=call.id, name=call.name, input=call.input, output=missing, status="cancelled"
            )
        parts.append(
            ToolResultPart(
                call_id=call.id, name=call.name, content=outcome.content, status=outcome.status
            )
        )
    state.step_calls = []
    state.step_outcomes = {}
    state.pending = []
    if parts:
        state.messages.append(Message(role="user", parts=tuple(parts)))


def _last_text(state: RunState) -> str:
    """The text of the run's last assistant message that has any."""
    for message in reversed(state.messages):
        if message.role == "assistant" and message.text:
            return message.text
    return ""
