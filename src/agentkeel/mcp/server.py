"""MCPServer: the tools of a Model Context Protocol server, as a toolset of an Agent.

Lifetimes (the server owns the memory; see docs/mcp.md):

- by default one connection serves every context that uses this object: `agentkeel
  serve` opens it in the server's lifespan (and refuses to start when it cannot) and
  closes it at shutdown; in code, ``async with server:`` does the same;
- with ``per_context=True`` each context gets a connection of its own, opened on its
  first run and closed when the context leaves the cache (`release`);
- a connection that died is replaced on a later call: the first attempt right away, then
  with a growing pause (0.5 s, 1 s, 2 s ... up to 30 s) while it keeps failing. Calls in
  the pause get an error result, which the model sees; the run goes on.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from types import TracebackType
from typing import Any, cast

import anyio
import mcp_types as types
from anyio.abc import TaskGroup

from agentkeel.context import RunContext
from agentkeel.errors import ConfigurationError
from agentkeel.interrupts import interrupt
from agentkeel.mcp.config import (
    SERVER_NAME,
    EnvValue,
    HttpTransport,
    IdentityMode,
    MCPOptions,
    StdioTransport,
    Transport,
)
from agentkeel.mcp.connection import Call, CallFailedError, MCPConnection, ProgressHandler
from agentkeel.mcp.elicitation import NO_ANSWER, given_answer
from agentkeel.mcp.restarts import RestartBackoff
from agentkeel.mcp.tool import build_tool, convert_result, tool_name
from agentkeel.messages import JSONObject, JSONValue
from agentkeel.tools.decorator import Tool

__all__ = ["MCPServer"]

logger = logging.getLogger(__name__)

_Key = tuple[str | None, str | None]
"""(principal, context id): whose connection, for a per-context server."""
_SHARED: _Key = (None, None)
META_CONTEXT = "agentkeel/contextId"
META_PRINCIPAL = "agentkeel/principal"
HEADER_CONTEXT = "X-Agentkeel-Context-Id"
HEADER_PRINCIPAL = "X-Agentkeel-Principal"


class MCPServer:
    """An MCP server whose tools an Agent may call like its own.

    Build one with `MCPServer.stdio` or `MCPServer.http` and pass it in the Agent's
    ``tools``. Open it with ``async with server:`` before running agents on it (the
    served framework does this in its lifespan).

    Args:
        name: The server's name (``^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$``), used in messages
            and to tell colliding tool names apart.
        transport: How to reach it.
        options: Prefix, allow-list, timeouts, lifetime and identity.
        label: How messages name it (framework.json uses ``"<agent>.mcp.<name>"``).
        on_progress: Told ``(tool, progress, total, message)`` for each progress
            notification (they never reach a client).
    """

    def __init__(
        self,
        name: str,
        transport: Transport,
        options: MCPOptions | None = None,
        *,
        label: str | None = None,
        on_progress: ProgressHandler | None = None,
    ) -> None:
        if not SERVER_NAME.fullmatch(name):
            raise ConfigurationError(f"MCP server name {name!r} must match {SERVER_NAME.pattern}")
        self.options = options or MCPOptions()
        if self.options.identity == "headers" and not (
            self.options.per_context and isinstance(transport, HttpTransport)
        ):
            raise ConfigurationError(
                f"MCP server {name!r}: identity 'headers' needs an HTTP server with per_context "
                "(a shared connection carries no caller); use 'meta' instead"
            )
        self._name = name
        self.transport = transport
        self.label = label or name
        self.on_progress = on_progress
        self._group: TaskGroup | None = None
        self._stack: AsyncExitStack | None = None
        self._connections: dict[_Key, MCPConnection] = {}
        self._failures: dict[_Key, RestartBackoff] = {}
        self._opening = anyio.Lock()
        self._listed: tuple[types.Tool, ...] = ()
        """The last tool list any connection returned (shown while the server is down)."""
        self._parked: dict[tuple[object, ...], list[tuple[MCPConnection, Call]]] = {}

    # -- construction -------------------------------------------------------------------

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        *,
        name: str = "mcp",
        env: Mapping[str, str | EnvValue] | None = None,
        cwd: str | None = None,
        prefix: str = "",
        tools: Sequence[str] | None = None,
        timeout: float | None = 60.0,
        start_timeout: float = 15.0,
        per_context: bool = False,
        identity: IdentityMode = "none",
        on_progress: ProgressHandler | None = None,
    ) -> MCPServer:
        """A server started as a child process (``command args...``), spoken to on stdio."""
        transport = StdioTransport(command=command, args=tuple(args), env=dict(env or {}), cwd=cwd)
        return cls(
            name,
            transport,
            _options(prefix, tools, timeout, start_timeout, per_context, identity),
            on_progress=on_progress,
        )

    @classmethod
    def http(
        cls,
        url: str,
        *,
        name: str = "mcp",
        headers: Mapping[str, str | EnvValue] | None = None,
        prefix: str = "",
        tools: Sequence[str] | None = None,
        timeout: float | None = 60.0,
        start_timeout: float = 15.0,
        per_context: bool = False,
        identity: IdentityMode = "none",
        on_progress: ProgressHandler | None = None,
    ) -> MCPServer:
        """A server reached over streamable HTTP at `url`; `headers` go on every request."""
        transport = HttpTransport(url=url, headers=dict(headers or {}))
        return cls(
            name,
            transport,
            _options(prefix, tools, timeout, start_timeout, per_context, identity),
            on_progress=on_progress,
        )

    @property
    def name(self) -> str:
        """The server's name."""
        return self._name

    def __repr__(self) -> str:
        return f"MCPServer({self._name!r}, {self.transport!r})"

    # -- lifetime -----------------------------------------------------------------------

    async def __aenter__(self) -> MCPServer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def start(self) -> None:
        """Open the server: its task group, and (unless per-context) its connection.

        A per-context server opens a connection once, to list its tools and prove it
        starts, and closes it again.

        Raises:
            ConfigurationError: The server could not start or did not answer in time
                (the message names it).
        """
        if self._group is not None:
            return
        stack = AsyncExitStack()
        self._group = await stack.enter_async_context(anyio.create_task_group())
        self._stack = stack
        try:
            probe = await self._open(_SHARED)
        except CallFailedError as exc:
            await self.close()
            raise ConfigurationError(exc.args[0]) from None
        if self.options.per_context:
            del self._connections[_SHARED]
            await probe.close()

    async def close(self) -> None:
        """Close every connection (stopping stdio servers) and the task group."""
        for connection in list(self._connections.values()):
            await connection.close()
        self._connections.clear()
        self._parked.clear()
        stack, self._stack = self._stack, None
        if self._group is not None:
            self._group.cancel_scope.cancel()
            self._group = None
        if stack is not None:
            await stack.aclose()

    async def release(self, principal: str | None, context_id: str | None) -> None:
        """A context left the cache: close its connection (per-context servers only)."""
        key: _Key = (principal, context_id)
        for parked_key in [k for k in self._parked if k[:2] == key]:
            for _, call in self._parked.pop(parked_key):
                call.scope.cancel()
        if not self.options.per_context:
            return
        connection = self._connections.pop(key, None)
        self._failures.pop(key, None)
        if connection is not None:
            await connection.close()

    @property
    def listed_tools(self) -> dict[str, str]:
        """The tools the server offered last (after the allow-list), name to description."""
        prefix = self.options.prefix
        return {
            tool_name(prefix, item.name): item.description or item.title or item.name
            for item in self._allowed(self._listed)
        }

    async def _open(self, key: _Key) -> MCPConnection:
        async with self._opening:
            current = self._connections.get(key)
            if current is not None and current.alive:
                return current
            failures = self._failures.setdefault(key, RestartBackoff())
            wait = failures.wait_left()
            if wait > 0:
                raise CallFailedError(
                    f"MCP server {self.label!r} is down; the next restart is tried in "
                    f"{math.ceil(wait)} s"
                )
            if self._group is None:
                raise CallFailedError(
                    f"MCP server {self.label!r} is not open; use 'async with server:' "
                    "(agentkeel serve opens it for you)"
                )
            connection = MCPConnection(
                self.label,
                self.transport,
                self.options,
                headers=self._identity_headers(key),
                on_progress=self.on_progress,
            )
            try:
                await connection.open(self._group)
            except CallFailedError:
                failures.failed()
                raise
            self._connections[key] = connection
            self._listed = connection.tools
            return connection

    def _identity_headers(self, key: _Key) -> dict[str, str]:
        if self.options.identity != "headers":
            return {}
        principal, context_id = key
        headers = {}
        if context_id is not None:
            headers[HEADER_CONTEXT] = context_id
        if principal is not None:
            headers[HEADER_PRINCIPAL] = principal
        return headers

    def _key(self, context: RunContext) -> _Key:
        return (context.principal, context.context_id) if self.options.per_context else _SHARED

    async def _connection(self, context: RunContext) -> MCPConnection:
        key = self._key(context)
        current = self._connections.get(key)
        if current is not None and current.alive:
            return current
        if current is not None:
            # the connection died (its process exited, its session ended): count it
            # towards the backoff, and replace it
            del self._connections[key]
            failures = self._failures.setdefault(key, RestartBackoff())
            failures.failed()
            await current.close()
        return await self._open(key)

    # -- the toolset --------------------------------------------------------------------

    async def list_tools(self, context: RunContext) -> Sequence[Tool]:
        """The server's tools for this run (fetched again after a list_changed)."""
        try:
            connection = await self._connection(context)
        except CallFailedError as exc:
            logger.warning("mcp=<%s> | %s; offering the last known tools", self.label, exc)
            return [build_tool(self, item) for item in self._allowed(self._listed)]
        await connection.refresh()
        self._listed = connection.tools
        return [build_tool(self, item) for item in self._allowed(connection.tools)]

    def _allowed(self, listed: Sequence[types.Tool]) -> list[types.Tool]:
        keep = self.options.tools
        return [item for item in listed if keep is None or item.name in keep]

    async def call(self, tool: str, arguments: JSONObject, context: RunContext) -> JSONValue:
        """Call `tool` with `arguments`; the result, or an error the model sees.

        Raises:
            CallFailedError: The server is down, the call failed, or an answer to the
                server's question cannot be delivered any more.
            InterruptRequested: The server asked the user something (elicitation).
        """
        parked_key = (
            context.principal,
            context.context_id,
            context.run_id,
            tool,
            json.dumps(arguments, sort_keys=True),
        )
        resumed = self._unpark(parked_key)
        if resumed is None:
            if given_answer(0) is not NO_ANSWER:
                raise CallFailedError(
                    f"the question that MCP server {self.label!r} asked during this call was "
                    "lost (its connection closed, e.g. in a server restart, before the answer "
                    "arrived); call the tool again to start over"
                )
            connection = await self._connection(context)
            call = connection.start_call(tool, dict(arguments), self._meta(context))
        else:
            connection, call = resumed
            pending = call.elicitation
            answer = given_answer(call.answered)
            if pending is not None and answer is not NO_ANSWER:
                call.answered += 1
                call.elicitation = None
                pending.give(cast(JSONValue, answer))
        parking = False
        try:
            while not call.done.is_set():
                changed = call.changed
                if call.elicitation is not None:
                    parking = True
                    self._parked.setdefault(parked_key, []).append((connection, call))
                    interrupt(call.elicitation.prompt)  # raises: no answer yet
                    parking = False
                await changed.wait()
        finally:
            if not parking and not call.done.is_set():
                call.scope.cancel()  # timed out or cancelled: stop the server's work too
        if call.result is None:
            raise CallFailedError(call.error or f"the call to {tool!r} ended without a result")
        self._failures.pop(self._key(context), None)
        content, is_error = convert_result(call.result)
        if is_error:
            raise CallFailedError(content if isinstance(content, str) else json.dumps(content))
        return content

    def _unpark(self, key: tuple[object, ...]) -> tuple[MCPConnection, Call] | None:
        waiting = self._parked.get(key)
        if not waiting:
            return None
        found = waiting.pop(0)
        if not waiting:
            del self._parked[key]
        return found

    def _meta(self, context: RunContext) -> dict[str, Any] | None:
        if self.options.identity != "meta":
            return None
        meta: dict[str, Any] = {}
        if context.context_id is not None:
            meta[META_CONTEXT] = context.context_id
        if context.principal is not None:
            meta[META_PRINCIPAL] = context.principal
        return meta or None


def _options(
    prefix: str,
    tools: Sequence[str] | None,
    timeout: float | None,
    start_timeout: float,
    per_context: bool,
    identity: IdentityMode,
) -> MCPOptions:
    return MCPOptions(
        prefix=prefix,
        tools=None if tools is None else frozenset(tools),
        timeout=timeout,
        start_timeout=start_timeout,
        per_context=per_context,
        identity=identity,
    )
