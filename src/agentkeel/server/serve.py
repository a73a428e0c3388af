"""`serve_framework` and the ``agentkeel serve`` command: uvicorn, one process by default.

One process, unless ``--workers N`` asks for more (`agentkeel.server.workers`): by
default a context's Agent, its turn line and its live stream live in one process; N
processes share them through the framework's storage and coordination (SPEC 11). The
URL is printed once the socket listens, with the real port when port 0 asked for any
free one. Binding anywhere but loopback without ``server.auth`` prints a warning, as
nothing then stands between the network and the agents.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import sys
from collections.abc import Sequence
from typing import TextIO

import uvicorn
from starlette.types import ASGIApp

from agentkeel.errors import AgentkeelError, ConfigurationError
from agentkeel.framework import Framework, load_framework
from agentkeel.server.app import FrameworkSource, create_app

__all__ = [
    "add_serve_arguments",
    "check_storage",
    "run_app",
    "run_serve",
    "serve_command",
    "serve_framework",
]


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def run_app(
    app: ASGIApp,
    framework: Framework,
    *,
    host: str | None = None,
    port: int | None = None,
    out: TextIO | None = None,
) -> None:
    """Serve `app` with uvicorn until SIGINT/SIGTERM, then shut down gracefully.

    Args:
        app: The ASGI app (from `create_app`).
        framework: Its framework, for the server settings.
        host: Overrides ``server.host``.
        port: Overrides ``server.port`` (0 picks a free port).
        out: Where the "serving on" line goes (default stdout).
    """
    settings = framework.server
    bind_host = settings.host if host is None else host
    bind_port = settings.port if port is None else port
    stream = sys.stdout if out is None else out
    if not _is_loopback(bind_host) and settings.auth is None:
        print(
            f"agentkeel: warning: listening on {bind_host} without authentication; anyone "
            "who can reach this address can talk to the agents and read their conversations",
            file=sys.stderr,
            flush=True,
        )
    config = uvicorn.Config(
        app,
        host=bind_host,
        port=bind_port,
        workers=1,
        lifespan="on",
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=max(1, int(settings.shutdown_timeout_seconds)),
    )
    server = uvicorn.Server(config)

    async def announce() -> None:
        while not server.started:
            if server.should_exit:
                return
            await asyncio.sleep(0.01)
        sockets = [sock for listener in server.servers for sock in (listener.sockets or ())]
        real_port = sockets[0].getsockname()[1] if sockets else bind_port
        shown = f"[{bind_host}]" if ":" in bind_host else bind_host
        names = ", ".join(framework.definitions)
        print(f"agentkeel: serving {names} on http://{shown}:{real_port}", file=stream, flush=True)

    async def main() -> None:
        watcher = asyncio.ensure_future(announce())
        try:
            await server.serve()
        finally:
            watcher.cancel()

    asyncio.run(main())
    if not server.started:
        raise AgentkeelError(f"the server could not listen on {bind_host}:{bind_port}")


def serve_framework(
    source: FrameworkSource, *, host: str | None = None, port: int | None = None
) -> None:
    """Serve every agent of a framework.json (or a Framework) until stopped.

    Args:
        source: A framework.json path, its parsed content, or a Framework.
        host: Overrides ``server.host`` (default 127.0.0.1).
        port: Overrides ``server.port`` (default 8000).

    Raises:
        ConfigurationError: The framework is invalid (naming the key and the file).
    """
    framework = source if isinstance(source, Framework) else load_framework(source)
    asyncio.run(check_storage(framework))
    run_app(create_app(framework), framework, host=host, port=port)


async def check_storage(framework: Framework) -> None:
    """Open and close the storage once, before serving: migrate, and fail fast.

    An unreachable database then ends ``agentkeel serve`` with one line naming
    ``storage`` (and never its password) rather than a lifespan traceback. The app's
    lifespan opens the storage again, on the loop that serves.
    """
    await framework.storage.open()
    await framework.storage.close()
    if framework.memory is not None:
        await framework.memory.open()
        await framework.memory.close()


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``serve``'s arguments on `parser` (for the ``agentkeel`` command)."""
    parser.add_argument("framework", help="the framework.json to serve")
    parser.add_argument("--host", default=None, help="bind address (default: server.host)")
    parser.add_argument("--port", type=int, default=None, help="port (default: server.port)")
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="server processes sharing the port (N > 1 needs shared storage and coordination)",
    )


def run_serve(args: argparse.Namespace) -> int:
    """Run ``agentkeel serve`` from parsed arguments; returns the exit code.

    Raises:
        AgentkeelError: The framework is invalid or the address cannot be bound.
    """
    workers = getattr(args, "workers", 1)
    if workers < 1:
        raise ConfigurationError(f"--workers must be at least 1, not {workers}")
    if workers == 1:
        serve_framework(args.framework, host=args.host, port=args.port)
        return 0
    from agentkeel.server.workers import serve_workers

    framework = load_framework(args.framework)
    asyncio.run(check_storage(framework))
    serve_workers(args.framework, framework, workers, host=args.host, port=args.port)
    return 0


def serve_command(argv: Sequence[str] | None = None) -> int:
    """``agentkeel serve framework.json [--host H] [--port P] [--workers N]``; the exit code.

    An invalid framework ends with a one-line message naming the key and the file on
    stderr and exit code 1, never a stack trace.
    """
    parser = argparse.ArgumentParser(
        prog="agentkeel serve", description="Serve the agents of a framework.json."
    )
    add_serve_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run_serve(args)
    except AgentkeelError as exc:
        print(f"agentkeel: error: {exc.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(serve_command())
