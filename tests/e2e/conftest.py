"""Fixtures of the end-to-end suite: a tool log and servers of the scripted agent."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest

from agentkeel.checkpoint.base import Checkpointer
from agentkeel.framework import Retention, ServerSettings
from agentkeel.server import A2AServer
from agentkeel.storage.base import SessionStorage
from e2e import TOOL_LOG, scripted_agent, serve_in_thread

StartServer = Callable[..., AbstractContextManager[str]]


@pytest.fixture
def tool_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The file the scripted agent's tools log their executions to."""
    path = tmp_path / "tool-runs.log"
    monkeypatch.setenv(TOOL_LOG, str(path))
    return path


@pytest.fixture
def start_server(tool_log: Path) -> StartServer:
    """Start the scripted agent (definition ``scripted``) on uvicorn in a thread."""
    del tool_log

    @contextmanager
    def start(
        *,
        storage: SessionStorage | None = None,
        checkpointer: Checkpointer | None = None,
        max_contexts: int = 1000,
        settings: ServerSettings | None = None,
        retention: Retention | None = None,
    ) -> Iterator[str]:
        server = A2AServer(
            scripted_agent,
            name="scripted",
            storage=storage,
            checkpointer=checkpointer,
            max_contexts=max_contexts,
            settings=settings or ServerSettings(heartbeat_seconds=1.0, shutdown_timeout_seconds=5),
            retention=retention,
        )
        with serve_in_thread(server.app) as url:
            yield url

    return start


@pytest.fixture
def server_url(start_server: StartServer) -> Iterator[str]:
    """A default server: memory storage, queue policy."""
    with start_server() as url:
        yield url
