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
PYTHON = sys.executable
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
def _listening(command: list[str], env: dict[str, str], port: int, what: str) -> Iterator[None]:
    """Run `command` until the test is done, once it listens on `port`."""
    process = subprocess.Popen(
        command, env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"{what} did not start listening on port {port}")
                time.sleep(0.05)
        yield
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def everything_over_http() -> Iterator[str]:
    """server-everything's streamable HTTP transport on a free loopback port; its URL."""
    port = free_port()
    command = ["node", node_server(EVERYTHING), "streamableHttp"]
    with _listening(command, {"PORT": str(port)}, port, "server-everything (HTTP)"):
        yield f"http://127.0.0.1:{port}/mcp"


@contextmanager
def faulty_over_http() -> Iterator[str]:
    """The Python fault server over streamable HTTP on a free loopback port; its URL."""
    port = free_port()
    with _listening([sys.executable, *faulty_args("http"), str(port)], {}, port, "faulty (HTTP)"):
        yield f"http://127.0.0.1:{port}/mcp"


def faulty_args(mode: str = "serve") -> list[str]:
    """Command-line arguments that start the Python fault server in `mode`."""
    return [str(FAULTY), mode]
