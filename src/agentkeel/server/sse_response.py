"""SSEResponse: a run's frames as a ``text/event-stream`` response.

The frames themselves (numbering, retention, fan-out) live in `agentkeel.runtime`; this
is only the HTTP end of them. A reader that stops reading costs a bounded buffer: the
server's send waits while the connection's write buffer is over its high-water mark
(64 KiB under uvicorn), and what is sent goes in pieces of at most `PIECE_BYTES` (a
reader that fell behind gets its backlog as one chunk), so at most those two are held
for it; when a send has waited `stall_seconds`, the reader is dropped (the connection
is closed) and the run goes on.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from contextlib import aclosing

import anyio
from starlette.types import Receive, Scope, Send

__all__ = ["SSEResponse"]

logger = logging.getLogger(__name__)

PIECE_BYTES = 65_536
"""The most one send hands the server (what a stalled reader can cost beyond its buffer)."""

_SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


class SSEResponse:
    """A pure ASGI ``text/event-stream`` response that stops when the client goes away.

    Stopping only ends this response: the run it reads from goes on in the server's
    task group and keeps its frames for a reconnect.

    Args:
        chunks: The SSE bytes to send.
        headers: Extra response headers.
        stall_seconds: How long one send may wait for a reader that stopped reading
            before the reader is dropped (None: forever).
        on_stalled: Told when a reader is dropped so (the metrics).
        on_close: Awaited once the response ends, however it ends (a stream slot).
    """

    def __init__(
        self,
        chunks: AsyncGenerator[bytes, None],
        headers: Sequence[tuple[bytes, bytes]] = (),
        *,
        stall_seconds: float | None = None,
        on_stalled: Callable[[], None] = lambda: None,
        on_close: Callable[[], Awaitable[None]] | None = None,
    ):
        self.chunks = chunks
        self.headers = [*_SSE_HEADERS, *headers]
        self.stall_seconds = stall_seconds
        self.on_stalled = on_stalled
        self.on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Send the headers, then every chunk, until the end or the client's disconnect."""
        try:
            await self._stream(receive, send)
        finally:
            if self.on_close is not None:
                await self.on_close()

    async def _stream(self, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.headers})
        async with anyio.create_task_group() as group:

            async def watch_disconnect() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                group.cancel_scope.cancel()

            group.start_soon(watch_disconnect)
            try:
                async with aclosing(self.chunks) as chunks:
                    async for chunk in chunks:
                        if not await self._send_pieces(send, chunk):
                            break
                    else:
                        await self._send(send, b"", more=False)
            except OSError:
                pass  # the client went away between two frames
            group.cancel_scope.cancel()

    async def _send_pieces(self, send: Send, chunk: bytes) -> bool:
        """Send `chunk` in pieces of at most `PIECE_BYTES`; False when the reader was dropped."""
        for start in range(0, len(chunk), PIECE_BYTES):
            if not await self._send(send, chunk[start : start + PIECE_BYTES], more=True):
                return False
        return True

    async def _send(self, send: Send, chunk: bytes, *, more: bool) -> bool:
        """Send one chunk; False when the reader stalled past `stall_seconds` (dropped).

        Returning without finishing the response makes the server close the connection.
        """
        with anyio.move_on_after(self.stall_seconds) as scope:
            await send({"type": "http.response.body", "body": chunk, "more_body": more})
        if scope.cancelled_caught:
            logger.warning(
                "stall=<%ss> | dropping an SSE reader that stopped reading", self.stall_seconds
            )
            self.on_stalled()
            return False
        return True
