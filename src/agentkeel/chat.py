"""``agentkeel chat URL``: a terminal conversation with a served agent.

A thin renderer over `AsyncAgentClient`, so it holds what any client holds: the
context id, never the history. Tokens are written as they stream, thinking is dimmed,
each tool call and result gets a line, and human-in-the-loop interrupts become
questions (the prompt, ``! Run delete_file: Delete the file notes.txt``, then ``Run
delete_file? [y/N]`` and ``Reason:`` when refused; an input
interrupt asks its own prompt) whose answers resume the run.

Ctrl-C during a reply stops the run *on the server* (`AsyncAgentClient.cancel`): the
model call and the tools stop there, the run ends ``cancelled`` with a valid history,
and the chat shows its end; a second Ctrl-C (or a cancel the server could not take)
stops waiting at once. If a run nobody listened to stopped at a question, the next
message is refused with ``interrupt_pending``; the chat then fetches that question with
`AsyncAgentClient.follow` and asks it. Ctrl-C or Ctrl-D at a prompt ends the chat.
Lines starting with ``/`` are commands (`agentkeel.chat_commands`: ``/history``,
``/list``, ``/switch``, ``/fork``, ``/retry``, ``/edit``). Errors are one line, never
a traceback.
"""

from __future__ import annotations

import itertools
import os
import signal
import sys
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from functools import partial
from typing import TextIO

import anyio
import anyio.from_thread
import anyio.lowlevel
import httpx
from anyio.abc import TaskGroup

from agentkeel.chat_commands import ChatCommands
from agentkeel.client import (
    AsyncAgentClient,
    ClientStreamItem,
    SendResult,
    approve,
    reject,
)
from agentkeel.errors import AgentkeelError, ConfigurationError, InterruptPendingError
from agentkeel.events import (
    InterruptEvent,
    StatusEvent,
    StepEvent,
)
from agentkeel.messages import JSONValue
from agentkeel.terminal import Terminal

__all__ = ["run_chat"]

_EXIT_WORDS = frozenset({"exit", "quit"})
_DIM, _RESET, _CLEAR_LINE = "\033[2m", "\033[0m", "\r\033[K"
_SPINNER = "|/-\\"
_STOPPED = "  (stopped waiting: the context is kept)\n"
_CANCELLING = "  (stopping the run on the server)\n"
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
        self._turning = False
        """A reply is streaming: Ctrl-C cancels its run on the server."""
        self._cancelling = False
        self._commands = ChatCommands(client, term, self._converse)

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
                if self._turning and not self._cancelling and self._group is not None:
                    self._cancelling = True
                    self._group.start_soon(self._cancel_on_server)
                elif self._scope is not None:
                    self._scope.cancel()

    async def _cancel_on_server(self) -> None:
        """Ctrl-C in a reply: stop its run on the server; the stream shows its end."""
        try:
            await self._client.cancel()
        except (AgentkeelError, httpx.HTTPError):  # nothing to stop there: stop waiting
            if self._scope is not None:
                self._scope.cancel()
            return
        self._term.end_line()
        self._term.write(_CANCELLING)

    async def _loop(self) -> None:
        while True:
            line = await self._ask("you> ")
            if line is None or line.strip().lower() in _EXIT_WORDS:
                self._term.write("bye\n")
                return
            if not line.strip():
                continue
            if line.strip().startswith("/"):
                await self._commands.handle(line)
                continue
            result = await self._converse(partial(self._client.stream, line.strip()))
            if result is not None and result.interrupt is not None:
                self._term.write(f"bye (the question stays open in {result.context_id})\n")
                return

    async def _converse(self, open_stream: Callable[[], Stream]) -> SendResult | None:
        """One turn and the questions it asks; a result still suspended: the person left."""
        result = await self._turn(open_stream)
        while result is not None and result.interrupt is not None:
            decision = await self._decide(result.interrupt)
            if decision is None:
                return result
            resume = partial(self._client.resume_stream, result.interrupt.id, decision)
            result = await self._turn(resume)
        return result

    async def _ask(self, prompt: str) -> str | None:
        """One line from the person; None at the end of input or on Ctrl-C."""
        return await self._read(partial(self._term.ask, prompt))

    async def _ask_approval(self, pending: InterruptEvent) -> str | None:
        """The approval question, after what the call will do (its prompt)."""
        return await self._read(partial(self._term.ask_approval, pending.tool, pending.prompt))

    async def _read(self, ask: Callable[[], Awaitable[str | None]]) -> str | None:
        answer = None
        with anyio.CancelScope() as scope:
            self._scope = scope
            answer = await ask()
        self._scope = None
        if scope.cancelled_caught:
            self._term.write("\n")
        return answer

    async def _decide(self, pending: InterruptEvent) -> JSONValue | None:
        """The decision `pending` needs, asked on the terminal; None to stop asking."""
        if pending.kind == "input":
            answer = await self._ask(f"{pending.prompt or 'Your answer:'} ")
            return None if answer is None else answer.strip()
        answer = await self._ask_approval(pending)
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
            self._scope, self._turning, self._cancelling = scope, True, False
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
        self._scope, self._turning = None, False
        if scope.cancelled_caught:
            self._term.write(_STOPPED)
        self._term.show_context()
        return result


class _Terminal(Terminal):
    """The chat's terminal: the context id, one-line errors, and a spinner on a terminal."""

    def __init__(self, stdin: TextIO, stdout: TextIO) -> None:
        super().__init__(stdin, stdout)
        self._new_context: str | None = None
        self._spinning: anyio.Event | None = None

    def banner(self, url: str, agent: str, context_id: str | None) -> None:
        self.write(f"agentkeel chat: agent {agent!r} at {url}\n")
        if context_id is not None:
            self.write(f"context: {context_id}\n")
        self.write('Type "exit" or press Ctrl-D to quit, /help for commands; ')
        self.write("Ctrl-C stops a reply.\n\n")

    def learn(self, context_id: str) -> None:
        """The client's `on_context`: the id is shown once the turn is over."""
        self._new_context = context_id

    def show_context(self) -> None:
        if self._new_context is not None:
            context_id, self._new_context = self._new_context, None
            self.write(f"  context: {context_id} (continue later with --context {context_id})\n")

    def error(self, exc: Exception) -> None:
        self._stop_spinner()
        self.end_line()
        message = exc.message if isinstance(exc, AgentkeelError) else str(exc)
        self.write(f"  error: {message}\n")

    async def show(self, stream: Stream, *, quiet: bool = False) -> SendResult | None:
        """Render a run's events as they arrive (none when `quiet`); return its end."""
        result: SendResult | None = None
        try:
            async with aclosing(stream) as items:
                async for item in items:
                    if isinstance(item, SendResult):
                        result = item
                    elif not quiet:
                        self.render(item)
        finally:
            self._stop_spinner()
            self.end_line()
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

    def render(self, event: object) -> None:
        """Stop the spinner at the first thing worth showing, then show it."""
        if not isinstance(event, StatusEvent | StepEvent | InterruptEvent):
            self._stop_spinner()
        super().render(event)
