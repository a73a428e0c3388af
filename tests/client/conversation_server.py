"""A wire fixture: a small Starlette app speaking SPEC section 3's conversation endpoints.

It is not agentkeel's server (whose conversation endpoints are built elsewhere): it is
a stand-in that answers exactly as SPEC writes the wire, so the client's methods are
tested over real HTTP and SSE on loopback. Its "model" echoes: a turn with message
``m`` answers ``Echo: m``; a regenerated answer is ``Echo again (n): m``. A message
starting with ``wait`` keeps its run going until it is cancelled.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import anyio
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

JSON = dict[str, object]


@dataclass
class Context:
    """One stored conversation."""

    id: str
    created_at: str
    updated_at: str
    messages: list[JSON] = field(default_factory=list)
    running: tuple[str, anyio.Event] | None = None


@dataclass
class ConversationWire:
    """The fixture's state, readable by the tests: contexts and the requests seen."""

    contexts: dict[str, Context] = field(default_factory=dict)
    requests: list[tuple[str, str, JSON]] = field(default_factory=list)
    transcript: bool = True
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _clock: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    regenerations: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def mint(self, prefix: str, digits: int) -> str:
        return f"{prefix}-{next(self._ids):0{digits}x}"

    def now(self) -> str:
        return f"2026-12-01T08:{next(self._clock) // 60:02d}:{next(self._clock) % 60:02d}Z"

    def summary(self, context: Context) -> JSON:
        first = next((m for m in context.messages if m["role"] == "user"), None)
        title = str(first["text"])[:80] if first is not None and self.transcript else ""
        return {
            "contextId": context.id,
            "title": title,
            "createdAt": context.created_at,
            "updatedAt": context.updated_at,
            "messageCount": len(context.messages),
            "status": "idle" if context.running is None else "running",
        }


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


def _limit(value: str | None, top: int, default: int) -> int | None:
    if value is None:
        return default
    return int(value) if value.isdigit() and 1 <= int(value) <= top else None


def _cut(messages: list[JSON], replace: object, regenerate: object) -> list[JSON] | None:
    """The history a turn keeps: before the replaced or regenerated message (None: no such)."""
    cut = replace if replace is not None else regenerate
    if cut is None:
        return messages
    role = "user" if replace is not None else "assistant"
    index = next((i for i, m in enumerate(messages) if m["id"] == cut and m["role"] == role), None)
    return None if index is None else messages[:index]


class _Handlers:
    """The endpoints, over one ConversationWire."""

    def __init__(self, wire: ConversationWire) -> None:
        self.wire = wire

    async def record(self, request: Request) -> JSON:
        raw = await request.body()
        body = json.loads(raw) if raw else {}
        self.wire.requests.append(
            (request.method, request.url.path + "?" + request.url.query, body)
        )
        return body if isinstance(body, dict) else {}

    def context_for(self, context_id: object, *, create: bool) -> Context | None:
        """The stored context `context_id`, or a new one when `create` (None: none)."""
        context = self.wire.contexts.get(context_id) if isinstance(context_id, str) else None
        if context is None and create:
            at = self.wire.now()
            new_id = context_id if isinstance(context_id, str) else self.wire.mint("ctx", 36)
            context = Context(id=new_id, created_at=at, updated_at=at)
            self.wire.contexts[new_id] = context
        return context

    def answer(self, question: str, *, again: bool) -> str:
        """The echo model's answer (numbered when regenerated)."""
        if not again:
            return f"Echo: {question}"
        return f"Echo again ({next(self.wire.regenerations)}): {question}"

    async def turn(self, request: Request) -> Response:
        body = await self.record(request)
        streaming = request.url.path.endswith("/stream")
        replace, regenerate = body.get("replace"), body.get("regenerate")
        context = self.context_for(
            body.get("contextId"), create=replace is None and regenerate is None
        )
        if context is None:
            return _error(404, "context_not_found", "no such context")
        if context.running is not None and body.get("multitask") == "reject":
            return _error(409, "context_busy", "the context is running a turn")
        kept = _cut(context.messages, replace, regenerate)
        if kept is None:
            return _error(404, "message_not_found", f"no such message {replace or regenerate}")
        users = [m for m in kept if m["role"] == "user"]
        question = str(body.get("message") or (users[-1]["text"] if users else ""))
        answer = self.answer(question, again=regenerate is not None)
        run_id = self.wire.mint("run", 24)
        stop = anyio.Event()
        context.running = (run_id, stop)
        stored = context

        async def run() -> AsyncIterator[JSON]:
            yield {"event": {"type": "status", "status": "running"}}
            yield {"event": {"type": "token", "text": answer[:6]}}
            if question.startswith("wait"):
                await stop.wait()
            stored.running = None
            if stop.is_set():
                yield {"done": True, "status": "cancelled", "text": answer[:6], "toolCalls": []}
                return
            yield {"event": {"type": "token", "text": answer[6:]}}
            at = self.wire.now()
            new: list[JSON] = []
            if regenerate is None:
                new.append({"id": self.wire.mint("msg", 24), "role": "user", "text": question})
            new.append({"id": self.wire.mint("msg", 24), "role": "assistant", "text": answer})
            for message in new:
                message.update(toolCalls=[], runId=run_id, createdAt=at)
            stored.messages = [*kept, *new]
            stored.updated_at = at
            yield {"done": True, "status": "completed", "text": answer, "toolCalls": []}

        head = {"contextId": stored.id, "runId": run_id}
        if not streaming:
            frames = [frame async for frame in run()]
            result = {**head, **frames[-1]}
            result.pop("done")
            return JSONResponse(result)

        async def sse() -> AsyncIterator[bytes]:
            number = 0
            async for frame in run():
                number += 1
                yield f"id: {number}\ndata: {json.dumps({**head, **frame})}\n\n".encode()

        return StreamingResponse(sse(), media_type="text/event-stream")

    async def list_contexts(self, request: Request) -> Response:
        await self.record(request)
        limit = _limit(request.query_params.get("limit"), 200, 50)
        cursor = request.query_params.get("cursor", "0")
        if limit is None or not cursor.isdigit():
            return _error(400, "invalid_request", "bad limit or cursor")
        ordered = sorted(self.wire.contexts.values(), key=lambda c: c.updated_at, reverse=True)
        start = int(cursor)
        page = ordered[start : start + limit]
        more = start + limit < len(ordered)
        return JSONResponse(
            {
                "contexts": [self.wire.summary(c) for c in page],
                "nextCursor": str(start + limit) if more else None,
            }
        )

    async def one(self, request: Request) -> Response:
        await self.record(request)
        context = self.wire.contexts.get(request.path_params["context_id"])
        if context is None:
            return _error(404, "context_not_found", "no such context")
        return JSONResponse(self.wire.summary(context))

    async def messages(self, request: Request) -> Response:
        await self.record(request)
        context = self.wire.contexts.get(request.path_params["context_id"])
        if context is None:
            return _error(404, "context_not_found", "no such context")
        if not self.wire.transcript:
            return _error(404, "not_found", "the transcript is turned off")
        limit = _limit(request.query_params.get("limit"), 500, 100)
        if limit is None:
            return _error(400, "invalid_request", "bad limit")
        after = request.query_params.get("after")
        ids = [m["id"] for m in context.messages]
        if after is not None and after not in ids:
            return _error(404, "message_not_found", f"no message {after}")
        start = 0 if after is None else ids.index(after) + 1
        page = context.messages[start : start + limit]
        more = start + limit < len(ids)
        return JSONResponse({"messages": page, "nextCursor": "more" if more else None})

    async def cancel(self, request: Request) -> Response:
        await self.record(request)
        context = self.wire.contexts.get(request.path_params["context_id"])
        if context is None:
            return _error(404, "context_not_found", "no such context")
        if context.running is None:
            return _error(409, "no_active_run", "nothing is running on this context")
        run_id, stop = context.running
        stop.set()
        return JSONResponse({"runId": run_id, "status": "cancelling"}, status_code=202)

    async def fork(self, request: Request) -> Response:
        body = await self.record(request)
        context = self.wire.contexts.get(request.path_params["context_id"])
        if context is None:
            return _error(404, "context_not_found", "no such context")
        kept = context.messages
        message_id = body.get("messageId")
        if message_id is not None:
            ids = [m["id"] for m in kept]
            if message_id not in ids:
                return _error(404, "message_not_found", f"no message {message_id}")
            kept = kept[: ids.index(message_id) + 1]
        new_id = body.get("contextId")
        if isinstance(new_id, str) and new_id in self.wire.contexts:
            return _error(409, "context_exists", f"{new_id} exists already")
        new_id = new_id if isinstance(new_id, str) else self.wire.mint("ctx", 36)
        at = self.wire.now()
        self.wire.contexts[new_id] = Context(
            id=new_id, created_at=at, updated_at=at, messages=[*kept]
        )
        return JSONResponse({"contextId": new_id}, status_code=201)


def build_app(wire: ConversationWire) -> Starlette:
    """The app over `wire`'s state."""
    app = _Handlers(wire)
    base = "/agents/{name}"
    ctx = base + "/contexts/{context_id}"
    return Starlette(
        routes=[
            Route(base + "/send", app.turn, methods=["POST"]),
            Route(base + "/stream", app.turn, methods=["POST"]),
            Route(base + "/contexts", app.list_contexts, methods=["GET"]),
            Route(ctx, app.one, methods=["GET"]),
            Route(ctx + "/messages", app.messages, methods=["GET"]),
            Route(ctx + "/cancel", app.cancel, methods=["POST"]),
            Route(ctx + "/fork", app.fork, methods=["POST"]),
        ]
    )


@contextmanager
def serve_conversations(*, transcript: bool = True) -> Iterator[tuple[str, ConversationWire]]:
    """Run the fixture with uvicorn on a free loopback port until the block ends."""
    wire = ConversationWire(transcript=transcript)
    config = uvicorn.Config(build_app(wire), host="127.0.0.1", port=0, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the conversation wire fixture did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", wire
    finally:
        server.should_exit = True
        thread.join(timeout=10)
