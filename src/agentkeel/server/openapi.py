"""The OpenAPI 3.1 document of the native wire, served at ``GET /openapi.json`` (SPEC 3).

Built from the pydantic models that validate requests (`agentkeel.runtime.wire`) and
the models of what the server answers (`agentkeel.server.openapi_models`), so there is
one source: change a model and the document follows. The error codes come from the
error classes themselves (every `AgentkeelError` subclass with its HTTP status, as
`error_response` maps it), so a new error class is documented the day it is written.
The A2A binding's endpoints are listed with their paths and methods; their bodies are
A2A's (JSON-RPC 2.0 and the HTTP+JSON binding of the A2A specification), not ours.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema
from starlette.requests import Request
from starlette.responses import JSONResponse

from agentkeel.bindings.agui.request import RunAgentInput
from agentkeel.bindings.ai_sdk.request import ChatTransportBody
from agentkeel.bindings.openai.request import ChatRequest
from agentkeel.ids import DEFINITION_NAME_PATTERN
from agentkeel.runtime.wire import ForkRequest, SendRequest
from agentkeel.server import openapi_models as out
from agentkeel.server.error_codes import error_codes
from agentkeel.server.memory_query import MemoryItemQuery, MemoryListQuery
from agentkeel.server.openapi_conversations import conversation_paths
from agentkeel.server.openapi_parts import (
    CONTEXT_ID,
    REF,
    json_body,
    ok,
    operation,
    param,
    query_params,
)

__all__ = ["build_document", "openapi_endpoint"]

_REQUESTS: tuple[type[BaseModel], ...] = (
    SendRequest,
    ForkRequest,
    RunAgentInput,
    ChatRequest,
    ChatTransportBody,
)
"""The request models: the same ones the handlers validate bodies with."""
_MODELS: tuple[type[BaseModel], ...] = (
    out.SendResult,
    out.DoneFrame,
    out.EventFrame,
    out.ErrorBody,
    out.AgentList,
    out.Health,
    out.MemoryPage,
    out.DeletedCount,
    out.ContextPage,
    out.ContextSummary,
    out.TranscriptPage,
    out.ForkCreated,
    out.CancelAccepted,
)


def _schemas() -> dict[str, Any]:
    _, top = models_json_schema(
        [
            *((model, "validation") for model in _REQUESTS),
            *((model, "serialization") for model in _MODELS),
        ],
        by_alias=True,
        ref_template=REF,
    )
    schemas: dict[str, Any] = top.get("$defs", {})
    send = schemas["SendRequest"]
    send["properties"]["contextId"] = {"anyOf": [CONTEXT_ID, {"type": "null"}]}
    return schemas


def _turn_params() -> list[dict[str, Any]]:
    return [param("Idempotency-Key", "header", {"type": "string", "maxLength": 200}, False)]


def _sse(summary: str) -> dict[str, Any]:
    """A stream's answer; the schema is that of one event, as OpenAPI 3.2's ``itemSchema``."""
    frames = {"oneOf": [{"$ref": REF.format(model=n)} for n in ("EventFrame", "DoneFrame")]}
    event = {
        "type": "object",
        "required": ["data"],
        "properties": {
            "id": {"type": "string", "pattern": "^[0-9]+$"},
            "data": {
                "type": "string",
                "contentMediaType": "application/json",
                "contentSchema": frames,
            },
        },
    }
    return {
        "200": {
            "description": summary + " (one frame per event; the last one is the DoneFrame)",
            "content": {"text/event-stream": {"schema": event}},
        }
    }


def _native(codes: dict[str, tuple[int, str]], name: dict[str, Any]) -> dict[str, Any]:
    agent = param("name", "path", name, True)
    context = param("context_id", "path", CONTEXT_ID, True)
    ok_json = {"description": "ok"}
    return {
        "/agents": {"get": operation("the served agents", ok(ok_json, "AgentList"), codes)},
        "/agents/{name}/stream": {
            "post": operation(
                "run one turn, as server-sent events",
                _sse("the frames of the run"),
                codes,
                params=[agent, *_turn_params()],
                body="SendRequest",
                more=(409, 422),
            )
        },
        "/agents/{name}/send": {
            "post": operation(
                "run one turn, answer its SendResult",
                ok(ok_json, "SendResult"),
                codes,
                params=[agent, *_turn_params()],
                body="SendRequest",
                more=(409, 422),
            )
        },
        "/agents/{name}/contexts/{context_id}/stream": {
            "get": operation(
                "reconnect: replay after Last-Event-ID, then follow live",
                _sse("the replayed and live frames"),
                codes,
                params=[
                    agent,
                    context,
                    param("Last-Event-ID", "header", {"type": "string"}, False),
                ],
            )
        },
        "/agents/{name}/contexts/{context_id}": {
            "delete": operation(
                "forget a context",
                {"204": {"description": "deleted"}},
                codes,
                params=[agent, context],
            )
        },
        "/agents/{name}/memory": {
            "get": operation(
                "the caller's remembered items, or the matches of q",
                ok(ok_json, "MemoryPage"),
                codes,
                params=[agent, *query_params(MemoryListQuery)],
                more=(409, 502),
            ),
            "delete": operation(
                "forget all of the caller's items",
                ok(ok_json, "DeletedCount"),
                codes,
                params=[agent],
            ),
        },
        "/agents/{name}/memory/{key}": {
            "delete": operation(
                "forget one item",
                {"204": {"description": "deleted"}},
                codes,
                params=[
                    agent,
                    param("key", "path", {"type": "string", "minLength": 1}, True),
                    *query_params(MemoryItemQuery),
                ],
            )
        },
        "/healthz": {"get": operation("liveness", ok(ok_json, "Health"), codes)},
        "/readyz": {"get": operation("readiness", ok(ok_json, "Health"), codes)},
        "/metrics": {
            "get": operation(
                "Prometheus text format",
                {"200": {"description": "ok", "content": {"text/plain": {"schema": {}}}}},
                codes,
            )
        },
        "/openapi.json": {
            "get": operation(
                "this document",
                {"200": {"description": "ok", "content": {"application/json": {"schema": {}}}}},
                codes,
            )
        },
    }


_A2A_PATHS: tuple[tuple[str, str, str], ...] = (
    ("get", "/agents/{name}/a2a/.well-known/agent-card.json", "the public A2A agent card"),
    ("post", "/agents/{name}/a2a", "A2A JSON-RPC 2.0"),
    ("post", "/agents/{name}/a2a/", "A2A JSON-RPC 2.0"),
)
"""The A2A binding (SPEC 6); its HTTP+JSON routes are added from `_A2A_REST`."""

_A2A_REST: tuple[tuple[str, str], ...] = (
    ("post", "/message:send"),
    ("post", "/message:stream"),
    ("get", "/tasks"),
    ("get", "/tasks/{id}"),
    ("post", "/tasks/{id}:cancel"),
    ("get", "/tasks/{id}:subscribe"),
    ("post", "/tasks/{id}:subscribe"),
    ("post", "/tasks/{id}/pushNotificationConfigs"),
    ("get", "/tasks/{id}/pushNotificationConfigs"),
    ("get", "/tasks/{id}/pushNotificationConfigs/{push_id}"),
    ("delete", "/tasks/{id}/pushNotificationConfigs/{push_id}"),
    ("get", "/extendedAgentCard"),
)
"""The HTTP+JSON binding below ``/agents/{name}/a2a/v1`` (the SDK's routes, SPEC 6)."""


def _binding(name: dict[str, Any]) -> dict[str, Any]:
    agent = param("name", "path", name, True)
    # A2A answers in its own shapes (JSON-RPC errors, AIP-193 errors), so its bodies
    # are any JSON here and the fuzzing checks them for 5xx, traces and secrets only
    anything = {"description": "an A2A answer", "content": {"application/json": {"schema": {}}}}
    paths: dict[str, Any] = {}
    entries = [
        *_A2A_PATHS,
        *(
            ("", f"/agents/{{name}}/a2a/v1{tenant}{p}", m)
            for m, p in _A2A_REST
            for tenant in ("", "/{tenant}")
        ),
    ]
    for method, path, summary in entries:
        verb = method or summary
        params = [agent]
        for extra in ("tenant", "id", "push_id"):
            if "{" + extra + "}" in path:
                params.append(param(extra, "path", {"type": "string", "minLength": 1}, True))
        item: dict[str, Any] = {
            "summary": summary if method else "A2A HTTP+JSON",
            "tags": ["a2a"],
            "parameters": params,
            "responses": {"default": anything},
        }
        if verb in ("post", "put"):
            item["requestBody"] = {
                "required": False,
                "content": {"application/json": {"schema": {}}},
            }
        paths.setdefault(path, {})[verb] = item
    return paths


def _spec10_bindings(name: dict[str, Any]) -> dict[str, Any]:
    """The AI SDK, AG-UI and OpenAI-compatible bindings (SPEC 10): our request models.

    Their answers are the protocols' own shapes (UI message stream parts, AG-UI events,
    chat completion chunks, OpenAI error objects), so they are any JSON or any stream here.
    """
    answer = {
        "description": "the protocol's answer (a JSON object, or a stream of events)",
        "content": {"application/json": {"schema": {}}, "text/event-stream": {"schema": {}}},
    }

    def bound(
        summary: str, body: str | None, params: list[dict[str, Any]], **more: Any
    ) -> dict[str, Any]:
        item: dict[str, Any] = {
            "summary": summary,
            "tags": ["bindings"],
            "parameters": params,
            "responses": {**more, "default": answer},
        }
        if body is not None:
            item["requestBody"] = {"required": True, "content": json_body(body)}
        return item

    agent = param("name", "path", name, True)
    model = param("model", "path", {"type": "string", "minLength": 1}, True)
    chat = param("chat_id", "path", CONTEXT_ID, True)
    return {
        "/agents/{name}/ai-sdk": {
            "post": bound("AI SDK UI message stream: one turn", "ChatTransportBody", [agent])
        },
        "/agents/{name}/ai-sdk/{chat_id}/stream": {
            "get": bound(
                "AI SDK: resume the active stream",
                None,
                [agent, chat],
                **{"204": {"description": "no stream is active"}},
            )
        },
        "/agents/{name}/ag-ui": {"post": bound("AG-UI: run one turn", "RunAgentInput", [agent])},
        "/v1/chat/completions": {
            "post": bound("OpenAI-compatible chat completions", "ChatRequest", [])
        },
        "/v1/models": {"get": bound("OpenAI-compatible: the served agents", None, [])},
        "/v1/models/{model}": {"get": bound("OpenAI-compatible: one agent", None, [model])},
    }


def build_document(definitions: Iterable[str], *, ui: bool = False) -> dict[str, Any]:
    """The OpenAPI 3.1 document of a server serving `definitions` (the agents' names)."""
    names = sorted(definitions)
    name: dict[str, Any] = {"type": "string", "pattern": DEFINITION_NAME_PATTERN.pattern}
    if names:
        name["enum"] = names
    codes = error_codes()
    paths = {**_native(codes, name), **_binding(name), **_spec10_bindings(name)}
    for path, item in conversation_paths(codes, name).items():
        paths.setdefault(path, {}).update(item)  # beside reconnect and delete
    if ui:
        page = {"200": {"description": "the demo chat page", "content": {"text/html": {}}}}
        paths["/"] = {"get": operation("the demo chat page", page, codes)}
        asset = param("path", "path", {"type": "string", "minLength": 1}, True)
        paths["/assets/{path}"] = {
            "get": {
                "summary": "the page's scripts and styles",
                "parameters": [asset],
                "responses": {"default": {"description": "a file, or 404"}},
            }
        }
    return {
        "openapi": "3.1.0",
        "info": {"title": "agentkeel native wire", "version": "1"},
        "paths": paths,
        "components": {
            "schemas": _schemas(),
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
            },
        },
        "x-error-codes": {
            code: {"status": status, "description": doc} for code, (status, doc) in codes.items()
        },
    }


async def openapi_endpoint(request: Request) -> JSONResponse:
    """``GET /openapi.json``: the document of this server's agents."""
    document = request.app.state.openapi
    return JSONResponse(document)
