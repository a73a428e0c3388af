"""One live MCP session: opened, listed, called, and told apart from a dead one.

The SDK's `Client` must be entered and left in the same task, so each connection runs a
small host task (in a task group that `MCPServer` owns) that enters the client, lists
the tools, reports that it is ready and waits to be closed. A call runs in a task of its
own in the same group, so that a call waiting for a person (an MCP elicitation) can
outlive the tool invocation that started it: the run suspends, and the resumed
invocation picks the same call up again (see `agentkeel.mcp.elicitation`).

A connection whose server went away (its process died, its HTTP endpoint closed the
session) is marked dead by the first call that sees it; `MCPServer` opens a new one on a
later call.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, cast

import anyio
import mcp_types as types
from anyio.abc import TaskGroup, TaskStatus
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import CONNECTION_CLOSED
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from agentkeel.mcp.config import HttpTransport, MCPOptions, Transport, resolve_values
from agentkeel.mcp.elicitation import Elicitation

__all__ = ["CallFailedError", "MCPConnection", "ProgressHandler"]

logger = logging.getLogger(__name__)

ProgressHandler = Callable[[str, float, float | None, str | None], Awaitable[None] | None]
"""Told ``(tool, progress, total, message)`` for each progress notification of a call."""


class CallFailedError(Exception):
    """A call did not produce a result; the message is what the model is told."""


@dataclass(eq=False, slots=True)
class Call:
    """One tools/call in flight, possibly waiting on a person."""

    tool: str
    done: anyio.Event = field(default_factory=anyio.Event)
    changed: anyio.Event = field(default_factory=anyio.Event)
    result: types.CallToolResult | None = None
    error: str | None = None
    elicitation: Elicitation | None = None
    """The server's pending question, while it waits for an answer."""
    answered: int = 0
    """How many questions of this call were answered already."""
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)

    def wake(self) -> None:
        """Tell the invocation waiting on this call that something happened."""
        changed, self.changed = self.changed, anyio.Event()
        changed.set()


class MCPConnection:
    """A session with one MCP server.

    Args:
        label: ``"<definition>/<server>"`` (or the server's name), for messages.
        transport: How to reach the server.
        options: Timeouts and policy.
        headers: Extra HTTP headers for this connection (the caller's identity).
        on_progress: Told of each progress notification.
    """

    def __init__(
        self,
        label: str,
        transport: Transport,
        options: MCPOptions,
        *,
        headers: dict[str, str] | None = None,
        on_progress: ProgressHandler | None = None,
    ) -> None:
        self.label = label
        self.transport = transport
        self.options = options
        self.headers = headers or {}
        self.on_progress = on_progress
        self.tools: tuple[types.Tool, ...] = ()
        self.stale = False
        """The server announced a new tool list; it is fetched before the next run."""
        self.alive = False
        self.calls: list[Call] = []
        self._client: Client | None = None
        self._group: TaskGroup | None = None
        self._closing = anyio.Event()
        self._stopped = anyio.Event()

    # -- lifetime -----------------------------------------------------------------------

    async def open(self, group: TaskGroup) -> None:
        """Start the server and list its tools, within ``start_timeout`` seconds.

        Raises:
            CallFailedError: It could not start, or did not answer in time (the message
                says which).
        """
        self._group = group
        try:
            with anyio.fail_after(self.options.start_timeout):
                await group.start(self._host)
        except TimeoutError:
            raise CallFailedError(
                f"MCP server {self.label!r} did not answer the handshake and the tool listing "
                f"within {self.options.start_timeout} seconds"
            ) from None
        except Exception as exc:
            raise CallFailedError(
                f"MCP server {self.label!r} could not start: {_describe(exc)}"
            ) from None

    async def close(self) -> None:
        """End the session (and the server's process, for stdio); waits until it is down."""
        for call in list(self.calls):
            call.scope.cancel()
        self._closing.set()
        if self.alive or self._client is not None:
            with anyio.move_on_after(10):
                await self._stopped.wait()

    async def _host(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        started = False
        try:
            async with self._connect() as client:
                self._client = client
                await self._list()
                async with anyio.create_task_group() as group:
                    if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                        await group.start(self._listen, client)
                    self.alive = True
                    started = True
                    task_status.started()
                    await self._closing.wait()
                    group.cancel_scope.cancel()
        except Exception as exc:
            if not started:
                raise
            logger.warning("mcp=<%s> | the session ended: %s", self.label, _describe(exc))
        finally:
            self.alive = False
            self._client = None
            self._stopped.set()
            for call in list(self.calls):
                call.scope.cancel()

    @asynccontextmanager
    async def _connect(self) -> AsyncIterator[Client]:
        transport = self.transport
        common: dict[str, Any] = {
            "message_handler": self._on_message,
            "elicitation_callback": self._on_elicitation,
            "cache": None,
        }
        if isinstance(transport, HttpTransport):
            headers = resolve_values(transport.headers, f"MCP server {self.label!r}: header")
            # the SDK leaves a client it was given open: this one closes with the session
            async with create_mcp_http_client(headers={**headers, **self.headers}) as http:
                target = streamable_http_client(transport.url, http_client=http)
                async with Client(target, **common) as client:
                    yield client
            return
        env = resolve_values(transport.env, f"MCP server {self.label!r}: env")
        params = StdioServerParameters(
            command=transport.command, args=list(transport.args), env=env, cwd=transport.cwd
        )
        async with Client(stdio_client(params), **common) as client:
            yield client

    async def _list(self) -> None:
        client = self._require()
        listed: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(100):  # a server that pages forever cannot hang the start
            page = await client.list_tools(cursor=cursor)
            listed.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        self.tools = tuple(listed)
        self.stale = False

    async def _listen(
        self, client: Client, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """On a 2026-era connection, list changes arrive on a subscription stream.

        The connection opens only once the server has acknowledged the subscription (or
        refused it): a tool call made at once could otherwise cause a change that is sent
        before anyone listens, and the next run would be offered the old list.
        """
        listening = False
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                listening = True
                task_status.started()
                async for _ in subscription:
                    self.stale = True
        except Exception as exc:
            logger.debug("mcp=<%s> | no list-change subscription: %s", self.label, _describe(exc))
            if not listening:
                task_status.started()

    async def refresh(self) -> None:
        """Fetch the tool list again if the server said it changed; keeps the old one on error."""
        if not (self.stale and self.alive):
            return
        try:
            with anyio.fail_after(self.options.start_timeout):
                await self._list()
        except Exception as exc:
            logger.warning("mcp=<%s> | listing the tools failed: %s", self.label, _describe(exc))

    async def _on_message(self, message: object) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.stale = True
        await anyio.lowlevel.checkpoint()

    async def _on_elicitation(
        self, context: object, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        del context
        waiting = [call for call in self.calls if not call.done.is_set()]
        if len(waiting) != 1 or isinstance(params, types.ElicitRequestURLParams):
            # a question that cannot be tied to one call (or asks to open a URL) has no
            # person to go to; the server hears a decline
            logger.warning(
                "mcp=<%s> | declined an elicitation: %s",
                self.label,
                "URL mode" if len(waiting) == 1 else f"{len(waiting)} calls in flight",
            )
            return types.ElicitResult(action="decline")
        call = waiting[0]
        elicitation = Elicitation.from_params(params)
        call.elicitation = elicitation
        call.wake()
        return await elicitation.answer()

    # -- calls --------------------------------------------------------------------------

    def start_call(self, tool: str, arguments: dict[str, Any], meta: dict[str, Any] | None) -> Call:
        """Begin a tools/call in the background; wait on the returned Call."""
        if self._group is None or self._client is None or not self.alive:
            raise CallFailedError(f"MCP server {self.label!r} is not running")
        call = Call(tool=tool)
        self.calls.append(call)
        self._group.start_soon(self._run_call, call, arguments, meta)
        return call

    async def _run_call(
        self, call: Call, arguments: dict[str, Any], meta: dict[str, Any] | None
    ) -> None:
        client = self._require()

        async def progress(progress: float, total: float | None, message: str | None) -> None:
            if self.on_progress is not None:
                outcome = self.on_progress(call.tool, progress, total, message)
                if outcome is not None:
                    await outcome

        try:
            with call.scope:
                call.result = await client.call_tool(
                    call.tool,
                    arguments,
                    progress_callback=progress,
                    meta=None if meta is None else cast(types.RequestParamsMeta, meta),
                )
            if call.scope.cancelled_caught:
                call.error = f"the call to {call.tool!r} was cancelled"
        except MCPError as exc:
            if exc.error.code == CONNECTION_CLOSED:
                self.alive = False
                self._closing.set()
                call.error = (
                    f"MCP server {self.label!r} stopped during the call; "
                    "it is restarted on the next call"
                )
            else:
                call.error = f"MCP server {self.label!r} refused the call: {exc.error.message}"
        except Exception as exc:
            call.error = f"MCP server {self.label!r} failed the call: {_describe(exc)}"
        finally:
            if call.elicitation is not None:
                call.elicitation.abandon()
            call.done.set()
            call.wake()
            if call in self.calls:
                self.calls.remove(call)

    def _require(self) -> Client:
        if self._client is None:
            raise CallFailedError(f"MCP server {self.label!r} is not running")
        return self._client


def _describe(exc: BaseException) -> str:
    """A short, secret-free description of why something failed."""
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _describe(exc.exceptions[0])
    if isinstance(exc, MCPError):
        return exc.error.message
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
