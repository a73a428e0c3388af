"""framework.json: every mistake names the key and the file; the server refuses to start."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agentkeel.agent import Agent
from agentkeel.checkpoint.file import FileCheckpointer
from agentkeel.errors import ConfigurationError
from agentkeel.framework import load_framework, parse_duration
from agentkeel.storage.file import LocalFileStorage
from agentkeel.storage.memory import InMemoryStorage
from e2e import TESTS_DIR

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "framework.json"
DEMO = {"model": {"provider": "demo"}}


def error_for(tmp_path: Path, document: object, *, raw: str | None = None) -> str:
    path = tmp_path / "framework.json"
    path.write_text(raw if raw is not None else json.dumps(document), encoding="utf-8")
    with pytest.raises(ConfigurationError) as caught:
        load_framework(path)
    message = caught.value.message
    assert str(path) in message
    return message


@pytest.mark.parametrize(
    ("document", "key", "words"),
    [
        ({"agents": {"a": DEMO}, "sesionDir": "x"}, "sesionDir", "unknown key"),
        ({"agents": {"a": {**DEMO, "toolz": []}}}, "agents.a.toolz", "unknown key"),
        ({"agents": {"a": DEMO}, "maxContexts": "10"}, "maxContexts", "valid integer"),
        ({"agents": {"a": DEMO}, "server": {"port": True}}, "server.port", "valid integer"),
        ({"agents": {"a": DEMO}, "server": {"concurrency": "lifo"}}, "server.concurrency", "queue"),
        ({"agents": {"a": DEMO}, "server": {"transcript": "off"}}, "server.transcript", "boolean"),
        ({"agents": {}}, "agents", "at least 1"),
        ({}, "agents", "required key is missing"),
        ({"agents": {"Bad Name": DEMO}}, "agents.Bad Name", "must match"),
        ({"agents": {"a": {"model": {"provider": "nope"}}}}, "agents.a.model.provider", "nope"),
        ({"agents": {"a": {"model": {"provider": "openai"}}}}, "agents.a.model", "model name"),
        (
            {"agents": {"a": {**DEMO, "tools": ["no_such_module_xyz:thing"]}}},
            "agents.a.tools[0]",
            "cannot import",
        ),
        (
            {"agents": {"a": {**DEMO, "tools": ["agentkeel.tools.builtin:TOOLS_MISSING"]}}},
            "agents.a.tools[0]",
            "cannot import",
        ),
        (
            {"agents": {"a": {**DEMO, "tools": ["json:dumps"]}}},
            "agents.a.tools[0]",
            "not a tool",
        ),
        (
            {"agents": {"a": {**DEMO, "approve": ["delete_file"]}}},
            "agents.a.approve[0]",
            "not one of the agent's tools",
        ),
        (
            {"agents": {"a": {**DEMO, "tools": ["e2e:lookup"], "expose": ["lookup", "nope"]}}},
            "agents.a.expose[1]",
            "'nope' is not one of the agent's tools",
        ),
        (
            {"agents": {"a": {**DEMO, "expose": "lookup"}}},
            "agents.a.expose",
            "valid list",
        ),
        ({"agents": {"a": {"factory": "nowhere_xyz:make"}}}, "agents.a.factory", "cannot import"),
        ({"agents": {"a": {"factory": "json:dumps"}}}, "agents.a.factory", "not an Agent"),
        (
            {"agents": {"a": {"factory": "agentkeel.tools.demo:demo_agent"}}},
            "agents.a.factory",
            "failed",
        ),
        ({"agents": {"a": {"factory": "e2e:TESTS_DIR"}}}, "agents.a.factory", "not callable"),
        ({"agents": {"a": DEMO}, "retention": {"events": "soon"}}, "retention.events", "duration"),
        ({"agents": {"a": DEMO}, "storage": "mongodb://db/x"}, "storage", "unknown storage"),
        (
            {"agents": {"a": DEMO}, "storage": "postgresql://db/x", "checkpointer": {"dir": "c"}},
            "checkpointer.dir",
            "keeps the checkpoints itself",
        ),
        (
            {"agents": {"a": DEMO}, "storage": {"env": "AGENTKEEL_UNSET_XYZ"}},
            "storage.env",
            "not set",
        ),
        (
            {"agents": {"a": DEMO}, "storage": "postgresql://db/x", "sessionDir": "s"},
            "storage",
            "either",
        ),
        ({"agents": {"a": DEMO}, "storage": "memory:", "sessionDir": "s"}, "storage", "either"),
        (
            {"agents": {"a": DEMO}, "server": {"auth": {"apiKeys": {}}}},
            "server.auth",
            "configure apiKeys, jwt or both",
        ),
    ],
)
def test_errors_name_the_key_and_the_file(
    tmp_path: Path, document: object, key: str, words: str
) -> None:
    message = error_for(tmp_path, document)
    assert f": {key}: " in message
    assert words in message


def test_invalid_json_names_the_place(tmp_path: Path) -> None:
    message = error_for(tmp_path, None, raw='{"agents": {,}}')
    assert "invalid JSON at line 1 column 13" in message


def test_a_missing_secret_names_the_variable_never_a_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("E2E_NOT_SET", raising=False)
    secret = {"env": "E2E_NOT_SET"}
    model: dict[str, object] = {"provider": "openai", "model": "m", "apiKey": secret}
    message = error_for(tmp_path, {"agents": {"a": {"model": model}}})
    assert "agents.a.model.apiKey.env" in message and "E2E_NOT_SET" in message
    monkeypatch.setenv("E2E_SET", "sk-super-secret")
    model2 = {"provider": "openai", "model": "m", "apiKeyEnv": "E2E_SET", "temperature": -1}
    message = error_for(tmp_path, {"agents": {"a": {"model": model2}}})
    assert "agents.a.model.temperature" in message and "sk-super-secret" not in message


def test_relative_paths_resolve_against_the_file(tmp_path: Path) -> None:
    folder = tmp_path / "conf"
    folder.mkdir()
    path = folder / "framework.json"
    document: dict[str, object] = {
        "agents": {"demo": DEMO},
        "sessionDir": "./data/sessions",
        "checkpointer": {"dir": "data/checkpoints"},
        "retention": {"events": "30m", "runs": "30d"},
    }
    path.write_text(json.dumps(document), encoding="utf-8")
    framework = load_framework(path)
    assert isinstance(framework.storage, LocalFileStorage)
    assert framework.storage.directory == folder / "data" / "sessions"
    assert isinstance(framework.checkpointer, FileCheckpointer)
    assert framework.checkpointer.directory == folder / "data" / "checkpoints"
    assert framework.retention.events == 1800 and framework.retention.runs == 30 * 86400
    in_memory = load_framework({"agents": {"demo": DEMO}, "storage": "memory:"})
    assert isinstance(in_memory.storage, InMemoryStorage)
    assert parse_duration(None) is None and parse_duration("500ms") == 0.5


def test_the_transcript_can_be_turned_off() -> None:
    assert load_framework({"agents": {"a": DEMO}}).server.transcript is True
    off = load_framework({"agents": {"a": DEMO}, "server": {"transcript": False}})
    assert off.server.transcript is False


def test_the_example_framework_loads() -> None:
    framework = load_framework(EXAMPLE)
    demo = framework.definitions["demo"]
    assert "delete_file" in demo.skills
    assert isinstance(framework.storage, LocalFileStorage)
    assert framework.storage.directory == EXAMPLE.parent / "data" / "sessions"
    agent = demo.factory("ctx-example")
    assert agent is not demo.factory("ctx-example")
    assert isinstance(agent, Agent) and agent.approve == frozenset({"delete_file"})
    assert framework.definitions["helpdesk"].kind == "swarm"


def test_serve_refuses_to_start_with_a_clear_message(tmp_path: Path) -> None:
    path = tmp_path / "framework.json"
    path.write_text(json.dumps({"agents": {"a": {**DEMO, "colour": "red"}}}), encoding="utf-8")
    code = "import sys; from agentkeel.server.serve import serve_command; "
    code += "sys.exit(serve_command(sys.argv[1:]))"
    done = subprocess.run(
        [sys.executable, "-c", code, str(path), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(TESTS_DIR), "PATH": ""},
    )
    assert done.returncode == 1
    assert done.stderr.strip() == f"agentkeel: error: {path}: agents.a.colour: unknown key"
    assert done.stdout == ""
