"""The native wire's endpoints: parse, find the context, run, encode (SPEC 3).

Every handler reads the caller's principal from ``scope["state"]["principal"]`` (None
while authentication is off), and every context key includes it, so an authentication
middleware is all it takes to give each principal contexts of their own.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from functools import partial

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from agentkeel.auth_settings import PRINCIPAL
from agentkeel.errors import ContextNotFoundError, InvalidRequestError
from agentkeel.ids import new_context_id, validate_context_id
from agentkeel.messages import JSONValue
from agentkeel.runtime.coordination_registry import coordination_health
from agentkeel.runtime.runs import RunJob, ServerRuntime
from agentkeel.runtime.wire import parse_send_request
from agentkeel.server.errors import AgentNotFoundError, RunNotFoundError
from agentkeel.server.limits import JSON_BODY
from agentkeel.server.sse_response import SSEResponse
from agentkeel.storage.base import SessionKey

__all__ = [
    "PRINCIPAL",
    "cancel",
    "delete_context",
    "healthz",
    "list_agents",
    "metrics",
    "readyz",
    "reconnect",
    "send",
    "stream",
]

logger = logging.getLogger(__name__)

_MISSING = object()


def _runtime(request: Request) -> ServerRuntime:
    runtime: ServerRuntime = request.app.state.runtime
    return runtime


def _principal(request: Request) -> str | None:
    principal = request.scope.get("state", {}).get(PRINCIPAL)
    return principal if isinstance(principal, str) and principal else None


def _definition(request: Request) -> str:
    name = request.path_params["name"]
    if name not in _runtime(request).framework.definitions:
        raise AgentNotFoundError(f"no agent is named {name!r}")
    return str(name)


def _key(request: Request, definition: str, context_id: object) -> SessionKey:
    return SessionKey(
        definition=definition,
        context_id=validate_context_id(context_id),
        principal=_principal(request),
    )


def _body(request: Request) -> JSONValue:
    body = request.scope.get("state", {}).get(JSON_BODY, _MISSING)
    if body is _MISSING:
        raise InvalidRequestError("the request body must be a JSON object")
    value: JSONValue = body
    return value


async def stream(request: Request) -> Response | SSEResponse:
    """``POST /agents/{name}/stream``: run one turn and stream its frames as SSE."""
    runtime = _runtime(request)
    slot = await runtime.admission.stream_slot(_principal(request))
    try:
        job = await _start(request, runtime)
    except BaseException:
        await runtime.admission.release_slot(slot)
        raise
    if job.channel is None:
        raise RuntimeError("internal error: a started turn has no channel")
    return _sse(runtime, slot, job.channel.follow(job.start_after, _heartbeat(runtime)))


def _heartbeat(runtime: ServerRuntime) -> float:
    return runtime.framework.server.heartbeat_seconds


def _sse(
    runtime: ServerRuntime, slot: str | None, chunks: AsyncGenerator[bytes, None]
) -> SSEResponse:
    """The response of a stream holding `slot`, under the slow-reader limits."""
    limits = runtime.framework.server.limits
    return SSEResponse(
        chunks,
        on_close=partial(runtime.admission.release_slot, slot),
        stall_seconds=limits.stream_stall_seconds,
        on_stalled=lambda: runtime.metrics.refusals.inc("stream_stalled"),
    )


async def send(request: Request) -> Response:
    """``POST /agents/{name}/send``: run one turn and answer its SendResult."""
    runtime = _runtime(request)
    job = await _start(request, runtime)
    await job.finished.wait()
    if job.result is None:
        raise RuntimeError("internal error: a finished turn has no result")
    return JSONResponse(job.result)


async def _start(request: Request, runtime: ServerRuntime) -> RunJob:
    definition = _definition(request)
    body = _body(request)
    parsed = parse_send_request(body)
    context_id = new_context_id() if parsed.context_id is None else parsed.context_id
    key = _key(request, definition, context_id)
    if (parsed.replace or parsed.regenerate) and not await runtime.exists(key):
        raise ContextNotFoundError(f"no context {key.context_id!r} for agent {definition!r}")
    return await runtime.submit(
        key,
        parsed,
        idempotency_key=request.headers.get("idempotency-key"),
        body=body,
        sent_context_id=None if parsed.context_id is None else key.context_id,
    )


async def reconnect(request: Request) -> SSEResponse:
    """``GET /agents/{name}/contexts/{contextId}/stream``: replay, then follow live.

    With ``Last-Event-ID: n`` the frames of the context's latest run after ``n`` are
    replayed, then followed live up to the next ``done`` frame; without the header the
    latest segment of the run (since its last suspension) is replayed from its start.
    """
    runtime = _runtime(request)
    key = _key(request, _definition(request), request.path_params["context_id"])
    header = request.headers.get("last-event-id")
    if header is not None and not header.strip().isdigit():
        raise InvalidRequestError("Last-Event-ID must be a frame id (a non-negative integer)")
    channel = await runtime.latest(key)
    if channel is None:
        if await runtime.exists(key):
            raise RunNotFoundError(
                "no run events are retained for this context (none ran, or they expired)"
            )
        raise ContextNotFoundError(f"no context {key.context_id!r} for agent {key.definition!r}")
    after = channel.latest_segment_start() if header is None else int(header)
    slot = await runtime.admission.stream_slot(_principal(request))
    return _sse(runtime, slot, channel.follow(after, _heartbeat(runtime)))


async def cancel(request: Request) -> JSONResponse:
    """``POST /agents/{name}/contexts/{contextId}/cancel``: stop its run on the server.

    Answers once the cancel reached the process running the turn (``202``); the run's
    stream then ends with its ``done`` frame, status ``cancelled``.
    """
    runtime = _runtime(request)
    key = _key(request, _definition(request), request.path_params["context_id"])
    run_id = await runtime.cancel_context(key)
    return JSONResponse({"runId": run_id, "status": "cancelling"}, status_code=202)


async def delete_context(request: Request) -> Response:
    """``DELETE /agents/{name}/contexts/{contextId}``: forget everything about a context."""
    runtime = _runtime(request)
    key = _key(request, _definition(request), request.path_params["context_id"])
    if not await runtime.delete_context(key):
        raise ContextNotFoundError(f"no context {key.context_id!r} for agent {key.definition!r}")
    return Response(status_code=204)


async def list_agents(request: Request) -> JSONResponse:
    """``GET /agents``: names, descriptions, skills and A2A card URLs; never secrets."""
    base = str(request.base_url).rstrip("/")
    agents = [
        {
            "name": name,
            "description": catalog.description,
            "skills": list(catalog.tools),
            "a2a": f"{base}/agents/{name}/a2a/.well-known/agent-card.json",
        }
        for name, item in _runtime(request).framework.definitions.items()
        for catalog in (item.describe(),)  # a factory's tools are learned lazily
    ]
    return JSONResponse({"agents": agents})


async def healthz(request: Request) -> JSONResponse:
    """``GET /healthz``: the process answers."""
    del request
    return JSONResponse({"status": "ok"})


async def readyz(request: Request) -> JSONResponse:
    """``GET /readyz``: storage is reachable and the server is not draining.

    A coordination part that is unreachable (Redis) makes it ``degraded``, still 200:
    the replica serves and commits turns, only its live fan-out waits for Redis.
    """
    runtime = _runtime(request)
    if runtime.draining:
        return JSONResponse({"status": "draining"}, status_code=503)
    health = await runtime.framework.storage.health()
    if not health.ok:
        logger.warning("readyz | storage is not reachable: %s", health.detail)
        return JSONResponse({"status": "unavailable", "storage": "unreachable"}, status_code=503)
    degraded = await coordination_health(runtime.coordination)
    if degraded:  # turns still run and commit; live frames elsewhere come from storage
        logger.warning("readyz | coordination is degraded: %s", degraded)
        return JSONResponse({"status": "degraded", "coordination": sorted(degraded)})
    return JSONResponse({"status": "ok"})


async def metrics(request: Request) -> PlainTextResponse:
    """``GET /metrics``: Prometheus text format."""
    return PlainTextResponse(
        _runtime(request).metrics.render(), media_type="text/plain; version=0.0.4"
    )
