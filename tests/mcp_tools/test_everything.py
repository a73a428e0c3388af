"""An Agent on the reference server-everything, over stdio and over streamable HTTP."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator

import pytest

from agentkeel import Agent, InputAnswer, ScriptedModel, ScriptedToolCall, ScriptedTurn
from agentkeel.mcp import MCPServer
from agentkeel.messages import JSONObject
from agentkeel.models.base import ModelRequest
from mcp_tools import EVERYTHING, everything_over_http, node_server

pytestmark = pytest.mark.anyio
Progress = list[tuple[str, float, float | None]]


def call(name: str, arguments: JSONObject | None = None) -> ScriptedTurn:
    return ScriptedTurn(tool_calls=[ScriptedToolCall(name, dict(arguments or {}))])


@pytest.fixture(params=["stdio", "http"])
def transport(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "stdio":
        yield "stdio"
        return
    with everything_over_http() as url:
        yield url


@pytest.fixture
def progress() -> Progress:
    return []


@pytest.fixture
async def everything(transport: str, progress: Progress) -> AsyncIterator[MCPServer]:
    def on_progress(tool: str, value: float, total: float | None, message: str | None) -> None:
        del message
        progress.append((tool, value, total))

    if transport == "stdio":
        server = MCPServer.stdio(
            "node", [node_server(EVERYTHING), "stdio"], name="everything", on_progress=on_progress
        )
    else:
        server = MCPServer.http(transport, name="everything", on_progress=on_progress)
    async with server:
        yield server


async def test_the_model_sees_the_servers_tools_with_their_schemas(everything: MCPServer) -> None:
    model = ScriptedModel(["hello"])
    await Agent(model, tools=[everything]).invoke_async("hi")
    specs = {spec.name: spec for spec in model.requests[0].tools}
    assert {"echo", "get-sum", "get-tiny-image", "get-structured-content"} <= set(specs)
    assert specs["echo"].description == "Echoes back the input string"
    assert specs["echo"].input_schema["properties"] == {
        "message": {"type": "string", "description": "Message to echo"}
    }
    assert "$schema" not in specs["echo"].input_schema


async def test_echo_add_structured_content_and_an_image(everything: MCPServer) -> None:
    model = ScriptedModel(
        [
            ScriptedTurn(
                tool_calls=[
                    ScriptedToolCall("echo", {"message": "hi"}),
                    ScriptedToolCall("get-sum", {"a": 2, "b": 40}),
                    ScriptedToolCall("get-structured-content", {"location": "New York"}),
                    ScriptedToolCall("get-tiny-image", {}),
                ]
            ),
            "done",
        ]
    )
    result = await Agent(model, tools=[everything]).invoke_async("go")
    assert result.status == "completed"
    outputs = {record.name: record.output for record in result.tool_calls}
    assert [record.status for record in result.tool_calls] == ["success"] * 4
    assert outputs["echo"] == "Echo: hi"
    assert "42" in str(outputs["get-sum"])
    structured = outputs["get-structured-content"]
    assert isinstance(structured, dict)
    assert structured["structuredContent"] == {
        "temperature": 33,
        "conditions": "Cloudy",
        "humidity": 82,
    }
    image = outputs["get-tiny-image"]
    assert isinstance(image, dict)
    parts = image["parts"]
    assert isinstance(parts, list) and len(parts) == 1
    part = parts[0]
    assert isinstance(part, dict) and isinstance(part["bytes"], int) and part["bytes"] > 0
    assert {k: v for k, v in part.items() if k != "bytes"} == {
        "type": "image",
        "name": "image 1",
        "mimeType": "image/png",
    }
    assert "data" not in json.dumps(image)  # the image is named, its bytes are not kept
    results = [p for m in model.requests[1].messages for p in m.parts if p.kind == "tool_result"]
    assert [p.content for p in results][0] == "Echo: hi"


async def test_a_long_running_tool_reports_progress(
    everything: MCPServer, progress: Progress
) -> None:
    model = ScriptedModel(
        [call("trigger-long-running-operation", {"duration": 1, "steps": 2}), "ok"]
    )
    result = await Agent(model, tools=[everything]).invoke_async("go")
    assert result.tool_calls[0].status == "success"
    assert "Long running operation completed" in str(result.tool_calls[0].output)
    assert progress == [
        ("trigger-long-running-operation", 1.0, 2.0),
        ("trigger-long-running-operation", 2.0, 2.0),
    ]


async def test_tools_announced_after_start_are_offered(everything: MCPServer) -> None:
    # the server registers its elicitation tool once the handshake is done and then sends
    # notifications/tools/list_changed; the next run offers it
    model = ScriptedModel(["one"])
    await Agent(model, tools=[everything]).invoke_async("hi")
    assert "trigger-elicitation-request" in {spec.name for spec in model.requests[0].tools}


def _asked(request: ModelRequest) -> str:
    del request
    return "thanks"


async def test_an_elicitation_is_an_input_interrupt_and_the_answer_reaches_the_server(
    everything: MCPServer,
) -> None:
    model = ScriptedModel([call("trigger-elicitation-request"), _asked])
    agent = Agent(model, tools=[everything])
    suspended = await agent.invoke_async("ask me")
    assert suspended.status == "suspended"
    (question,) = suspended.interrupts
    assert question.kind == "input"
    assert question.tool == "trigger-elicitation-request"
    assert question.prompt is not None
    assert question.prompt.startswith("Please provide inputs for the following fields:")
    assert "email" in question.prompt
    answer: JSONObject = {"name": "Ada Lovelace", "check": True, "email": "ada@example.com"}
    resumed = await agent.resume_async(question.id, InputAnswer(answer))
    assert resumed.status == "completed"
    assert resumed.run_id == suspended.run_id
    output = str(resumed.tool_calls[0].output)
    assert resumed.tool_calls[0].status == "success"
    assert "Ada Lovelace" in output and '"action": "accept"' in output


async def test_a_declined_elicitation_is_told_to_the_server(everything: MCPServer) -> None:
    model = ScriptedModel([call("trigger-elicitation-request"), "ok"])
    agent = Agent(model, tools=[everything])
    suspended = await agent.invoke_async("ask me")
    resumed = await agent.resume_async(
        suspended.interrupts[0].id, InputAnswer({"action": "decline"})
    )
    assert resumed.status == "completed"
    assert "decline" in str(resumed.tool_calls[0].output).lower()
