"""A real server of the demo and scripted agents, for the OpenAPI and fuzzing tests.

Every folder the server may write to is below ``<root>/data``; the tests check that
nothing appears anywhere else under ``<root>`` (the server's working directory too).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import chdir, contextmanager
from pathlib import Path

from agentkeel.server import create_app
from e2e import SECRET_INPUT, SECRET_OUTPUT, TOOL_LOG, serve_in_thread

API_KEY = "fuzz-key-0123456789abcdef0123"
"""The server's one API key: a secret that must never come back in a body."""
KEY_ENV = "AGENTKEEL_FUZZ_API_KEY"
SECRETS = (API_KEY, SECRET_INPUT, SECRET_OUTPUT)
TRACE_MARKERS = ("Traceback (most recent call last)", 'File "/', "site-packages/")


def framework(root: Path, *, auth: bool = True) -> dict[str, object]:
    """The framework document: the demo agent, the scripted agent, file storage, memory."""
    data = root / "data"
    document: dict[str, object] = {
        "agents": {
            "demo": {
                "description": "the offline demo agent",
                "model": {"provider": "demo"},
                "tools": [
                    "agentkeel.tools.builtin:current_time",
                    "agentkeel.tools.builtin:read_state",
                    "agentkeel.tools.builtin:write_state",
                    "agentkeel.tools:remember",
                    "agentkeel.tools:recall",
                    "agentkeel.tools.demo:delete_file",
                    "agentkeel.tools.demo:ask_user",
                ],
                "approve": ["delete_file"],
            },
            "scripted": {"factory": "e2e:scripted_agent"},
        },
        "sessionDir": str(data / "sessions"),
        "checkpointer": {"dir": str(data / "checkpoints")},
        "memory": {"store": "file", "embeddings": "offline"},
        "server": {"heartbeatSeconds": 1, "shutdownTimeoutSeconds": 5, "maxBodyBytes": 65536},
    }
    if auth:
        os.environ[KEY_ENV] = API_KEY
        keys = {"apiKeys": {"fuzz": {"env": KEY_ENV}}}
        document["server"] = {**document["server"], "auth": keys}  # type: ignore[dict-item]
    return document


def written_outside(root: Path) -> list[str]:
    """Files below `root` that are not below its ``data`` folder (nor the framework.json)."""
    allowed = {root / "framework.json", root / "data"}
    return sorted(
        str(path.relative_to(root))
        for path in root.rglob("*")
        if path.is_file() and not any(path == a or a in path.parents for a in allowed)
    )


@contextmanager
def served(root: Path, *, auth: bool = True) -> Iterator[str]:
    """Serve the fuzz framework from `root` (also the working directory) on loopback."""
    path = root / "framework.json"
    path.write_text(json.dumps(framework(root, auth=auth)), encoding="utf-8")
    (root / "data").mkdir(exist_ok=True)
    previous = os.environ.get(TOOL_LOG)
    os.environ[TOOL_LOG] = str(root / "data" / "tool-runs.log")
    try:
        with chdir(root):
            app = create_app(path)
            with serve_in_thread(app) as url:
                yield url
    finally:
        if previous is None:
            os.environ.pop(TOOL_LOG, None)
        else:
            os.environ[TOOL_LOG] = previous


def leaks(body: str) -> list[str]:
    """What a response body must never hold: a secret, or a stack trace."""
    return [marker for marker in (*SECRETS, *TRACE_MARKERS) if marker in body]
