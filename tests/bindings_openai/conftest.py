"""A real server of the scripted agent, whose one shared model records what it was sent."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentkeel import Agent, LocalFileStorage, ScriptedModel, ScriptedToolCall, ScriptedTurn, tool
from agentkeel.framework import ServerSettings
from agentkeel.models.base import ModelRequest
from agentkeel.server import A2AServer
from e2e import TOOL_LOG, brain, delete_file, lookup, serve_in_thread


@tool(expose=True)
def weather(city: str) -> dict[str, object]:
    """The weather of a city, for a page that renders it.

    Args:
        city: The city.
    """
    return {"city": city, "celsius": 4}


def weather_brain(request: ModelRequest) -> ScriptedTurn:
    """The e2e agent's model, plus ``weather <city>``, which calls the exposed tool."""
    last = request.messages[-1]
    words = last.text.split()
    if not last.tool_results and len(words) == 2 and words[0] == "weather":
        return ScriptedTurn(tool_calls=[ScriptedToolCall("weather", {"city": words[1]})])
    return brain(request)


@dataclass
class Served:
    """The server's URL and the model every context's Agent shares."""

    url: str
    model: ScriptedModel
    sessions: Path
    """The session folder (file storage), to see what was kept."""


@pytest.fixture
def served(tmp_path: Path, tool_log: Path) -> Iterator[Served]:
    del tool_log
    model = ScriptedModel([weather_brain], repeat=True, chunk_size=4)

    def factory(context_id: str) -> Agent:
        del context_id
        return Agent(
            model,
            tools=[delete_file, lookup, weather],
            name="scripted",
            approve=["delete_file"],
        )

    server = A2AServer(
        factory,
        name="scripted",
        storage=LocalFileStorage(tmp_path / "sessions"),
        settings=ServerSettings(heartbeat_seconds=1.0, shutdown_timeout_seconds=5),
    )
    with serve_in_thread(server.app) as url:
        yield Served(url=url, model=model, sessions=tmp_path / "sessions")


@pytest.fixture
def tool_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The file the e2e tools log their executions to."""
    path = tmp_path / "tool-runs.log"
    monkeypatch.setenv(TOOL_LOG, str(path))
    return path
