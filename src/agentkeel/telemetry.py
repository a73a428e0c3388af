"""Telemetry as hook providers: OpenTelemetry spans, and one log line per run.

Both subscribe to the hook events of a run (`agentkeel.hooks.events`), so they work the
same on an Agent used in plain Python and on the Agents the server builds per context
(`instrument` attaches them). Neither records a prompt, a completion or a tool's input
or output: spans and log lines carry names, ids, statuses, counts and durations only.

`TracingHooks` needs ``opentelemetry-api``, imported on first use; without it
`instrument` attaches no spans and costs nothing. The spans follow the OpenTelemetry
GenAI conventions where they apply::

    invoke_agent <agent>        one per run segment (a resumed run starts a new one)
    ├── chat                    one per model call
    └── execute_tool <tool>     one per tool call (parallel calls overlap)

Model and tool spans are children of their run span by explicit parent, not through
the ambient context, because a run's hooks fire across tasks. Spans that a run leaves
open (a model call that raised, a tool waiting for a human) end with the run.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agentkeel.context import RunContext
from agentkeel.hooks.events import (
    AfterModelCallEvent,
    AfterRunEvent,
    AfterToolCallEvent,
    BeforeModelCallEvent,
    BeforeRunEvent,
    BeforeToolCallEvent,
)
from agentkeel.hooks.registry import HookRegistry
from agentkeel.servable import Served

if TYPE_CHECKING:
    from opentelemetry.trace import Span, TracerProvider
    from opentelemetry.util.types import AttributeValue

__all__ = ["RunLogHooks", "TracingHooks", "instrument", "tracing_available"]

_MAX_OPEN_RUNS = 10_000
"""Runs tracked at once; beyond that the oldest (a run that never ended) is dropped."""
_RunKey = tuple[str, str]


def _key(context: RunContext) -> _RunKey:
    return (context.agent_name, context.run_id)


def tracing_available() -> bool:
    """Whether ``opentelemetry-api`` can be imported (then `TracingHooks` works)."""
    try:
        import opentelemetry.trace  # noqa: F401
    except ImportError:
        return False
    return True


@dataclass(slots=True)
class _RunSpans:
    run: Span
    model: Span | None = None
    tools: dict[str, Span] = field(default_factory=dict)


class TracingHooks:
    """OpenTelemetry spans for runs, model calls and tool calls.

    One instance may serve many agents and concurrent runs: spans are kept per
    (agent name, run id).

    Args:
        tracer_provider: Where spans go; default the global provider (a no-op until the
            application configures one).

    Raises:
        ImportError: ``opentelemetry-api`` is not installed (the message says how).
    """

    def __init__(self, *, tracer_provider: TracerProvider | None = None) -> None:
        try:
            from opentelemetry import trace
        except ImportError as exc:
            raise ImportError(
                "TracingHooks needs OpenTelemetry: pip install opentelemetry-api "
                "(and opentelemetry-sdk with an exporter to see the spans)"
            ) from exc
        self._tracer = trace.get_tracer("agentkeel", tracer_provider=tracer_provider)
        self._runs: dict[_RunKey, _RunSpans] = {}

    def register_hooks(self, registry: HookRegistry) -> None:
        """Subscribe to the start and end of runs, model calls and tool calls."""
        registry.add_callback(BeforeRunEvent, self._before_run)
        registry.add_callback(AfterRunEvent, self._after_run)
        registry.add_callback(BeforeModelCallEvent, self._before_model)
        registry.add_callback(AfterModelCallEvent, self._after_model)
        registry.add_callback(BeforeToolCallEvent, self._before_tool)
        registry.add_callback(AfterToolCallEvent, self._after_tool)

    def _before_run(self, event: BeforeRunEvent) -> None:
        context = event.context
        key = _key(context)
        stale = self._runs.pop(key, None)
        if stale is not None:  # its previous segment was cancelled before it could end
            _close(stale, "the run segment was abandoned")
        while len(self._runs) >= _MAX_OPEN_RUNS:
            _close(self._runs.pop(next(iter(self._runs))), "the run never ended")
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": context.agent_name,
            "agentkeel.run.id": context.run_id,
            "agentkeel.run.resumed": event.resumed,
        }
        if context.context_id is not None:
            attributes["gen_ai.conversation.id"] = context.context_id
        span = self._tracer.start_span(f"invoke_agent {context.agent_name}", attributes=attributes)
        self._runs[key] = _RunSpans(run=span)

    def _after_run(self, event: AfterRunEvent) -> None:
        spans = self._runs.pop(_key(event.context), None)
        if spans is None:
            return
        result = event.result
        span = spans.run
        span.set_attribute("agentkeel.run.status", result.status)
        span.set_attribute("agentkeel.run.steps", event.context.step)
        span.set_attribute("agentkeel.run.tool_calls", len(result.tool_names))
        span.set_attribute("gen_ai.usage.input_tokens", result.usage.input_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", result.usage.output_tokens)
        error = None
        if result.status == "failed":
            error = result.error.code if result.error is not None else "failed"
            span.set_attribute("error.type", error)
        leftover = "the run suspended" if result.status == "suspended" else "the run ended first"
        _close(spans, leftover, error=error)

    def _before_model(self, event: BeforeModelCallEvent) -> None:
        spans = self._runs.get(_key(event.context))
        if spans is None:
            return
        if spans.model is not None:
            _end(spans.model, "the model call did not finish")
        spans.model = self._child(
            spans,
            "chat",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.agent.name": event.context.agent_name,
                "agentkeel.step": event.context.step,
            },
        )

    def _after_model(self, event: AfterModelCallEvent) -> None:
        spans = self._runs.get(_key(event.context))
        if spans is None or spans.model is None:
            return
        span, spans.model = spans.model, None
        span.set_attribute("gen_ai.response.finish_reasons", [event.stop_reason])
        span.set_attribute("agentkeel.tool_calls_requested", len(event.message.tool_calls))
        _end(span)

    def _before_tool(self, event: BeforeToolCallEvent) -> None:
        spans = self._runs.get(_key(event.context))
        if spans is None:
            return
        spans.tools[event.call_id] = self._child(
            spans,
            f"execute_tool {event.tool_name}",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": event.tool_name,
                "gen_ai.tool.call.id": event.call_id,
            },
        )

    def _after_tool(self, event: AfterToolCallEvent) -> None:
        spans = self._runs.get(_key(event.context))
        span = None if spans is None else spans.tools.pop(event.call_id, None)
        if span is None:
            return
        span.set_attribute("agentkeel.tool.status", event.status)
        _end(span, "the tool failed" if event.status == "error" else None)

    def _child(self, spans: _RunSpans, name: str, attributes: dict[str, AttributeValue]) -> Span:
        from opentelemetry.trace import set_span_in_context

        parent = set_span_in_context(spans.run)
        return self._tracer.start_span(name, context=parent, attributes=attributes)


def _end(span: Span, error: str | None = None) -> None:
    if error is not None:
        from opentelemetry.trace import Status, StatusCode

        span.set_status(Status(StatusCode.ERROR, error))
    span.end()


def _close(spans: _RunSpans, leftover: str, *, error: str | None = None) -> None:
    """End a run's span after any child it left open (those with `leftover` as the reason)."""
    if spans.model is not None:
        _end(spans.model, leftover)
    for span in spans.tools.values():
        span.set_attribute("agentkeel.tool.status", "unfinished")
        _end(span, None if leftover == "the run suspended" else leftover)
    _end(spans.run, error)


class RunLogHooks:
    """One log line per run segment: which run, how it ended, how long it took.

    Shape (INFO; WARNING for a failed run)::

        agent=<a>, context=<ctx-…>, run=<run-…>, status=<completed>, resumed=<False>,
        steps=<2>, tool_calls=<1>, duration_ms=<12.5>, error=<None> | run ended

    The duration runs from the start of the run to its end, saving included. The line
    holds no prompt, completion, tool input or output, and no credential.

    Args:
        logger: Where the lines go (the server passes ``agentkeel.server``).
    """

    def __init__(self, logger: logging.Logger | None = None) -> None:
        self.logger = logger or logging.getLogger(__name__)
        self._started: dict[_RunKey, tuple[float, bool]] = {}

    def register_hooks(self, registry: HookRegistry) -> None:
        """Subscribe to the start and end of runs."""
        registry.add_callback(BeforeRunEvent, self._before_run)
        registry.add_callback(AfterRunEvent, self._after_run)

    def _before_run(self, event: BeforeRunEvent) -> None:
        while len(self._started) >= _MAX_OPEN_RUNS:
            del self._started[next(iter(self._started))]
        self._started[_key(event.context)] = (time.monotonic(), event.resumed)

    def _after_run(self, event: AfterRunEvent) -> None:
        started, resumed = self._started.pop(_key(event.context), (None, False))
        result = event.result
        level = logging.WARNING if result.status == "failed" else logging.INFO
        if not self.logger.isEnabledFor(level):
            return
        duration = None if started is None else (time.monotonic() - started) * 1000
        self.logger.log(
            level,
            "agent=<%s>, context=<%s>, run=<%s>, status=<%s>, resumed=<%s>, steps=<%d>, "
            "tool_calls=<%d>, duration_ms=<%.1f>, error=<%s> | run ended",
            event.context.agent_name,
            event.context.context_id,
            result.run_id,
            result.status,
            resumed,
            event.context.step,
            len(result.tool_names),
            -1.0 if duration is None else duration,
            None if result.error is None else result.error.code,
        )


def instrument(served: Served, *, logger: logging.Logger | None = None) -> None:
    """Attach the run log (when `logger` is given) and, when installed, OpenTelemetry spans.

    For a Swarm the hooks go on every member, so each member's run gets its line and
    its span.

    Args:
        served: The Agent, or the Swarm whose members to instrument.
        logger: Where `RunLogHooks` writes; None attaches no run log.
    """
    agents = served.agents
    tracing = TracingHooks() if tracing_available() else None
    for agent in agents:
        if logger is not None:
            agent.hooks.add_provider(RunLogHooks(logger))
        if tracing is not None:
            agent.hooks.add_provider(tracing)
