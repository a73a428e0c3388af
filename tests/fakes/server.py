"""Plumbing shared by the fake provider servers: scripted replies, recording, uvicorn.

A fake is a small Starlette app whose answers are scripted per test as `Reply` values:
the exact bytes to send, how to cut them into network writes, and whether to break the
connection half-way. `run_asgi_server` serves any ASGI app over real loopback HTTP from
a background thread, so the code under test goes through sockets, chunked encoding and
its own HTTP client exactly as in production.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import anyio
import uvicorn
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.types import ASGIApp

from agentkeel.messages import JSONObject, JSONValue

__all__ = [
    "BrokenStreamError",
    "RecordedRequest",
    "Reply",
    "ReplyScript",
    "Responder",
    "json_reply",
    "run_asgi_server",
    "split_bytes",
    "sse_pieces",
    "to_response",
]


class BrokenStreamError(Exception):
    """Raised inside the fake app to make uvicorn drop a connection mid-body."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    """One scripted HTTP answer."""

    status: int = 200
    pieces: tuple[bytes, ...] = ()
    """The body, as separate network writes."""
    media_type: str = "text/event-stream"
    headers: Mapping[str, str] = field(default_factory=dict)
    break_after: bool = False
    """Drop the connection after the pieces instead of ending the body properly."""
    delay: float = 0.0
    """Seconds to wait before each piece (slow streams, disconnect tests)."""

    @property
    def body(self) -> bytes:
        """The whole body."""
        return b"".join(self.pieces)


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordedRequest:
    """A request a fake received."""

    method: str
    path: str
    headers: dict[str, str]
    """Header names in lower case."""
    json: JSONObject


def split_bytes(data: bytes, size: int) -> tuple[bytes, ...]:
    """Cut `data` into pieces of `size` bytes (splitting lines and UTF-8 characters)."""
    if size < 1:
        raise ValueError("size must be positive")
    return tuple(data[i : i + size] for i in range(0, len(data), size))


def json_reply(status: int, body: JSONValue, *, headers: Mapping[str, str] | None = None) -> Reply:
    """A non-streamed JSON answer, e.g. an HTTP error."""
    return Reply(
        status=status,
        pieces=(json.dumps(body).encode(),),
        media_type="application/json",
        headers=dict(headers or {}),
    )


Responder = Callable[[RecordedRequest], Reply]


class ReplyScript:
    """A thread-safe queue of replies plus the record of requests, shared by the fakes.

    Tests enqueue replies from the test thread while the server pops them on its own
    thread. When the queue is empty the `responder` (if any) answers; otherwise a
    non-retryable 418 says plainly that the test scripted too few replies.
    """

    def __init__(self, responder: Responder | None = None) -> None:
        self._lock = threading.Lock()
        self._replies: deque[Reply] = deque()
        self._requests: list[RecordedRequest] = []
        self.responder = responder

    @property
    def requests(self) -> list[RecordedRequest]:
        """A copy of the requests received so far, in order."""
        with self._lock:
            return list(self._requests)

    def enqueue(self, *replies: Reply) -> None:
        """Answer the next requests with `replies`, in order."""
        with self._lock:
            self._replies.extend(replies)

    def reset(self) -> None:
        """Forget queued replies and recorded requests (between tests)."""
        with self._lock:
            self._replies.clear()
            self._requests.clear()

    @property
    def pending(self) -> int:
        """How many scripted replies were not used yet."""
        with self._lock:
            return len(self._replies)

    async def record(self, request: Request) -> RecordedRequest:
        """Read and record `request`; its body must be a JSON object."""
        raw = await request.body()
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {"_invalid_json": raw.decode("utf-8", errors="replace")}
        recorded = RecordedRequest(
            method=request.method,
            path=request.url.path,
            headers={key.lower(): value for key, value in request.headers.items()},
            json=body if isinstance(body, dict) else {"_not_an_object": body},
        )
        with self._lock:
            self._requests.append(recorded)
        return recorded

    def next_reply(self, recorded: RecordedRequest) -> Reply:
        """The reply for `recorded`: the next scripted one, else the responder's."""
        with self._lock:
            reply = self._replies.popleft() if self._replies else None
        if reply is not None:
            return reply
        if self.responder is not None:
            return self.responder(recorded)
        return json_reply(
            418, {"error": {"message": "fake server: no scripted reply left for this request"}}
        )


def to_response(reply: Reply) -> Response:
    """The Starlette response that sends `reply` exactly as scripted."""
    if not reply.break_after and reply.delay == 0 and len(reply.pieces) <= 1:
        return Response(
            reply.body,
            status_code=reply.status,
            media_type=reply.media_type,
            headers=dict(reply.headers),
        )

    async def body() -> AsyncIterator[bytes]:
        for piece in reply.pieces:
            if reply.delay:
                await anyio.sleep(reply.delay)
            yield piece
        if reply.break_after:
            raise BrokenStreamError("scripted connection break")

    headers = {"cache-control": "no-cache", **reply.headers}
    return StreamingResponse(
        body(), status_code=reply.status, media_type=reply.media_type, headers=headers
    )


def sse_pieces(frames: Sequence[bytes], chunk_size: int | None) -> tuple[bytes, ...]:
    """Frames as network writes: one per frame, or re-cut every `chunk_size` bytes."""
    if chunk_size is None:
        return tuple(frames)
    return split_bytes(b"".join(frames), chunk_size)


@contextmanager
def run_asgi_server(
    app: ASGIApp,
    *,
    startup_timeout: float = 10.0,
    lifespan: bool = False,
    graceful_timeout: int = 2,
) -> Iterator[str]:
    """Serve `app` with uvicorn on a free loopback port, in a background thread.

    Args:
        app: Any ASGI application.
        startup_timeout: Seconds to wait for the server to accept connections.
        lifespan: Run the app's lifespan (agentkeel's own app needs it).
        graceful_timeout: Seconds open connections get when the server stops.

    Yields:
        The base URL, ``http://127.0.0.1:<port>``.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        lifespan="on" if lifespan else "off",
        loop="asyncio",
        http="h11",
        ws="none",
        log_config=None,
        log_level="critical",
        access_log=False,
        timeout_graceful_shutdown=graceful_timeout,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name=f"uvicorn-{port}", daemon=True
    )
    thread.start()
    try:
        deadline = time.monotonic() + startup_timeout
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the fake server did not start")
            time.sleep(0.005)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


class FakeProviderServer(ABC):
    """What every fake provider shares: a reply script, recorded requests, serving.

    A subclass builds `app` (its one endpoint), sets `name` and `api_suffix` (what
    follows the server's root in the base URL its clients are given), and checks the
    key in its own wire format.
    """

    name = "provider"
    api_suffix = ""

    def __init__(self, *, api_key: str | None = None, responder: Responder | None = None) -> None:
        self.api_key = api_key
        self.script = ReplyScript(responder)
        self._base_url: str | None = None

    @property
    def requests(self) -> list[RecordedRequest]:
        """The requests received so far."""
        return self.script.requests

    @property
    def base_url(self) -> str:
        """The running server's API root, as the provider's clients take it."""
        if self._base_url is None:
            raise RuntimeError(f"the fake {self.name} server is not running; use serve()")
        return self._base_url

    def enqueue(self, *replies: Reply) -> None:
        """Answer the next requests with `replies`, in order."""
        self.script.enqueue(*replies)

    def reset(self) -> None:
        """Forget queued replies and recorded requests."""
        self.script.reset()

    @property
    @abstractmethod
    def app(self) -> ASGIApp:
        """The ASGI app serving the provider's endpoint."""

    @contextmanager
    def serve(self) -> Iterator[str]:
        """Run on loopback; yields the API root to pass as ``base_url``."""
        with run_asgi_server(self.app) as root:
            self._base_url = root + self.api_suffix
            try:
                yield self._base_url
            finally:
                self._base_url = None
