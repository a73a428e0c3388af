"""The AI SDK endpoints: ``POST /agents/{name}/ai-sdk`` and the resume ``GET``.

Both run on the runtime's `RunFacade` (``request.app.state.runtime``), as the native
wire and A2A do, so a chat started in `useChat` is a context like any other. The
caller's principal is read from ``scope["state"]``, where the authentication
middleware puts it. An error before the stream starts is the server's JSON error
(the transport raises it with the body's text); one during the stream is an ``error``
part.

A new message and an approval's answer are claimed by the client's message id and the
approval id (the runtime's idempotency keys): a POST sent again gets the first one's
stream, from its start, instead of running the turn twice; the same id with another
body is ``422 idempotency_key_reused``. An edit and a regenerate are not claimed: each
one asks for a new answer on purpose.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from agentkeel.auth_settings import PRINCIPAL
from agentkeel.bindings.ai_sdk.parts import HEADERS, PartWriter
from agentkeel.bindings.ai_sdk.regenerate import regenerate_request
from agentkeel.bindings.ai_sdk.request import (
    ApprovalAnswer,
    ChatRequest,
    Edit,
    NewMessage,
    parse_chat_request,
)
from agentkeel.bindings.ai_sdk.stream import approved_calls, ui_parts
from agentkeel.bindings.calls import json_body
from agentkeel.errors import InvalidRequestError
from agentkeel.ids import validate_context_id
from agentkeel.messages import JSONObject
from agentkeel.runtime.facade import RunFacade
from agentkeel.runtime.wire import SendRequest
from agentkeel.storage.base import SessionKey

__all__ = ["ai_sdk_routes"]


def _runtime(request: Request) -> RunFacade:
    runtime: RunFacade = request.app.state.runtime
    return runtime


_SSE = {"cache-control": "no-cache", "x-accel-buffering": "no"} | {
    name.decode(): value.decode() for name, value in HEADERS
}


def _stream(parts: AsyncGenerator[bytes, None]) -> StreamingResponse:
    return StreamingResponse(parts, media_type="text/event-stream", headers=_SSE)


def _unknown(request: Request, runtime: RunFacade) -> Response | None:
    """The 404 for a path naming no agent (None when it names one)."""
    name = request.path_params["name"]
    if name in runtime.framework.definitions:
        return None
    body = {"error": {"code": "agent_not_found", "message": f"no agent is named {name!r}"}}
    return JSONResponse(body, status_code=404)


def _key(request: Request, runtime: RunFacade, context_id: object) -> SessionKey:
    name = request.path_params["name"]
    principal = request.scope.get("state", {}).get(PRINCIPAL)
    return SessionKey(
        definition=str(name),
        context_id=validate_context_id(context_id),
        principal=principal if isinstance(principal, str) and principal else None,
    )


async def _body(request: Request) -> object:
    try:
        return await json_body(request)
    except ValueError:
        raise InvalidRequestError("the request body must be a JSON object") from None


async def chat(request: Request) -> Response:
    """``POST /agents/{name}/ai-sdk``: a `DefaultChatTransport` request, as one turn."""
    runtime = _runtime(request)
    if (unknown := _unknown(request, runtime)) is not None:
        return unknown
    parsed: ChatRequest = parse_chat_request(await _body(request))
    key = _key(request, runtime, parsed.chat_id)
    action = parsed.action
    writer = PartWriter()
    head = b""
    native: JSONObject
    claim: str | None = None
    if isinstance(action, NewMessage):
        # a retried POST (a proxy's, a client's after a reset) joins the first one's run
        native = {"message": action.text, "contextId": key.context_id}
        claim = f"ai-sdk-message:{action.message_id}"
    elif isinstance(action, Edit):
        native = {"message": action.text, "contextId": key.context_id, "replace": action.message_id}
    elif isinstance(action, ApprovalAnswer):
        decision: JSONObject = {"approved": action.approved}
        if action.reason is not None:
            decision["reason"] = action.reason
        resume: JSONObject = {"interruptId": action.approval_id, "decision": decision}
        native = {"contextId": key.context_id, "resume": resume}
        claim = f"ai-sdk-approval:{action.approval_id}"
        latest = await runtime.latest(key)
        if latest is not None:
            writer.shown.update(
                await approved_calls(runtime, key, latest.run_id, action.approval_id)
            )
        if not action.approved:
            head = writer.denied(action.approval_id)
    else:
        native = await regenerate_request(runtime, key, action)
    request_model = SendRequest.model_validate(native)
    job, started = await runtime.submit_claimed(
        key, request_model, idempotency_key=claim, body=native, sent_context_id=key.context_id
    )
    if started:
        job.binding = dict(writer.shown)  # for a retry that joins: the suspension is gone
        job.bound.set()
    else:
        await job.bound.wait()
        if isinstance(job.binding, dict):
            writer.shown.update(job.binding)
    if job.channel is None:
        raise RuntimeError("internal error: a started turn has no channel")
    if isinstance(action, ApprovalAnswer) and job.start_after == 0:
        head = b""  # not a resumed segment after all: nothing was denied in it
    return _stream(ui_parts(runtime, job.channel, job.start_after, writer, head=head))


async def resume(request: Request) -> Response:
    """``GET /agents/{name}/ai-sdk/{chatId}/stream``: the running run, replayed; else 204."""
    runtime = _runtime(request)
    if (unknown := _unknown(request, runtime)) is not None:
        return unknown
    key = _key(request, runtime, request.path_params["chat_id"])
    stream = await runtime.latest(key)
    if stream is None or not stream.active:
        return Response(status_code=204)
    return _stream(ui_parts(runtime, stream, 0, PartWriter(), replay=True))


def ai_sdk_routes() -> list[BaseRoute]:
    """The binding's routes, for `create_app` to mount beside the native wire."""
    return [
        Route("/agents/{name}/ai-sdk", chat, methods=["POST"]),
        Route("/agents/{name}/ai-sdk/{chat_id}/stream", resume, methods=["GET"]),
    ]
