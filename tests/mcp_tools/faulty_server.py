"""A Python MCP server on the SDK's own server (`MCPServer`, formerly FastMCP), for faults.

Run as ``python faulty_server.py [mode]``:

- ``serve`` (default): stdio, with the tools below;
- ``http PORT``: the same over streamable HTTP on 127.0.0.1:PORT;
- ``silent``: a process that reads stdin and never answers, not even ``initialize``;
- ``exit``: a process that exits at once.

Tools: ``whoami`` (the process id and the request's ``_meta``), ``slow`` (sleeps),
``crash`` (the process exits in the middle of the call), ``grow`` (adds a tool and
announces the new list), ``fail`` (an ``isError`` result).
"""

from __future__ import annotations

import json
import os
import sys
import time

import anyio
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("faulty")


@server.tool()
def whoami(ctx: Context) -> str:
    """Say which process answers, and the _meta (and HTTP headers) the call carried."""
    meta = ctx.request_context.meta
    headers = {k.lower(): v for k, v in (ctx.headers or {}).items()}
    return json.dumps({"pid": os.getpid(), "meta": dict(meta) if meta else {}, "headers": headers})


@server.tool()
async def slow(seconds: float) -> str:
    """Sleep `seconds`, then answer."""
    await anyio.sleep(seconds)
    return f"slept {seconds}"


@server.tool()
async def crash(delay: float = 0.2) -> str:
    """Exit the whole process in the middle of the call."""
    await anyio.sleep(delay)
    os._exit(3)


@server.tool()
async def grow(ctx: Context) -> str:
    """Add the tool ``extra`` and tell the client that the list changed."""

    def extra() -> str:
        """A tool that appeared later."""
        return "extra here"

    server.add_tool(extra, name="extra")
    await ctx.notify_tools_changed()
    return "grown"


@server.tool()
def fail() -> str:
    """Always fail."""
    raise ValueError("this tool always fails")


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "serve"
    if mode == "silent":
        for _ in sys.stdin:
            pass
        time.sleep(3600)
    elif mode == "exit":
        sys.exit(2)
    elif mode == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
