"""Telemetry: OpenTelemetry spans and the run log line, in plain Python and in the server."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator

import httpx
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from opentelemetry.util._once import Once

from agentkeel import (
    Agent,
    Approve,
    ScriptedModel,
    ScriptedToolCall,
    ScriptedTurn,
    SessionManager,
    tool,
)
from agentkeel.errors import ModelUnavailableError
from agentkeel.hooks.events import (
    AfterModelCallEvent,
    AfterRunEvent,
    AfterToolCallEvent,
    BeforeModelCallEvent,
    BeforeRunEvent,
    BeforeToolCallEvent,
)
from agentkeel.server import A2AServer
from agentkeel.storage.memory import InMemoryStorage
from agentkeel.telemetry import RunLogHooks, TracingHooks, instrument, tracing_available
from agentkeel.tools.decorator import Tool
from e2e import SECRET_INPUT, SECRET_OUTPUT, scripted_agent, serve_in_thread

PROMPT = "PROMPT-TEXT-7731"
_HOOK_EVENTS = (
    BeforeRunEvent,
    AfterRunEvent,
    BeforeModelCallEvent,
    AfterModelCallEvent,
    BeforeToolCallEvent,
    AfterToolCallEvent,
)


@tool
def lookup(query: str) -> str:
    """Look something up; neither input nor output may reach a span or a log line.

    Args:
        query: What to look up.
    """
    return SECRET_OUTPUT


@tool
def broken(query: str) -> str:
    """Always fails.

    Args:
        query: Ignored.
    """
    raise RuntimeError("the tool broke")


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file (needs approval).

    Args:
        path: The file.
    """
    return f"deleted {path}"


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider
    provider.shutdown()


def traced_agent(
    provider: TracerProvider, turns: list[ScriptedTurn | str], tools: list[Tool] | None = None
) -> Agent:
    agent = Agent(ScriptedModel(turns), name="helper", tools=tools or [])
    agent.hooks.add_provider(TracingHooks(tracer_provider=provider))
    return agent


def by_name(spans: tuple[ReadableSpan, ...]) -> dict[str, list[ReadableSpan]]:
    found: dict[str, list[ReadableSpan]] = {}
    for span in spans:
        found.setdefault(span.name, []).append(span)
    return found


def parent_id(span: ReadableSpan) -> int | None:
    return None if span.parent is None else span.parent.span_id


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return int(span.context.span_id)


def everything_recorded(spans: tuple[ReadableSpan, ...]) -> str:
    return json.dumps(
        [
            {"name": s.name, "attributes": dict(s.attributes or {}), "status": str(s.status)}
            for s in spans
        ],
        default=str,
    )


@pytest.mark.anyio
async def test_a_run_with_a_tool_call_makes_a_tree_of_spans(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    agent = traced_agent(
        provider,
        [
            ScriptedTurn(tool_calls=[ScriptedToolCall("lookup", {"query": SECRET_INPUT})]),
            "Found it.",
        ],
        [lookup],
    )
    agent.session_manager = SessionManager("helper:ctx-telemetry", InMemoryStorage())
    result = await agent.invoke_async(PROMPT)
    assert result.status == "completed"
    spans = exporter.get_finished_spans()
    named = by_name(spans)
    assert sorted(named) == ["chat", "execute_tool lookup", "invoke_agent helper"]
    (run,) = named["invoke_agent helper"]
    chats = named["chat"]
    (tool_span,) = named["execute_tool lookup"]
    assert len(chats) == 2
    assert all(parent_id(span) == span_id(run) for span in [*chats, tool_span])
    assert run.parent is None
    assert run.attributes is not None
    assert run.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert run.attributes["gen_ai.conversation.id"] == "ctx-telemetry"
    assert run.attributes["agentkeel.run.id"] == result.run_id
    assert run.attributes["agentkeel.run.status"] == "completed"
    assert run.attributes["agentkeel.run.steps"] == 2
    assert run.attributes["agentkeel.run.tool_calls"] == 1
    assert run.attributes["gen_ai.usage.input_tokens"] == 20
    assert run.attributes["gen_ai.usage.output_tokens"] == 10
    assert run.status.status_code == StatusCode.UNSET
    assert tool_span.attributes is not None
    assert tool_span.attributes["gen_ai.tool.name"] == "lookup"
    assert tool_span.attributes["agentkeel.tool.status"] == "success"
    assert [c.attributes and c.attributes["agentkeel.step"] for c in chats] == [1, 2]
    assert [c.attributes and c.attributes["gen_ai.response.finish_reasons"] for c in chats] == [
        ("tool_use",),
        ("end_turn",),
    ]
    assert run.start_time is not None and run.end_time is not None
    assert all(
        s.start_time is not None and s.start_time >= run.start_time for s in [*chats, tool_span]
    )
    recorded = everything_recorded(spans)
    for secret in (SECRET_INPUT, SECRET_OUTPUT, PROMPT, "Found it."):
        assert secret not in recorded


@pytest.mark.anyio
async def test_a_failing_tool_and_a_failing_model_mark_their_spans(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    agent = traced_agent(
        provider,
        [
            ScriptedTurn(tool_calls=[ScriptedToolCall("broken", {"query": "x"})]),
            ScriptedTurn(error=ModelUnavailableError("upstream closed the stream")),
        ],
        [broken],
    )
    result = await agent.invoke_async("go")
    assert result.status == "failed"
    named = by_name(exporter.get_finished_spans())
    (tool_span,) = named["execute_tool broken"]
    assert tool_span.status.status_code == StatusCode.ERROR
    first, second = named["chat"]
    assert first.status.status_code == StatusCode.UNSET
    assert second.status.status_code == StatusCode.ERROR  # raised: ended with its run
    (run,) = named["invoke_agent helper"]
    assert run.status.status_code == StatusCode.ERROR
    assert run.status.description == "model_unavailable"
    assert run.attributes is not None and run.attributes["error.type"] == "model_unavailable"
    assert second.end_time is not None and run.end_time is not None
    assert second.end_time <= run.end_time


@pytest.mark.anyio
async def test_a_suspended_run_ends_its_span_and_the_resume_starts_another(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    agent = traced_agent(
        provider,
        [ScriptedTurn(tool_calls=[ScriptedToolCall("delete_file", {"path": "a.txt"})]), "Gone."],
        [delete_file],
    )
    first = await agent.invoke_async("delete a.txt")
    assert first.status == "suspended" and first.interrupt is not None
    runs = by_name(exporter.get_finished_spans())["invoke_agent helper"]
    assert [r.attributes and r.attributes["agentkeel.run.status"] for r in runs] == ["suspended"]
    done = await agent.resume_async(first.interrupt.id, Approve())
    assert done.status == "completed"
    named = by_name(exporter.get_finished_spans())
    runs = named["invoke_agent helper"]
    assert [r.attributes and r.attributes["agentkeel.run.resumed"] for r in runs] == [False, True]
    assert {r.attributes and r.attributes["agentkeel.run.id"] for r in runs} == {first.run_id}
    (tool_span,) = named["execute_tool delete_file"]
    assert parent_id(tool_span) == span_id(runs[1])
    assert all(span.end_time is not None for span in exporter.get_finished_spans())


@pytest.mark.anyio
async def test_one_provider_serves_concurrent_runs_of_several_agents(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    import anyio

    tracing = TracingHooks(tracer_provider=provider)
    agents = []
    for number in range(3):
        model = ScriptedModel([ScriptedTurn(text="slow answer", delay=0.01)])
        agent = Agent(model, name=f"agent{number}")
        agent.hooks.add_provider(tracing)
        agents.append(agent)
    async with anyio.create_task_group() as group:
        for agent in agents:
            group.start_soon(agent.invoke_async, "go")
    spans = exporter.get_finished_spans()
    runs = {s.name: s for s in spans if s.name.startswith("invoke_agent")}
    assert sorted(runs) == ["invoke_agent agent0", "invoke_agent agent1", "invoke_agent agent2"]
    for chat in (s for s in spans if s.name == "chat"):
        assert chat.attributes is not None
        owner = runs[f"invoke_agent {chat.attributes['gen_ai.agent.name']!s}"]
        assert parent_id(chat) == span_id(owner)


@pytest.mark.anyio
async def test_the_run_log_is_one_line_per_run_without_content(
    caplog: pytest.LogCaptureFixture,
) -> None:
    logger = logging.getLogger("agentkeel.test-run-log")
    model = ScriptedModel(
        [ScriptedTurn(tool_calls=[ScriptedToolCall("lookup", {"query": SECRET_INPUT})]), "Done."]
    )
    agent = Agent(model, name="helper", tools=[lookup], hooks=[RunLogHooks(logger)])
    agent.session_manager = SessionManager("helper:ctx-logged", InMemoryStorage())
    with caplog.at_level(logging.DEBUG):
        result = await agent.invoke_async(PROMPT)
    lines = [r for r in caplog.records if r.name == logger.name]
    assert len(lines) == 1
    line = lines[0].getMessage()
    assert line.startswith(
        f"agent=<helper>, context=<ctx-logged>, run=<{result.run_id}>, status=<completed>, "
        "resumed=<False>, steps=<2>, tool_calls=<1>, duration_ms=<"
    )
    assert line.endswith(", error=<None> | run ended")
    assert lines[0].levelno == logging.INFO
    for secret in (SECRET_INPUT, SECRET_OUTPUT, PROMPT, "Done."):
        assert secret not in caplog.text


def test_without_opentelemetry_instrument_adds_no_spans(monkeypatch: pytest.MonkeyPatch) -> None:
    assert tracing_available()
    for name in ("opentelemetry", "opentelemetry.trace"):
        monkeypatch.setitem(sys.modules, name, None)
    assert not tracing_available()
    with pytest.raises(ImportError, match="pip install opentelemetry-api"):
        TracingHooks()
    agent = Agent(ScriptedModel(["Hello."]), name="plain")
    instrument(agent)
    assert not any(agent.hooks.has_callbacks(t) for t in _HOOK_EVENTS)
    assert agent("hi").text == "Hello."


def test_instrument_attaches_spans_and_the_run_log() -> None:
    agent = Agent(ScriptedModel(["Hello."]), name="plain")
    instrument(agent, logger=logging.getLogger("agentkeel.test"))
    assert all(agent.hooks.has_callbacks(t) for t in _HOOK_EVENTS)


# -- the server ---------------------------------------------------------------------------


def _reset_global_provider() -> None:
    """Let a test set the process-wide tracer provider (OpenTelemetry allows it once)."""
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None


@pytest.fixture
def global_exporter(exporter: InMemorySpanExporter) -> Iterator[InMemorySpanExporter]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    _reset_global_provider()
    trace.set_tracer_provider(provider)
    yield exporter
    provider.shutdown()
    _reset_global_provider()


def test_the_server_traces_and_logs_every_run(
    global_exporter: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    server = A2AServer(scripted_agent, name="scripted")
    with caplog.at_level(logging.INFO, logger="agentkeel.server"):
        with serve_in_thread(server.app) as url, httpx.Client(base_url=url) as client:
            body = {"message": "secret", "contextId": "ctx-traced"}
            sent = client.post("/agents/scripted/send", json=body)
            assert sent.status_code == 200, sent.text
            again = client.post("/agents/scripted/send", json={**body, "message": "hello"})
            assert again.status_code == 200
    spans = global_exporter.get_finished_spans()
    runs = [s for s in spans if s.name == "invoke_agent scripted"]
    assert [r.attributes and r.attributes["agentkeel.run.id"] for r in runs] == [
        sent.json()["runId"],
        again.json()["runId"],
    ]
    assert all(
        r.attributes and r.attributes["gen_ai.conversation.id"] == "ctx-traced" for r in runs
    )
    assert [s.name for s in spans].count("execute_tool lookup") == 1
    lines = [r.getMessage() for r in caplog.records if r.name == "agentkeel.server"]
    assert len(lines) == 2
    assert lines[0].startswith(
        f"agent=<scripted>, context=<ctx-traced>, run=<{sent.json()['runId']}>, "
        "status=<completed>, resumed=<False>, steps=<2>, tool_calls=<1>, duration_ms=<"
    )
    recorded = everything_recorded(spans) + caplog.text
    assert SECRET_INPUT not in recorded and SECRET_OUTPUT not in recorded
