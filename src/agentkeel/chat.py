"""``agentkeel chat URL``: a terminal conversation with a served agent.

A thin renderer over `AsyncAgentClient`, so it holds what any client holds: the
context id, never the history. Tokens are written as they stream, thinking is dimmed,
each tool call and result gets a line, and human-in-the-loop interrupts become
questions (``Run delete_file? [y/N]``, then ``Reason:`` when refused; an input
interrupt asks its own prompt) whose answers resume the run.

Ctrl-C while waiting for an answer stops *waiting*, not the run: the run goes on on
the server, the context is kept, and the next prompt works (a turn sent meanwhile
waits in line behind it). If the abandoned run stopped at a question, the next message
is refused with ``interrupt_pending``; the chat then fetches that question with
`AsyncAgentClient.follow` and asks it. Ctrl-C or Ctrl-D at a prompt ends the chat.
Errors are one line, never a traceback.
"""

from __future__ import annotations

import itertools
import os
import signal
import sys
import threading
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from functools import partial
from typing import TextIO

import anyio
import anyio.from_thread
import anyio.lowlevel
import httpx
from anyio.abc import TaskGroup

from agentkeel.client import (
    AsyncAgentClient,
    ClientStreamItem,
    SendResult,
    approve,
    reject,
)
from agentkeel.errors import AgentkeelError, ConfigurationError, InterruptPendingError
from agentkeel.events import (
    ErrorEvent,
    InterruptEvent,
    StatusEvent,
    StepEvent,
    ThinkingEvent,
    TokenEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from agentkeel.messages import JSONValue

__all__ = ["run_chat"]

_EXIT_WORDS = frozenset({"exit", "quit"})
_DIM, _RESET, _CLEAR_LINE = "\033[2m", "\033[0m", "\r\033[K"
_SPINNER = "|/-\\"
_STOPPED = "  (stopped waiting: the run goes on on the server, and the context is kept)\n"
Stream = AsyncGenerator[ClientStreamItem, None]


def run_chat(
    url: str,
    *,
    agent: str | None = None,
    context_id: str | None = None,
    api_key_env: str | None = None,
) -> int:
    """Chat with the agent at `url` on this terminal until Ctrl-D, Ctrl-C or "exit".

    Args:
        url: The server's base URL, e.g. ``http://127.0.0.1:8000``.
        agent: The agent's name; None picks the first one ``GET /agents`` lists.
        context_id: A conversation to continue (the id an earlier chat showed).
        api_key_env: The environment variable holding the API key, if the server
            needs one.

    Returns:
        The exit code: 0.

    Raises:
        AgentkeelError: The chat cannot start (bad URL, unset key variable, unknown
            agent, server unreachable); the command prints it as one line.
    """
    if not url.startswith(("http://", "https://")):
        raise ConfigurationError(f"{url!r} is not an http:// or https:// URL")
    api_key = None
    if api_key_env is not None:
        api_key = os.environ.get(api_key_env)
        if not api_key:
            raise ConfigurationError(f"the environment variable {api_key_env} is not set")
    terminal = _Terminal(sys.stdin, sys.stdout)
    try:
        anyio.run(_chat, url, agent, context_id, api_key, terminal)
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        raise ConfigurationError(f"cannot talk to {url}: {exc}") from None
    return 0


async def _chat(
    url: str, agent: str | None, context_id: str | None, api_key: str | None, term: _Terminal
) -> None:
    async with AsyncAgentClient(
        url,
        agent=agent or "",
        api_key=api_key,
        context_id=context_id,
        on_context=term.learn,
        max_retries=3,
    ) as client:
        names = [info.name for info in await client.agents()]
        if agent is None and not names:
            raise ConfigurationError(f"the server at {url} serves no agents")
        if agent is not None and agent not in names:
            raise ConfigurationError(f"the server has no agent {agent!r} (it has: {names})")
        client.agent = agent or names[0]
        term.banner(url, client.agent, context_id)
        await _Conversation(client, term).run()


class _Conversation:
    """The prompt loop: turns, questions and Ctrl-C (which cancels the current wait)."""

    def __init__(self, client: AsyncAgentClient, term: _Terminal) -> None:
        self._client = client
        self._term = term
        self._scope: anyio.CancelScope | None = None
        self._group: TaskGroup | None = None

    async def run(self) -> None:
        async with anyio.create_task_group() as self._group:
            if sys.platform != "win32":  # elsewhere Ctrl-C ends the command
                self._group.start_soon(self._watch_ctrl_c)
            try:
                await self._loop()
            finally:
                self._group.cancel_scope.cancel()

    async def _watch_ctrl_c(self) -> None:
        with anyio.open_signal_receiver(signal.SIGINT) as signals:
            async for _ in signals:
                if self._scope is not None:
                    self._scope.cancel()

    async def _loop(self) -> None:
        while True:
            line = await self._ask("you> ")
            if line is None or line.strip().lower() in _EXIT_WORDS:
                self._term.write("bye\n")
                return
            if not line.strip():
                continue
            result = await self._turn(partial(self._client.stream, line.strip()))
            while result is not None and result.interrupt is not None:
                decision = await self._decide(result.interrupt)
                if decision is None:
                    self._term.write(f"bye (the question stays open in {result.context_id})\n")
                    return
                resume = partial(self._client.resume_stream, result.interrupt.id, decision)
                result = await self._turn(resume)

    async def _ask(self, prompt: str) -> str | None:
        """One line from the person; None at the end of input or on Ctrl-C."""
        answer = None
        with anyio.CancelScope() as scope:
            self._scope = scope
            answer = await self._term.ask(prompt)
        self._scope = None
        if scope.cancelled_caught:
            self._term.write("\n")
        return answer

    async def _decide(self, pending: InterruptEvent) -> JSONValue | None:
        """The decision `pending` needs, asked on the terminal; None to stop asking."""
        if pending.kind == "input":
            answer = await self._ask(f"{pending.prompt or 'Your answer:'} ")
            return None if answer is None else answer.strip()
        answer = await self._ask(f"Run {pending.tool or 'the tool'}? [y/N] ")
        if answer is None:
            return None
        if answer.strip().lower() in ("y", "yes"):
            return approve()
        reason = await self._ask("Reason: ")
        if reason is None:
            return None
        self._term.write(f"  x {pending.tool}: rejected, not run\n")
        return reject(reason.strip() or "rejected by the user")

    async def _turn(self, open_stream: Callable[[], Stream]) -> SendResult | None:
        """Show one turn; None when it failed or Ctrl-C stopped the wait."""
        result: SendResult | None = None
        with anyio.CancelScope() as scope:
            self._scope = scope
            if self._group is not None:
                self._term.start_spinner(self._group)
            try:
                try:
                    result = await self._term.show(open_stream())
                except InterruptPendingError:
                    # A run nobody listened to (Ctrl-C) stopped at a question: fetch it.
                    self._term.write("  (the conversation waits for an answer first)\n")
                    result = await self._term.show(self._client.follow(), quiet=True)
            except (AgentkeelError, httpx.HTTPError) as exc:
                self._term.error(exc)
        self._scope = None
        if scope.cancelled_caught:
            self._term.write(_STOPPED)
        self._term.show_context()
        return result


class _Terminal:
    """Reads lines and renders run events; colours and a spinner only on a terminal."""

    def __init__(self, stdin: TextIO, stdout: TextIO) -> None:
        self._in = stdin
        self._out = stdout
        self._echo = not _is_tty(stdin)
        self._tty = _is_tty(stdout)
        self._color = self._tty and "NO_COLOR" not in os.environ
        self._mode: str | None = None
        self._new_context: str | None = None
        self._spinning: anyio.Event | None = None

    def write(self, text: str) -> None:
        self._out.write(text)
        self._out.flush()

    def banner(self, url: str, agent: str, context_id: str | None) -> None:
        self.write(f"agentkeel chat: agent {agent!r} at {url}\n")
        if context_id is not None:
            self.write(f"context: {context_id}\n")
        self.write('Type "exit" or press Ctrl-D to quit; Ctrl-C stops waiting for a reply.\n\n')

    def learn(self, context_id: str) -> None:
        """The client's `on_context`: the id is shown once the turn is over."""
        self._new_context = context_id

    def show_context(self) -> None:
        if self._new_context is not None:
            context_id, self._new_context = self._new_context, None
            self.write(f"  context: {context_id} (continue later with --context {context_id})\n")

    def error(self, exc: Exception) -> None:
        self._stop_spinner()
        self._end_line()
        message = exc.message if isinstance(exc, AgentkeelError) else str(exc)
        self.write(f"  error: {message}\n")

    async def ask(self, prompt: str) -> str | None:
        """Show `prompt` and read one line; None at the end of input."""
        self.write(prompt)
        line = await _read_line(self._in)
        if not line:
            self.write("\n")
            return None
        if self._echo:
            self.write(line if line.endswith("\n") else line + "\n")
        return line.rstrip("\r\n")

    async def show(self, stream: Stream, *, quiet: bool = False) -> SendResult | None:
        """Render a run's events as they arrive (none when `quiet`); return its end."""
        result: SendResult | None = None
        try:
            async with aclosing(stream) as items:
                async for item in items:
                    if isinstance(item, SendResult):
                        result = item
                    elif not quiet:
                        self._event(item)
        finally:
            self._stop_spinner()
            self._end_line()
        if result is not None and result.error is not None:
            self.write(f"  run {result.status}: {result.error.message}\n")
        return result

    def start_spinner(self, group: TaskGroup) -> None:
        """Spin until the first thinking, token or tool line (on a terminal only)."""
        if self._tty:
            self._spinning = anyio.Event()
            group.start_soon(self._spin, self._spinning)

    async def _spin(self, done: anyio.Event) -> None:
        for frame in itertools.cycle(_SPINNER):
            if done.is_set():
                return
            self.write(f"{_CLEAR_LINE}{frame} ")
            with anyio.move_on_after(0.1):
                await done.wait()

    def _stop_spinner(self) -> None:
        if self._spinning is not None:
            self._spinning.set()
            self._spinning = None
            self.write(_CLEAR_LINE)

    def _event(self, event: object) -> None:
        if not isinstance(event, StatusEvent | StepEvent | InterruptEvent):
            self._stop_spinner()  # the first thing worth showing has arrived
        if isinstance(event, ThinkingEvent):
            if self._mode != "thinking":
                self._end_line()
                self.write(_DIM if self._color else "(thinking) ")
                self._mode = "thinking"
            self.write(event.text)
        elif isinstance(event, TokenEvent):
            if self._mode != "text":
                self._end_line()
                self._mode = "text"
            self.write(event.text)
        elif isinstance(event, ToolCallEvent):
            self._line(f"  -> tool {event.name}")
        elif isinstance(event, ToolResultEvent):
            self._line(f"  <- {event.name}: {event.status}")
        elif isinstance(event, ErrorEvent):
            self._line(f"  error ({event.code}): {event.message}")

    def _line(self, text: str) -> None:
        self._end_line()
        self.write(text + "\n")

    def _end_line(self) -> None:
        """Close the thinking or text line in progress, if any."""
        if self._mode == "thinking" and self._color:
            self.write(_RESET)
        if self._mode is not None:
            self.write("\n")
        self._mode = None


async def _read_line(stream: TextIO) -> str:
    """Read one line in a daemon thread ("" at the end of input).

    A daemon thread, not a worker thread: one blocked in `readline` when the chat ends
    (Ctrl-C at a prompt) must not keep the process alive until the next Enter.
    """
    done = anyio.Event()
    token = anyio.lowlevel.current_token()
    lines: list[str] = []

    def read() -> None:
        try:
            lines.append(stream.readline())
        except (OSError, ValueError):
            lines.append("")
        try:
            anyio.from_thread.run_sync(done.set, token=token)
        except anyio.RunFinishedError:
            pass

    threading.Thread(target=read, name="agentkeel-chat-stdin", daemon=True).start()
    await done.wait()
    return lines[0]


def _is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
