"""End-to-end kit: a scripted agent, real uvicorn servers (thread or process), SSE reading.

The scripted agent lives here (not in a test module) so that a server subprocess can
import it as ``e2e:scripted_agent`` from a framework.json. Its model is a ScriptedModel
whose single turn is a function of the request, reading commands from the last user
message:

- ``delete <path>``: call ``delete_file`` (needs approval), then report its result;
- ``secret``: call ``lookup`` with a secret input, whose output is secret too;
- ``pause <seconds>``: call the ``pause`` tool, which takes that long;
- ``slow <seconds>``: answer slowly (for disconnects, queues and kills);
- ``history``: answer with every user message of the conversation, joined by ``|``;
- ``tokens <n>``: answer with exactly n token deltas;
- anything else: ``echo: <message>``.

Every tool execution is appended to the file named by ``AGENTKEEL_E2E_TOOL_LOG``, so a
test (even across processes) can count how many times a tool really ran.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx
from starlette.types import ASGIApp

from agentkeel import Agent, ScriptedModel, ScriptedToolCall, ScriptedTurn, tool
from agentkeel.messages import JSONObject
from agentkeel.models.base import ModelRequest
from agentkeel.sse import aiter_sse
from fakes.server import run_asgi_server

TESTS_DIR = Path(__file__).resolve().parent.parent
TOOL_LOG = "AGENTKEEL_E2E_TOOL_LOG"
SECRET_INPUT = "SECRET-INPUT-4242"
SECRET_OUTPUT = "SECRET-OUTPUT-4242"


def _log_tool(line: str) -> None:
    target = os.environ.get(TOOL_LOG)
    if target:
        with open(target, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")


def tool_runs(path: Path) -> list[str]:
    """The tool executions logged so far."""
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


@tool
def delete_file(path: str) -> str:
    """Pretend to delete a file (logged, so tests can count executions).

    Args:
        path: The file to delete.
    """
    _log_tool(f"delete_file {path}")
    return f"deleted {path}"


@tool
def lookup(query: str) -> str:
    """Look something up; input and output must never reach the wire.

    Args:
        query: What to look up.
    """
    _log_tool(f"lookup {query}")
    return SECRET_OUTPUT


@tool
async def pause(seconds: float) -> str:
    """Wait, as a slow tool would (a process can be killed meanwhile).

    Args:
        seconds: How long to wait.
    """
    await anyio.sleep(seconds)
    _log_tool(f"pause {seconds}")
    return "paused"


def _prompts(request: ModelRequest) -> list[str]:
    return [m.text for m in request.messages if m.role == "user" and not m.tool_results]


def brain(request: ModelRequest) -> ScriptedTurn:
    """The scripted agent's model: one answer per request, from the last user message."""
    last = request.messages[-1]
    if last.tool_results:
        summary = "; ".join(f"{r.name} {r.status}" for r in last.tool_results)
        return ScriptedTurn(text=f"tools said {summary}")
    words = last.text.split()
    command = words[0] if words else ""
    if command == "delete" and len(words) > 1:
        return ScriptedTurn(tool_calls=[ScriptedToolCall("delete_file", {"path": words[1]})])
    if command == "pause" and len(words) > 1:
        return ScriptedTurn(tool_calls=[ScriptedToolCall("pause", {"seconds": float(words[1])})])
    if command == "secret":
        return ScriptedTurn(tool_calls=[ScriptedToolCall("lookup", {"query": SECRET_INPUT})])
    if command == "slow" and len(words) > 1:
        seconds = float(words[1])
        text = "slowly " * 10
        return ScriptedTurn(text=text.strip(), delay=seconds / 18)
    if command == "history":
        return ScriptedTurn(text="|".join(_prompts(request)))
    if command == "tokens" and len(words) > 1:
        return ScriptedTurn(text="".join(f"t{i:02d} " for i in range(int(words[1]))))
    return ScriptedTurn(text=f"echo: {last.text}")


def scripted_agent(context_id: str) -> Agent:
    """A new scripted Agent for one context (the framework.json factory)."""
    del context_id
    return Agent(
        ScriptedModel([brain], repeat=True, chunk_size=4),
        tools=[delete_file, lookup, pause],
        name="scripted",
        description="A scripted test agent",
        approve=["delete_file"],
    )


# -- servers ------------------------------------------------------------------------------


@contextmanager
def serve_in_thread(app: ASGIApp) -> Iterator[str]:
    """Run `app` (lifespan on) with uvicorn on a free loopback port in a thread."""
    with run_asgi_server(app, lifespan=True, graceful_timeout=5) as url:
        yield url


class ServerProcess:
    """``agentkeel serve`` in a subprocess, so it can be restarted or killed."""

    def __init__(self, framework: Path, env: Mapping[str, str] | None = None) -> None:
        self.framework = framework
        self.env = {**os.environ, "PYTHONPATH": str(TESTS_DIR), **(env or {})}
        self.process: subprocess.Popen[bytes] | None = None
        self.url = ""
        self.stdout = framework.with_name("server.out")
        self.stderr = framework.with_name("server.err")

    def start(self, *args: str, timeout: float = 20.0) -> str:
        """Start the server (extra command-line `args`) and return its URL once it listens."""
        self.stdout.write_text("")
        code = "import sys; from agentkeel.server.serve import serve_command; "
        code += "sys.exit(serve_command(sys.argv[1:]))"
        with self.stdout.open("wb") as out, self.stderr.open("ab") as err:
            self.process = subprocess.Popen(
                [sys.executable, "-c", code, str(self.framework), "--port", "0", *args],
                stdout=out,
                stderr=err,
                env=self.env,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.stdout.read_text(encoding="utf-8")
            if " on http://" in text:
                self.url = text.split(" on ", 1)[1].split()[0]
                return self.url
            if self.process.poll() is not None:
                break
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"the server did not start: {self.stderr.read_text()}")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> int:
        """Signal the server and wait for it to exit; returns its exit code."""
        process, self.process = self.process, None
        if process is None:
            return 0
        if process.poll() is None:
            process.send_signal(sig)
        try:
            return process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            return process.wait()

    def kill(self) -> int:
        """SIGKILL: the process gets no chance to clean up."""
        return self.stop(signal.SIGKILL)


def write_framework(folder: Path, document: Mapping[str, object]) -> Path:
    """Write a framework.json into `folder` and return its path."""
    path = folder / "framework.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


# -- the wire -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Frame:
    """One received SSE frame: its id and its decoded JSON data."""

    id: int
    data: JSONObject
    raw: str

    @property
    def done(self) -> bool:
        """Whether this is the done frame."""
        return self.data.get("done") is True

    @property
    def event(self) -> JSONObject:
        """The event object of an event frame."""
        event = self.data["event"]
        assert isinstance(event, dict)
        return event


async def frames_of(response: httpx.Response) -> AsyncIterator[Frame]:
    """Decode a streamed response into frames as they arrive."""
    async for item in aiter_sse(response.aiter_bytes()):
        data = json.loads(item.data)
        assert isinstance(data, dict)
        yield Frame(id=int(item.id or 0), data=data, raw=item.data)


async def stream_turn(
    client: httpx.AsyncClient,
    agent: str,
    body: Mapping[str, object],
    headers: Mapping[str, str] | None = None,
) -> list[Frame]:
    """POST a turn to the stream endpoint and read every frame up to the done frame."""
    async with client.stream("POST", f"/agents/{agent}/stream", json=body, headers=headers) as r:
        assert r.status_code == 200, await r.aread()
        assert r.headers["content-type"].startswith("text/event-stream")
        return [frame async for frame in frames_of(r)]


async def reconnect(
    client: httpx.AsyncClient, agent: str, context_id: str, last_event_id: int | None
) -> list[Frame]:
    """GET the context's stream with Last-Event-ID and read it to its end."""
    headers = {} if last_event_id is None else {"Last-Event-ID": str(last_event_id)}
    url = f"/agents/{agent}/contexts/{context_id}/stream"
    async with client.stream("GET", url, headers=headers) as response:
        assert response.status_code == 200, await response.aread()
        return [frame async for frame in frames_of(response)]


def text_of(frames: list[Frame]) -> str:
    """The concatenated token deltas of a stream."""
    return "".join(
        str(f.event["text"]) for f in frames if not f.done and f.event["type"] == "token"
    )
