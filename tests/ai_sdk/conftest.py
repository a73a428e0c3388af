"""A server of the scripted agent whose models keep every request they were sent."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from agentkeel import Agent, ScriptedModel, ScriptedTurn
from agentkeel.framework import ServerSettings
from agentkeel.models.base import ModelRequest
from agentkeel.server import A2AServer
from e2e import TOOL_LOG, brain, delete_file, lookup, pause, serve_in_thread

PROVIDER_SECRET = "SECRET-PROVIDER-BODY-1234"


def crashing_brain(request: ModelRequest) -> ScriptedTurn:
    """The e2e brain, plus ``crash``: the model call fails with a provider's details."""
    if request.messages[-1].text == "crash":
        raise RuntimeError(f"provider said: {PROVIDER_SECRET}")
    return brain(request)


@dataclass
class Served:
    """The server's URL and the model each context's Agent was built with."""

    url: str
    models: dict[str, ScriptedModel] = field(default_factory=dict)


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    """The scripted agent (definition ``scripted``) on uvicorn, memory storage."""
    monkeypatch.setenv(TOOL_LOG, str(tmp_path / "tool-runs.log"))
    models: dict[str, ScriptedModel] = {}

    def build(context_id: str) -> Agent:
        model = ScriptedModel([crashing_brain], repeat=True, chunk_size=4)
        models[context_id] = model
        return Agent(
            model,
            tools=[delete_file, lookup, pause],
            name="scripted",
            approve=["delete_file"],
        )

    server = A2AServer(
        build,
        name="scripted",
        settings=ServerSettings(heartbeat_seconds=1.0, shutdown_timeout_seconds=5),
    )
    with serve_in_thread(server.app) as url:
        yield Served(url, models)
