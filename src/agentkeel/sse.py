"""Server-Sent Events: encode frames and decode them incrementally.

One codec serves three users: the server writes its run stream with `encode_frame`, the
model providers read their vendors' streams with `SSEDecoder`, and the Python client
reads the server's stream the same way. Decoding follows the WHATWG "event stream
interpretation" rules, so a frame split at any byte (even inside a UTF-8 character),
several frames in one network chunk, CR/LF/CRLF line endings, comments, a leading BOM
and the persistence of `id` all behave as a browser's EventSource would.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass

__all__ = ["SSEDecoder", "SSEFrame", "aiter_sse", "encode_comment", "encode_frame"]

_LINE_END = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True, slots=True)
class SSEFrame:
    """One dispatched event of an event stream."""

    data: str
    """The event's data; the values of several ``data:`` lines are joined by newlines."""
    id: str | None = None
    """The last event id in force when the event was dispatched (it persists between
    events until a new ``id:`` line changes it); None when there is none."""
    event: str | None = None
    """The event type from an ``event:`` line; None for the default ``message`` type."""
    retry: int | None = None
    """A reconnection time in milliseconds received since the previous frame, if any."""


def _check_single_line(name: str, value: str) -> None:
    if "\n" in value or "\r" in value:
        raise ValueError(f"an SSE {name} cannot contain a line break")


def encode_frame(
    data: str,
    *,
    id: str | int | None = None,
    event: str | None = None,
    retry: int | None = None,
) -> bytes:
    """Encode one event as UTF-8 bytes ending with the blank line that dispatches it.

    Multi-line `data` becomes several ``data:`` lines, which a decoder joins back with
    newlines, so any text round-trips. `id` and `event` must fit on one line, because a
    line break there would inject fields into the stream.

    Args:
        data: The event data; any text.
        id: The event id a client sends back as ``Last-Event-ID`` when it reconnects.
        event: The event type; None for the default ``message`` type.
        retry: A reconnection delay in milliseconds to advise the client.

    Returns:
        The encoded frame.

    Raises:
        ValueError: If `id` or `event` contains a line break, `id` contains NUL (a
            decoder would ignore it) or `retry` is negative.
    """
    lines: list[str] = []
    if event is not None:
        _check_single_line("event", event)
        lines.append(f"event: {event}")
    if id is not None:
        text_id = str(id)
        _check_single_line("id", text_id)
        if "\0" in text_id:
            raise ValueError("an SSE id cannot contain NUL")
        lines.append(f"id: {text_id}")
    if retry is not None:
        if retry < 0:
            raise ValueError("an SSE retry must be a non-negative number of milliseconds")
        lines.append(f"retry: {retry}")
    lines.extend(f"data: {line}" for line in _LINE_END.split(data))
    return ("\n".join(lines) + "\n\n").encode("utf-8")


def encode_comment(text: str = "") -> bytes:
    """Encode a comment, which every decoder ignores: the heartbeat that keeps proxies open.

    Args:
        text: The comment text; each of its lines becomes a ``:`` line.

    Returns:
        The encoded comment, ending with a blank line so it is a block of its own.
    """
    return ("".join(f": {line}\n" for line in _LINE_END.split(text)) + "\n").encode("utf-8")


class SSEDecoder:
    """An incremental event-stream decoder: feed it bytes as they arrive, get whole frames.

    It keeps the state a stream carries between frames: the partial line, the pending
    CR of a CRLF split across chunks, the UTF-8 bytes of a split character, the fields of
    the event being built and the last event id. An event not ended by a blank line when
    the stream stops is never dispatched, as the WHATWG rules require.
    """

    def __init__(self) -> None:
        # utf-8-sig drops one leading BOM, even when it arrives split across chunks.
        self._text_decoder = codecs.getincrementaldecoder("utf-8-sig")(errors="replace")
        self._partial: list[str] = []
        self._skip_lf = False
        self._data: list[str] = []
        self._has_data = False
        self._event = ""
        self._last_id = ""
        self._pending_retry: int | None = None
        self.retry: int | None = None
        """The latest reconnection time (milliseconds) the stream advised, if any."""

    @property
    def last_event_id(self) -> str | None:
        """The id a reconnecting client sends as ``Last-Event-ID``; None when unset."""
        return self._last_id or None

    def feed(self, chunk: bytes) -> list[SSEFrame]:
        """Decode the next bytes of the stream.

        Args:
            chunk: Any slice of the stream; it may end anywhere.

        Returns:
            The frames completed by this chunk, in order (often none or one).
        """
        text = self._text_decoder.decode(chunk)
        if not text:
            return []
        if self._skip_lf:
            self._skip_lf = False
            if text.startswith("\n"):
                text = text[1:]
        frames: list[SSEFrame] = []
        start = 0
        for match in _LINE_END.finditer(text):
            self._partial.append(text[start : match.start()])
            line = "".join(self._partial)
            self._partial.clear()
            start = match.end()
            if match.group() == "\r" and start == len(text):
                # The LF of a CRLF may open the next chunk; it must not end a second line.
                self._skip_lf = True
            frame = self._process_line(line)
            if frame is not None:
                frames.append(frame)
        if start < len(text):
            self._partial.append(text[start:])
        return frames

    def _process_line(self, line: str) -> SSEFrame | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
            self._has_data = True
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._last_id = value
        elif name == "retry":
            if value and value.isascii() and value.isdigit():
                self.retry = self._pending_retry = int(value)
        return None

    def _dispatch(self) -> SSEFrame | None:
        if not self._has_data:
            self._event = ""
            return None
        frame = SSEFrame(
            data="\n".join(self._data),
            id=self._last_id or None,
            event=self._event or None,
            retry=self._pending_retry,
        )
        self._data.clear()
        self._has_data = False
        self._event = ""
        self._pending_retry = None
        return frame


async def aiter_sse(byte_iterator: AsyncIterator[bytes]) -> AsyncGenerator[SSEFrame, None]:
    """Decode an async byte stream (e.g. ``response.aiter_bytes()``) into frames.

    Args:
        byte_iterator: The raw body, in chunks of any size.

    Yields:
        Each frame as soon as its closing blank line has arrived.
    """
    decoder = SSEDecoder()
    async for chunk in byte_iterator:
        for frame in decoder.feed(chunk):
            yield frame
