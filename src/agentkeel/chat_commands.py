"""The slash commands of ``agentkeel chat``: reading, switching, forking and redoing turns.

Each command is one call (or two) of `AsyncAgentClient`, so the chat still holds only
the context id: ``/history`` reads the transcript the server keeps, ``/list`` the
caller's conversations, ``/switch ID`` and ``/new`` only change which context the next
turn goes to, ``/fork`` copies the conversation on the server and moves to the copy,
``/retry`` regenerates the last answer and ``/edit TEXT`` replaces the last message
(or ``/edit MSG-ID TEXT`` an earlier one), both cutting the history on the server as
part of the turn.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
from functools import partial
from typing import Literal

import httpx

from agentkeel.client import AsyncAgentClient, ClientStreamItem, SendResult, TranscriptMessage
from agentkeel.errors import AgentkeelError, InvalidRequestError
from agentkeel.terminal import Terminal

__all__ = ["HELP", "ChatCommands"]

Stream = AsyncGenerator[ClientStreamItem, None]
RunTurn = Callable[[Callable[[], Stream]], Awaitable[SendResult | None]]
HELP = """  /history           the conversation so far, with message ids
  /list              your conversations with this agent
  /switch ID         continue conversation ID
  /new               start a new conversation
  /fork [MSG-ID]     copy this conversation (up to MSG-ID) and continue in the copy
  /retry             answer the last message again
  /edit [MSG-ID] TEXT  replace your last message (or MSG-ID) with TEXT and rerun
  Ctrl-C during a reply stops the run on the server
"""


class ChatCommands:
    """Runs one slash command; a turn it starts is shown by the chat's own `run_turn`."""

    def __init__(self, client: AsyncAgentClient, term: Terminal, run_turn: RunTurn) -> None:
        self._client = client
        self._term = term
        self._run_turn = run_turn

    async def handle(self, line: str) -> None:
        """Run the command `line` (it starts with ``/``); errors are one line."""
        name, _, rest = line.strip().partition(" ")
        commands: dict[str, Callable[[str], Awaitable[None]]] = {
            "/help": self._help,
            "/history": self._history,
            "/list": self._list,
            "/switch": self._switch,
            "/new": self._new,
            "/fork": self._fork,
            "/retry": self._retry,
            "/edit": self._edit,
        }
        command = commands.get(name.lower())
        if command is None:
            self._term.write(f"  unknown command {name} (/help lists them)\n")
            return
        try:
            await command(rest.strip())
        except (AgentkeelError, httpx.HTTPError) as exc:
            message = exc.message if isinstance(exc, AgentkeelError) else str(exc)
            self._term.write(f"  error: {message}\n")

    async def _help(self, rest: str) -> None:
        del rest
        self._term.write(HELP)

    async def _history(self, rest: str) -> None:
        del rest
        if self._client.context_id is None:
            self._term.write("  (nothing yet: this is a new conversation)\n")
            return
        count = 0
        async for message in self._client.messages():
            count += 1
            who = "you" if message.role == "user" else (message.agent or "agent")
            parts = [message.text] if message.text else []
            if message.tool_calls:
                parts.append(f"[tools: {', '.join(message.tool_calls)}]")
            self._term.write(f"  {message.id}  {who}: {' '.join(parts)}\n")
        if not count:
            self._term.write("  (no messages yet)\n")

    async def _list(self, rest: str) -> None:
        del rest
        count = 0
        async for summary in self._client.contexts():
            count += 1
            mark = "*" if summary.context_id == self._client.context_id else " "
            when = summary.updated_at.strftime("%Y-%m-%d %H:%M")
            title = summary.title or "(untitled)"
            state = "" if summary.status == "idle" else f", {summary.status}"
            self._term.write(f"  {mark} {summary.context_id}  {title}  ({when}{state})\n")
        if not count:
            self._term.write("  (no conversations yet)\n")

    async def _switch(self, rest: str) -> None:
        if not rest:
            raise InvalidRequestError("/switch needs a context id (see /list)")
        self._client.reset(rest)
        self._term.write(f"  context: {rest}\n")

    async def _new(self, rest: str) -> None:
        del rest
        self._client.reset()
        self._term.write("  a new conversation starts with your next message\n")

    async def _fork(self, rest: str) -> None:
        source = self._client.context_id
        if source is None:
            raise InvalidRequestError("there is no conversation to fork yet")
        forked = await self._client.fork(rest or None)
        self._client.reset(forked)
        self._term.write(f"  forked into {forked} (the original stays as {source})\n")

    async def _retry(self, rest: str) -> None:
        del rest
        last = await self._last("assistant")
        await self._run_turn(partial(self._client.stream, regenerate=last.id))

    async def _edit(self, rest: str) -> None:
        first, _, text = rest.partition(" ")
        if first.startswith("msg-") and text.strip():
            message_id, text = first, text.strip()
        else:
            message_id, text = (await self._last("user")).id, rest
        if not text:
            raise InvalidRequestError("/edit needs the new text")
        await self._run_turn(partial(self._client.stream, text, replace=message_id))

    async def _last(self, role: Literal["user", "assistant"]) -> TranscriptMessage:
        if self._client.context_id is None:
            raise InvalidRequestError("there is nothing to redo yet")
        last: TranscriptMessage | None = None
        async for message in self._client.messages():
            if message.role == role:
                last = message
        if last is None:
            raise InvalidRequestError(f"the conversation has no {role} message yet")
        return last
