"""SSEResponse: a run's frames as a ``text/event-stream`` response.

The frames themselves (numbering, retention, fan-out) live in `agentkeel.runtime`; this
is only the HTTP end of them.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing

import anyio
from starlette.types import Receive, Scope, Send

__all__ = ["SSEResponse"]

_SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


class SSEResponse:
    """A pure ASGI ``text/event-stream`` response that stops when the client goes away.

    Stopping only ends this response: the run it reads from goes on in the server's
    task group and keeps its frames for a reconnect.
    """

    def __init__(
        self, chunks: AsyncGenerator[bytes, None], headers: Sequence[tuple[bytes, bytes]] = ()
    ):
        self.chunks = chunks
        self.headers = [*_SSE_HEADERS, *headers]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Send the headers, then every chunk, until the end or the client's disconnect."""
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
                        body = {"type": "http.response.body", "body": chunk, "more_body": True}
                        await send(body)
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            except OSError:
                pass  # the client went away between two frames
            group.cancel_scope.cancel()
