"""framework.json's ``mcp`` key in a real ``agentkeel serve``, on server-filesystem.

The model is the fake OpenAI-compatible server: a user message that is a JSON object
``{"tool": ..., "args": ...}`` makes it call that tool; a tool result makes it answer
``done: <the result>``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest

from agentkeel import Agent, ConfigurationError, ScriptedModel, ScriptedToolCall, ScriptedTurn
from agentkeel.framework import load_framework
from agentkeel.mcp import MCPServer
from agentkeel.server import A2AServer, create_app
from e2e import ServerProcess, serve_in_thread, stream_turn, write_framework
from fakes.openai_server import FakeOpenAI, OpenAIStream
from fakes.server import RecordedRequest, Reply
from mcp_tools import FILESYSTEM, PYTHON, faulty_args, node_server

pytestmark = pytest.mark.anyio
KEY = "sk-mcp-e2e-secret"


def files_brain(recorded: RecordedRequest) -> Reply:
    messages = recorded.json.get("messages")
    assert isinstance(messages, list)
    last = messages[-1]
    assert isinstance(last, dict)
    stream = OpenAIStream()
    if last.get("role") == "tool":
        stream.text(f"done: {last.get('content')}")
        return stream.finish("stop").usage(5, 5).reply()
    request = json.loads(str(last.get("content")))
    arguments = json.dumps(request["args"])
    stream.tool_call(0, id="call-files-1", name=request["tool"], arguments=[arguments])
    return stream.finish("tool_calls").usage(5, 5).reply()


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI(api_key=KEY, responder=files_brain)
    with fake.serve():
        yield fake


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    files = tmp_path / "files"
    files.mkdir()
    (files / "notes.txt").write_text("buy milk\n", encoding="utf-8")
    return files


def document(base_url: str, folder: Path, **mcp: object) -> dict[str, object]:
    server: dict[str, object] = {"command": "node", "args": [node_server(FILESYSTEM), str(folder)]}
    server.update(mcp)
    return {
        "agents": {
            "files": {
                "description": "Reads and writes files through an MCP server",
                "model": {
                    "provider": "openai",
                    "model": "fake",
                    "baseUrl": base_url,
                    "apiKeyEnv": "MCP_E2E_KEY",
                    "maxRetries": 0,
                },
                "mcp": {"fs": server},
                "approve": ["write_file"],
            }
        },
        "sessionDir": "./sessions",
        "checkpointer": {"dir": "./checkpoints"},
        "server": {"heartbeatSeconds": 1, "shutdownTimeoutSeconds": 5},
    }


@pytest.fixture
def served(tmp_path: Path, fake_openai: FakeOpenAI, folder: Path) -> Iterator[ServerProcess]:
    path = write_framework(tmp_path, document(fake_openai.base_url, folder))
    process = ServerProcess(path, env={"MCP_E2E_KEY": KEY})
    try:
        yield process
    finally:
        process.stop()


def ask(tool: str, **args: object) -> str:
    return json.dumps({"tool": tool, "args": args})


async def test_read_file_and_only_name_and_status_reach_the_client(
    served: ServerProcess, folder: Path
) -> None:
    url = served.start()
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        body = {"message": ask("read_text_file", path=str(folder / "notes.txt"))}
        frames = await stream_turn(client, "files", body)
        agents = (await client.get("/agents")).json()
    done = frames[-1].data
    text = done["text"]
    assert isinstance(text, str)
    assert done["status"] == "completed"
    assert done["toolCalls"] == ["read_text_file"]
    assert text.startswith("done: ") and "buy milk" in text
    events = [frame.event for frame in frames if not frame.done]
    tool_events = [event for event in events if event["type"] in ("tool_call", "tool_result")]
    assert [set(event) for event in tool_events] == [
        {"type", "id", "name"},
        {"type", "id", "name", "status"},
    ]
    tool_frames = [
        f for f in frames if not f.done and f.event["type"] in ("tool_call", "tool_result")
    ]
    assert all("buy milk" not in frame.raw for frame in tool_frames)
    assert agents["agents"][0]["name"] == "files"
    assert {"read_text_file", "write_file"} <= set(agents["agents"][0]["skills"])


@pytest.mark.parametrize("approved", [True, False])
async def test_write_file_waits_for_approval_across_a_restart(
    served: ServerProcess, folder: Path, approved: bool
) -> None:
    target = folder / "todo.txt"
    url = served.start()
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        body = {"message": ask("write_file", path=str(target), content="call mum")}
        first = (await client.post("/agents/files/send", json=body)).json()
    assert first["status"] == "suspended"
    interrupt = first["interrupt"]
    assert interrupt["kind"] == "approval" and interrupt["tool"] == "write_file"
    assert not target.exists()
    served.stop()
    url = served.start()  # a new process, with a new connection to a new MCP server
    decision = {"approved": True} if approved else {"approved": False, "reason": "not today"}
    resume = {"interruptId": interrupt["id"], "decision": decision}
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        again: dict[str, object] = {"contextId": first["contextId"], "resume": resume}
        second = (await client.post("/agents/files/send", json=again)).json()
    assert second["status"] == "completed"
    assert second["runId"] == first["runId"]
    if approved:
        assert second["toolCalls"] == ["write_file"]
        assert target.read_text(encoding="utf-8") == "call mum"
    else:
        assert second["toolCalls"] == []
        assert "not today" in second["text"]
        assert not target.exists()


def test_serve_stops_when_an_mcp_server_cannot_start(
    tmp_path: Path, fake_openai: FakeOpenAI, folder: Path
) -> None:
    broken = document(fake_openai.base_url, folder, command="/nonexistent/mcp-server")
    process = ServerProcess(write_framework(tmp_path, broken), env={"MCP_E2E_KEY": KEY})
    with pytest.raises(RuntimeError) as caught:
        process.start(timeout=30)
    assert "MCP server 'files.mcp.fs' could not start" in str(caught.value)


def test_approve_must_name_a_tool_of_the_agent_or_its_servers(
    tmp_path: Path, fake_openai: FakeOpenAI, folder: Path
) -> None:
    doc = document(fake_openai.base_url, folder)
    agents = doc["agents"]
    assert isinstance(agents, dict)
    agents["files"]["approve"] = ["write_file", "format_disk"]
    path = write_framework(tmp_path, doc)
    process = ServerProcess(path, env={"MCP_E2E_KEY": KEY})
    with pytest.raises(RuntimeError) as caught:
        process.start(timeout=30)
    assert f"{path}: agents.files.approve: 'format_disk' is not one of the tools" in str(
        caught.value
    )


@pytest.mark.parametrize(
    ("server", "message"),
    [
        ({"command": "node", "url": "http://127.0.0.1:1/mcp"}, "set either command"),
        ({}, "set either command"),
        ({"url": "http://127.0.0.1:1/mcp", "args": ["x"]}, "args: only for a stdio server"),
        ({"command": "node", "headers": {"A": "b"}}, "headers: only for an HTTP server"),
        ({"command": "node", "tmeout": 3}, "agents.files.mcp.fs.tmeout: unknown key"),
        ({"command": "node", "timeout": -1}, "agents.files.mcp.fs.timeout"),
        ({"command": "node", "identity": "headers"}, "identity 'headers' needs an HTTP server"),
    ],
)
def test_bad_mcp_entries_are_refused_naming_the_key_and_the_file(
    tmp_path: Path, server: dict[str, object], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_E2E_KEY", KEY)
    doc = document("http://127.0.0.1:1/v1", tmp_path)
    agents = doc["agents"]
    assert isinstance(agents, dict)
    agents["files"]["mcp"] = {"fs": server}
    path = write_framework(tmp_path, doc)
    with pytest.raises(ConfigurationError) as caught:
        load_framework(path)
    assert str(path) in caught.value.message
    assert "agents.files.mcp.fs" in caught.value.message
    assert message in caught.value.message


def test_secrets_of_mcp_entries_come_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_E2E_KEY", KEY)
    monkeypatch.setenv("MCP_E2E_TOKEN", "Bearer very-secret")
    doc = document("http://127.0.0.1:1/v1", tmp_path)
    agents = doc["agents"]
    assert isinstance(agents, dict)
    entry = {
        "url": "http://127.0.0.1:1/mcp",
        "headers": {"Authorization": {"env": "MCP_E2E_TOKEN"}},
    }
    agents["files"]["mcp"] = {"search": entry}
    framework = load_framework(write_framework(tmp_path, doc))
    agent, other = (framework.definitions["files"].factory(c) for c in ("ctx-1", "ctx-2"))
    assert isinstance(agent, Agent) and isinstance(other, Agent)
    (server,) = agent.toolsets
    assert "very-secret" not in repr(server)
    assert server is other.toolsets[0]  # one object (one connection) per definition


async def test_a_per_context_connection_closes_when_its_context_leaves_the_cache(
    tmp_path: Path, fake_openai: FakeOpenAI, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_E2E_KEY", KEY)
    doc = document(fake_openai.base_url, folder, perContext=True)
    doc["maxContexts"] = 1
    app = create_app(load_framework(write_framework(tmp_path, doc)))
    probe = app.state.runtime.framework.definitions["files"].factory("probe")
    assert isinstance(probe, Agent)
    (server,) = probe.toolsets
    assert isinstance(server, MCPServer)
    read = {"message": ask("read_text_file", path=str(folder / "notes.txt"))}
    with serve_in_thread(app) as url:
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            one = await client.post("/agents/files/send", json={**read, "contextId": "ctx-one"})
            opened = set(server._connections)
            two = await client.post("/agents/files/send", json={**read, "contextId": "ctx-two"})
            with anyio.fail_after(10):
                while (None, "ctx-one") in server._connections:
                    await anyio.sleep(0.05)
            left = set(server._connections)
    assert one.json()["status"] == two.json()["status"] == "completed"
    assert opened == {(None, "ctx-one")}
    assert left == {(None, "ctx-two")}
    assert server._connections == {}  # shutdown closed the rest


def test_the_mcp_example_loads_and_the_demo_example_needs_no_mcp() -> None:
    examples = Path(__file__).resolve().parents[2] / "examples"
    framework = load_framework(examples / "mcp" / "framework.json")
    files = framework.definitions["files"].factory("ctx-example")
    assert isinstance(files, Agent)
    (server,) = files.toolsets
    assert isinstance(server, MCPServer)
    assert server.options.tools is not None and "write_file" in server.options.tools
    assert files.approve == frozenset({"write_file"})
    demo = json.loads((examples / "framework.json").read_text(encoding="utf-8"))
    assert all("mcp" not in agent for agent in demo["agents"].values())


FAULTY_SHARED = MCPServer.stdio(PYTHON, faulty_args(), name="faulty")


def faulty_agent(context_id: str) -> Agent:
    del context_id
    turn = ScriptedTurn(tool_calls=[ScriptedToolCall("whoami", {})])
    return Agent(ScriptedModel([turn, "done"]), tools=[FAULTY_SHARED], name="coded")


async def test_an_agent_built_in_code_gets_its_mcp_server_opened_by_the_lifespan() -> None:
    server = A2AServer(faulty_agent, name="coded")
    with serve_in_thread(server.app) as url:
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            result = (await client.post("/agents/coded/send", json={"message": "who"})).json()
            agents = (await client.get("/agents")).json()["agents"]
    assert result["status"] == "completed" and result["toolCalls"] == ["whoami"]
    assert "whoami" in agents[0]["skills"]
    assert FAULTY_SHARED._connections == {}  # closed at shutdown
