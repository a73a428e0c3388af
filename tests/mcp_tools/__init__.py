"""Helpers of the MCP suite: where the reference servers are, and how to start them."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SERVERS = HERE / "servers"
FAULTY = HERE / "faulty_server.py"
EVERYTHING = SERVERS / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist"
FILESYSTEM = SERVERS / "node_modules" / "@modelcontextprotocol" / "server-filesystem" / "dist"


def node_server(folder: Path) -> str:
    """The entry script of an installed reference server; fails clearly when absent."""
    script = folder / "index.js"
    if not script.is_file():
        pytest.fail(
            f"{script} is missing: the reference MCP servers are installed by `make test` "
            f"(or `npm ci` in {SERVERS})"
        )
    return str(script)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def everything_over_http() -> Iterator[str]:
    """server-everything's streamable HTTP transport on a free loopback port; its URL."""
    port = free_port()
    process = subprocess.Popen(
        ["node", node_server(EVERYTHING), "streamableHttp"],
        env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                if process.poll() is not None:
                    pytest.fail("server-everything (streamable HTTP) exited at start")
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def faulty_args(mode: str = "serve") -> list[str]:
    """Command-line arguments that start the Python fault server in `mode`."""
    return [str(FAULTY), mode]


PYTHON = sys.executable
