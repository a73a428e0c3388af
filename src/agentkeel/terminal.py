"""Rendering run events in a terminal, shared by `agentkeel demo` and `agentkeel chat`.

Thinking is dimmed on a real terminal (or prefixed ``(thinking)`` elsewhere, and when
``NO_COLOR`` is set), tokens are written as they arrive, and each tool call and result
gets a line of its own. When standard input is not a terminal, what is read is echoed
so that a piped transcript reads like a session.
"""

from __future__ import annotations

import os
import threading
from typing import TextIO

import anyio
import anyio.from_thread
import anyio.lowlevel

from agentkeel.events import ErrorEvent, ThinkingEvent, TokenEvent, ToolCallEvent, ToolResultEvent

__all__ = ["Terminal", "is_tty", "read_line"]

DIM, RESET = "\033[2m", "\033[0m"


class Terminal:
    """Reads lines and renders run events; subclasses add their own banners and prompts."""

    def __init__(self, stdin: TextIO, stdout: TextIO) -> None:
        self._in = stdin
        self._out = stdout
        self._echo = not is_tty(stdin)
        self._tty = is_tty(stdout)
        self._color = self._tty and "NO_COLOR" not in os.environ
        self._mode: str | None = None

    def write(self, text: str) -> None:
        """Write and flush at once (tokens must appear as they stream)."""
        self._out.write(text)
        self._out.flush()

    async def ask(self, prompt: str) -> str | None:
        """Show `prompt` and read one line; None at the end of input."""
        self.write(prompt)
        line = await read_line(self._in)
        if not line:
            self.write("\n")
            return None
        if self._echo:
            self.write(line if line.endswith("\n") else line + "\n")
        return line.rstrip("\r\n")

    def render(self, event: object) -> None:
        """Show one run event (status and step events show nothing)."""
        if isinstance(event, ThinkingEvent):
            if self._mode != "thinking":
                self.end_line()
                self.write(DIM if self._color else "(thinking) ")
                self._mode = "thinking"
            self.write(event.text)
        elif isinstance(event, TokenEvent):
            if self._mode != "text":
                self.end_line()
                self._mode = "text"
            self.write(event.text)
        elif isinstance(event, ToolCallEvent):
            self.line(f"  -> tool {event.name}")
        elif isinstance(event, ToolResultEvent):
            self.line(f"  <- {event.name}: {event.status}")
        elif isinstance(event, ErrorEvent):
            self.line(f"  error ({event.code}): {event.message}")

    async def ask_approval(self, tool: str | None, prompt: str | None) -> str | None:
        """Show what an approval is for (its prompt), then ask ``Run <tool>? [y/N]``.

        The prompt is the server's (or agent's) account of the call: the tool's
        description of it or its input, secrets hidden. None at the end of input.
        """
        name = tool or "the tool"
        self.line(f"  ! {prompt or f'Run {name}'}")
        return await self.ask(f"Run {name}? [y/N] ")

    def line(self, text: str) -> None:
        """Write `text` on a line of its own."""
        self.end_line()
        self.write(text + "\n")

    def end_line(self) -> None:
        """Close the thinking or text line in progress, if any."""
        if self._mode == "thinking" and self._color:
            self.write(RESET)
        if self._mode is not None:
            self.write("\n")
        self._mode = None


async def read_line(stream: TextIO) -> str:
    """Read one line in a daemon thread ("" at the end of input).

    A daemon thread, not a worker thread: a worker blocked in `readline` when Ctrl-C
    arrives would keep the process alive until the next Enter.
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

    threading.Thread(target=read, name="agentkeel-stdin", daemon=True).start()
    await done.wait()
    return lines[0]


def is_tty(stream: TextIO) -> bool:
    """Whether `stream` is an interactive terminal (False for anything that cannot say)."""
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
