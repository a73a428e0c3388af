"""Helpers for the client tests: a real agentkeel server and a proxy that cuts connections.

The server is the real one, ``agentkeel serve`` in a subprocess on a free loopback port,
started with the end-to-end suite's `ServerProcess`. Its framework serves the offline
demo agent, plus a factory-built slow copy for the tests that need a turn still running.
"""

from __future__ import annotations

import json
import re
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from e2e import ServerProcess, write_framework

DEMO_TOOLS = [
    "agentkeel.tools.builtin:current_time",
    "agentkeel.tools.builtin:read_state",
    "agentkeel.tools.builtin:write_state",
    "agentkeel.tools.demo:delete_file",
    "agentkeel.tools.demo:ask_user",
]
SLOW_FACTORY = """
from agentkeel.tools.demo import demo_agent


def make(context_id):
    return demo_agent(token_delay=0.05)
"""


def free_port() -> int:
    """A loopback port nobody listens on (for the unreachable-server tests)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class Served:
    """A running server: its URL and the folder that holds its sessions."""

    url: str
    sessions: Path

    def runs(self, context_id: str, agent: str = "demo") -> list[str]:
        """The ids of the runs the server stored for a context (SPEC section 8: runs.jsonl)."""
        path = self.sessions / f"{agent}:{context_id}" / "runs.jsonl"
        lines = path.read_text().splitlines() if path.exists() else []
        return list(dict.fromkeys(json.loads(line)["run_id"] for line in lines))

    def run_records(self, context_id: str, agent: str = "demo") -> list[dict[str, object]]:
        """The last stored record of each run of a context, in the order they started."""
        path = self.sessions / f"{agent}:{context_id}" / "runs.jsonl"
        lines = path.read_text().splitlines() if path.exists() else []
        records: dict[str, dict[str, object]] = {}
        for line in lines:
            record = json.loads(line)
            records[record["run_id"]] = record
        return list(records.values())

    def session_exists(self, context_id: str, agent: str = "demo") -> bool:
        return (self.sessions / f"{agent}:{context_id}").exists()


@contextmanager
def serve(folder: Path, *, concurrency: str = "queue") -> Iterator[Served]:
    """Run ``agentkeel serve`` on the demo framework until the block ends."""
    (folder / "slow_agents.py").write_text(SLOW_FACTORY, encoding="utf-8")
    framework = {
        "agents": {
            "demo": {
                "description": "The offline demo agent.",
                "model": {"provider": "demo"},
                "tools": DEMO_TOOLS,
                "approve": ["delete_file"],
            },
            "slow": {"factory": "slow_agents:make", "description": "The demo agent, slowly."},
        },
        "sessionDir": "./sessions",
        "checkpointer": {"dir": "./checkpoints"},
        "server": {"concurrency": concurrency},
    }
    process = ServerProcess(write_framework(folder, framework))
    url = process.start()
    try:
        yield Served(url=url, sessions=folder / "sessions")
    finally:
        process.stop()


# -- a TCP proxy that drops connections on purpose ------------------------------------------

Cut = Callable[[bytes], "int | None"]
"""Given the response bytes received so far, the offset to cut the connection at (None:
keep going)."""


def at_response_start(received: bytes) -> int | None:
    """Drop the connection as soon as the server starts answering: nothing reaches the client."""
    return 0


def in_frame(number: int) -> Cut:
    """Drop the connection in the middle of the `number`-th SSE frame."""

    def cut(received: bytes) -> int | None:
        starts = [m.start() for m in re.finditer(rb"\nid: \d+\n", received)]
        if len(starts) < number:
            return None
        return starts[number - 1] + 12

    return cut


class CuttingProxy:
    """Forwards loopback connections to `upstream_port`; connection *i* is cut by `cuts[i]`.

    Every byte a client sent is kept in `requests` (one entry per connection), so a test
    can check the headers the client used, e.g. a reused ``Idempotency-Key``.
    """

    def __init__(self, upstream_port: int, cuts: list[Cut | None]) -> None:
        self.upstream_port = upstream_port
        self.cuts = cuts
        self.requests: list[bytearray] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._listener.close()

    def headers(self, name: str) -> list[str]:
        """Every value of request header `name`, over all connections, in order."""
        pattern = re.compile(rb"^" + name.lower().encode() + rb": *(.*?)\r$", re.I | re.M)
        with self._lock:
            return [m.group(1).decode() for data in self.requests for m in pattern.finditer(data)]

    def request_lines(self) -> list[str]:
        pattern = re.compile(rb"^(GET|POST|DELETE) (\S+) HTTP/1.1\r$", re.M)
        with self._lock:
            return [
                f"{m.group(1).decode()} {m.group(2).decode()}"
                for data in self.requests
                for m in pattern.finditer(data)
            ]

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                index = len(self.requests)
                self.requests.append(bytearray())
            cut = self.cuts[index] if index < len(self.cuts) else None
            threading.Thread(target=self._serve, args=(client, index, cut), daemon=True).start()

    def _serve(self, client: socket.socket, index: int, cut: Cut | None) -> None:
        upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
        threading.Thread(
            target=self._forward_requests, args=(client, upstream, index), daemon=True
        ).start()
        received = b""
        try:
            while chunk := upstream.recv(65536):
                if cut is not None:
                    before = len(received)
                    received += chunk
                    offset = cut(received)
                    if offset is not None:
                        client.sendall(received[before:offset] if offset > before else b"")
                        return
                client.sendall(chunk)
        except OSError:
            pass
        finally:
            for sock in (client, upstream):
                with suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def _forward_requests(self, client: socket.socket, upstream: socket.socket, index: int) -> None:
        try:
            while chunk := client.recv(65536):
                with self._lock:
                    self.requests[index].extend(chunk)
                upstream.sendall(chunk)
        except OSError:
            pass
