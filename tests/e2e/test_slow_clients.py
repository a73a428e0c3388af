"""Slow and hostile clients over raw sockets: a reader that never reads, a body that
trickles in, a flood of reconnects. Each costs the server a bounded amount.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import httpx
import pytest

from agentkeel.framework import LimitSettings, ServerSettings
from e2e import stream_turn
from e2e.conftest import StartServer

pytestmark = pytest.mark.anyio

SEND = "/agents/scripted/send"
TOKENS = 60_000
"""Token frames of the big turn: megabytes of SSE, more than any socket buffer holds."""


def settings(limits: LimitSettings) -> ServerSettings:
    return ServerSettings(heartbeat_seconds=1.0, shutdown_timeout_seconds=5, limits=limits)


def connect(url: str, *, receive_buffer: int | None = None) -> socket.socket:
    parts = urlsplit(url)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if receive_buffer is not None:  # a small window: the server's buffers fill sooner
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.connect((parts.hostname or "127.0.0.1", parts.port or 80))
    return sock


def request_head(path: str, length: int) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()


def read_all(sock: socket.socket, timeout: float) -> bytes:
    """Read until the server closes the connection (bounded by `timeout`)."""
    sock.settimeout(timeout)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, TimeoutError):
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


async def refusals(client: httpx.AsyncClient, reason: str) -> float:
    wanted = f'agentkeel_limit_refusals_total{{reason="{reason}"}} '
    for line in (await client.get("/metrics")).text.splitlines():
        if line.startswith(wanted):
            return float(line.split()[1])
    return 0.0


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


async def test_a_reader_that_stops_reading_is_dropped_and_its_run_commits(
    start_server: StartServer,
) -> None:
    with start_server(settings=settings(LimitSettings(stream_stall_seconds=0.5))) as url:
        body = json.dumps({"message": f"tokens {TOKENS}", "contextId": "stalled"}).encode()
        sock = connect(url, receive_buffer=4096)
        try:
            sock.sendall(request_head("/agents/scripted/stream", len(body)) + body)
            async with httpx.AsyncClient(base_url=url, timeout=60) as client:
                with anyio.fail_after(60):  # the reader never read: it was dropped
                    while await refusals(client, "stream_stalled") < 1:
                        await anyio.sleep(0.05)
                # the run went on: the next turn of the context queues behind it and
                # finds it in the history
                history = {"message": "history", "contextId": "stalled"}
                answered = await client.post(SEND, json=history)
                assert answered.status_code == 200
                assert answered.json()["text"] == f"tokens {TOKENS}|history"
            received = read_all(sock, timeout=10)
        finally:
            sock.close()
        assert received.startswith(b"HTTP/1.1 200")
        assert b'"done":true' not in received, "the dropped reader got less than the run"


async def test_a_body_that_trickles_in_is_cut_off(start_server: StartServer) -> None:
    with start_server(settings=settings(LimitSettings(body_timeout_seconds=0.5))) as url:
        body = json.dumps({"message": "hello", "contextId": "slow-body"}).encode()
        sock = connect(url)
        stop = threading.Event()

        def trickle() -> None:  # one byte every 100 ms: it would take seconds to finish
            for byte in body:
                if stop.wait(0.1):
                    return
                try:
                    sock.sendall(bytes([byte]))
                except OSError:
                    return

        sender = threading.Thread(target=trickle)
        try:
            sock.sendall(request_head(SEND, len(body)))
            sender.start()
            received = read_all(sock, timeout=20)
        finally:
            stop.set()
            sender.join()
            sock.close()
        head, _, payload = received.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 408"), received[:200]
        assert json.loads(payload)["error"]["code"] == "request_timeout"
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            assert await refusals(client, "body_timeout") == 1
            gone = await client.post(SEND, json={"message": "history", "contextId": "slow-body"})
            assert gone.json()["text"] == "history", "the cut-off turn never ran"


async def test_a_body_that_stops_is_cut_off(start_server: StartServer) -> None:
    with start_server(settings=settings(LimitSettings(body_timeout_seconds=0.5))) as url:
        sock = connect(url)
        try:
            sock.sendall(request_head(SEND, 100) + b'{"message": ')
            received = read_all(sock, timeout=20)
        finally:
            sock.close()
        assert received.startswith(b"HTTP/1.1 408"), received[:200]


async def test_a_flood_of_reconnects_costs_a_bounded_amount(
    start_server: StartServer, tool_log: Path
) -> None:
    del tool_log
    with start_server(settings=settings(LimitSettings(streams_per_principal=8))) as url:
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            frames = await stream_turn(
                client, "scripted", {"message": "tokens 50", "contextId": "replayed"}
            )
            last = frames[-1].id
            before = open_fds()
            statuses: list[int] = []
            replayed: list[int] = []

            async def again() -> None:
                url_path = "/agents/scripted/contexts/replayed/stream"
                headers = {"Last-Event-ID": str(last - 3)}
                async with client.stream("GET", url_path, headers=headers) as response:
                    statuses.append(response.status_code)
                    body = await response.aread()
                    if response.status_code == 200:
                        replayed.append(body.count(b"\nid: ") + body.startswith(b"id: "))

            async with anyio.create_task_group() as group:
                for _ in range(300):
                    group.start_soon(again)
        assert set(statuses) <= {200, 429}
        assert statuses.count(200) >= 8
        assert set(replayed) == {3}, "each reconnect replays only the frames after its id"
        with anyio.fail_after(10):  # the server closes its ends of the flood's connections
            while open_fds() > before + 16:
                await anyio.sleep(0.05)
