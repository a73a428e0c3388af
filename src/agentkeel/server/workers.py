"""``agentkeel serve --workers N``: N server processes on one host, sharing one port.

The parent binds the socket once (so port 0 still means one port, printed once) and
starts N children that each serve the same listening socket, inherited by file
descriptor: the kernel hands each new connection to whichever child accepts it first.
The children are ordinary replicas (SPEC 11): they share nothing in memory, so the
framework must name a shared storage and coordination, and a request may reach any
of them.

The parent forwards SIGTERM and SIGINT to the children and waits for their graceful
shutdown; a child that dies on its own is started again (at most once a second), so
a crashed worker's port share comes back while the others serve.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from types import FrameType

from agentkeel.errors import ConfigurationError
from agentkeel.framework import Framework

__all__ = ["serve_workers"]

_RESPAWN_SECONDS = 1.0


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host.strip("[]"), port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def serve_workers(
    path: str, framework: Framework, workers: int, *, host: str | None, port: int | None
) -> None:
    """Bind once, run `workers` children on the socket until SIGTERM/SIGINT.

    Raises:
        ConfigurationError: The framework keeps contexts in one process (no shared
            coordination), so several processes would run one context twice.
    """
    if framework.coordination is None:
        raise ConfigurationError(
            f"{framework.source}: --workers {workers} runs {workers} server processes, which "
            "must share their contexts: set 'storage' to 'postgresql://…' and "
            "'coordination' to 'redis://…' or 'postgresql://…'"
        )
    bind_host = framework.server.host if host is None else host
    bind_port = framework.server.port if port is None else port
    sock = _bind(bind_host, bind_port)
    real_port = sock.getsockname()[1]
    command = [sys.executable, "-m", "agentkeel.server.workers", "--fd", str(sock.fileno()), path]
    children: list[subprocess.Popen[bytes]] = []
    stopping = False

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(command, pass_fds=(sock.fileno(),))

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        del frame
        stopping = True
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM if signum == signal.SIGINT else signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    children.extend(start() for _ in range(workers))
    shown = f"[{bind_host}]" if ":" in bind_host else bind_host
    names = ", ".join(framework.definitions)
    print(
        f"agentkeel: serving {names} on http://{shown}:{real_port} ({workers} workers)",
        flush=True,
    )
    try:
        _supervise(children, start, lambda: stopping)
    finally:
        deadline = time.monotonic() + framework.server.shutdown_timeout_seconds + 10
        for child in children:
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        sock.close()


def _supervise(
    children: list[subprocess.Popen[bytes]],
    start: Callable[[], subprocess.Popen[bytes]],
    stopping: Callable[[], bool],
) -> None:
    last_start = 0.0
    while not stopping():
        time.sleep(0.2)
        for index, child in enumerate(children):
            if child.poll() is None or stopping():
                continue
            if time.monotonic() - last_start < _RESPAWN_SECONDS:
                continue
            print(
                f"agentkeel: worker {child.pid} exited ({child.returncode}); starting another",
                file=sys.stderr,
                flush=True,
            )
            children[index] = start()
            last_start = time.monotonic()


def _child(argv: Sequence[str]) -> int:
    """One worker: serve the framework on the inherited socket until SIGTERM."""
    import asyncio

    import uvicorn

    from agentkeel.framework import load_framework
    from agentkeel.server.app import create_app

    parser = argparse.ArgumentParser(prog="agentkeel-worker")
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("framework")
    args = parser.parse_args(argv)
    framework = load_framework(args.framework)
    sock = socket.socket(fileno=args.fd)
    config = uvicorn.Config(
        create_app(framework),
        lifespan="on",
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=max(1, int(framework.server.shutdown_timeout_seconds)),
    )
    server = uvicorn.Server(config)
    asyncio.run(server.serve(sockets=[sock]))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(_child(sys.argv[1:]))
