"""The tool flag ``expose``: an exposed tool's input and output on its native frames."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from agentkeel import Agent, ScriptedModel, ScriptedToolCall, ScriptedTurn, tool
from agentkeel.errors import ConfigurationError
from agentkeel.events import ToolCallEvent, ToolResultEvent
from agentkeel.framework import load_framework
from bindings_openai.conftest import Served, served, tool_log  # noqa: F401 (fixtures)
from e2e import SECRET_INPUT, SECRET_OUTPUT, stream_turn

pytestmark = pytest.mark.anyio


@tool(expose=True, secret=["token"])
def render(title: str, token: str = "") -> dict[str, str]:
    """Something a page renders.

    Args:
        title: The title.
        token: A credential, never shown.
    """
    del token
    return {"title": title.upper()}


async def test_exposed_frames_carry_input_and_output(served: Served) -> None:  # noqa: F811
    async with httpx.AsyncClient(base_url=served.url, timeout=10) as client:
        frames = await stream_turn(client, "scripted", {"message": "weather Oslo"})
        hidden = await stream_turn(client, "scripted", {"message": "secret"})
    events = [f.event for f in frames if not f.done]
    call = next(e for e in events if e["type"] == "tool_call")
    result = next(e for e in events if e["type"] == "tool_result")
    assert call == {
        "type": "tool_call",
        "id": call["id"],
        "name": "weather",
        "input": {"city": "Oslo"},
    }
    assert result["output"] == {"city": "Oslo", "celsius": 4}
    wire = json.dumps([f.data for f in hidden])
    assert SECRET_INPUT not in wire and SECRET_OUTPUT not in wire
    hidden_events = [f.event for f in hidden if not f.done]
    for event in hidden_events:
        if event["type"] in ("tool_call", "tool_result"):
            assert "input" not in event and "output" not in event


def test_secret_inputs_stay_masked_on_an_exposed_tool() -> None:
    call = ScriptedToolCall("render", {"title": "hi", "token": "tok-1234"})
    agent = Agent(ScriptedModel([ScriptedTurn(tool_calls=[call]), "done"]), tools=[render])
    with agent:
        events = list(agent.stream_sync("render"))
    calls = [e for e in events if isinstance(e, ToolCallEvent)]
    results = [e for e in events if isinstance(e, ToolResultEvent)]
    assert calls[0].input == {"title": "hi", "token": "[secret]"}
    assert results[0].exposed and results[0].output == {"title": "HI"}


def test_tools_are_not_exposed_by_default() -> None:
    @tool
    def plain(x: int) -> int:
        """Double.

        Args:
            x: A number.
        """
        return 2 * x

    assert not plain.expose
    call = ScriptedToolCall("plain", {"x": 2})
    agent = Agent(ScriptedModel([ScriptedTurn(tool_calls=[call]), "done"]), tools=[plain])
    with agent:
        events = list(agent.stream_sync("go"))
    assert [e.input for e in events if isinstance(e, ToolCallEvent)] == [None]
    assert [e.exposed for e in events if isinstance(e, ToolResultEvent)] == [False]


def test_framework_json_exposes_listed_tools(tmp_path: Path) -> None:
    path = tmp_path / "framework.json"
    document = {
        "agents": {
            "a": {
                "model": {"provider": "demo"},
                "tools": ["e2e:lookup", "e2e:delete_file"],
                "expose": ["lookup"],
            }
        }
    }
    path.write_text(json.dumps(document), encoding="utf-8")
    agent = load_framework(path).definitions["a"].factory("ctx-1")
    assert isinstance(agent, Agent)
    exposed = {name: item.expose for name, item in agent.tools.items()}
    assert exposed == {"lookup": True, "delete_file": False}


def test_expose_takes_a_bool() -> None:
    with pytest.raises(ConfigurationError, match="expose takes True or False"):
        tool(expose="yes")  # type: ignore[call-overload]
