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
from agentkeel.bindings.openai.request import ChatRequest
from agentkeel.ids import DEFINITION_NAME_PATTERN
from agentkeel.runtime.wire import SendRequest
from agentkeel.server import openapi_models as out
from agentkeel.server.error_codes import error_codes

__all__ = ["build_document", "openapi_endpoint"]

_REF = "#/components/schemas/{model}"
_REQUESTS: tuple[type[BaseModel], ...] = (SendRequest, RunAgentInput, ChatRequest)
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
)
_CONTEXT_ID = {
    "type": "string",
    "pattern": r"^(?!.*\.\.)[A-Za-z0-9][A-Za-z0-9._@:-]{0,127}$",
    "description": "SPEC 2: letters, digits and ._@:- (not first), at most 128, no '..'",
}


def _schemas() -> dict[str, Any]:
    _, top = models_json_schema(
        [
            *((model, "validation") for model in _REQUESTS),
            *((model, "serialization") for model in _MODELS),
        ],
        by_alias=True,
        ref_template=_REF,
    )
    schemas: dict[str, Any] = top.get("$defs", {})
    send = schemas["SendRequest"]
    send["properties"]["contextId"] = {"anyOf": [_CONTEXT_ID, {"type": "null"}]}
    return schemas


def _json(ref: str) -> dict[str, Any]:
    return {"application/json": {"schema": {"$ref": _REF.format(model=ref)}}}


def _errors(statuses: Iterable[int], codes: dict[str, tuple[int, str]]) -> dict[str, Any]:
    answers: dict[str, Any] = {}
    for status in sorted(set(statuses)):
        named = sorted(code for code, (known, _) in codes.items() if known == status)
        answers[str(status)] = {
            "description": "codes: " + ", ".join(named) if named else "an error",
            "content": _json("ErrorBody"),
        }
    return answers


_COMMON = (400, 401, 403, 404, 405, 413, 429, 500, 503)
"""What any endpoint may answer: bad input, auth, unknown agent, limits, the guards."""


def _param(name: str, where: str, schema: dict[str, Any], required: bool) -> dict[str, Any]:
    return {"name": name, "in": where, "required": required, "schema": schema}


def _operation(
    summary: str,
    ok: dict[str, Any],
    codes: dict[str, tuple[int, str]],
    *,
    params: list[dict[str, Any]] | None = None,
    body: str | None = None,
    more: Iterable[int] = (),
) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "summary": summary,
        "parameters": params or [],
        "responses": {**ok, **_errors([*_COMMON, *more], codes)},
    }
    if body is not None:
        operation["requestBody"] = {"required": True, "content": _json(body)}
    return operation


def _turn_params() -> list[dict[str, Any]]:
    return [_param("Idempotency-Key", "header", {"type": "string", "maxLength": 200}, False)]


def _sse(summary: str) -> dict[str, Any]:
    """A stream's answer; the schema is that of one event, as OpenAPI 3.2's ``itemSchema``."""
    frames = {"oneOf": [{"$ref": _REF.format(model=n)} for n in ("EventFrame", "DoneFrame")]}
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
    agent = _param("name", "path", name, True)
    context = _param("context_id", "path", _CONTEXT_ID, True)
    limit = _param("limit", "query", {"type": "string"}, False)
    ok_json = {"description": "ok"}
    return {
        "/agents": {"get": _operation("the served agents", _ok(ok_json, "AgentList"), codes)},
        "/agents/{name}/stream": {
            "post": _operation(
                "run one turn, as server-sent events",
                _sse("the frames of the run"),
                codes,
                params=[agent, *_turn_params()],
                body="SendRequest",
                more=(409, 422),
            )
        },
        "/agents/{name}/send": {
            "post": _operation(
                "run one turn, answer its SendResult",
                _ok(ok_json, "SendResult"),
                codes,
                params=[agent, *_turn_params()],
                body="SendRequest",
                more=(409, 422),
            )
        },
        "/agents/{name}/contexts/{context_id}/stream": {
            "get": _operation(
                "reconnect: replay after Last-Event-ID, then follow live",
                _sse("the replayed and live frames"),
                codes,
                params=[
                    agent,
                    context,
                    _param("Last-Event-ID", "header", {"type": "string"}, False),
                ],
            )
        },
        "/agents/{name}/contexts/{context_id}": {
            "delete": _operation(
                "forget a context",
                {"204": {"description": "deleted"}},
                codes,
                params=[agent, context],
            )
        },
        "/agents/{name}/memory": {
            "get": _operation(
                "the caller's remembered items, or the matches of q",
                _ok(ok_json, "MemoryPage"),
                codes,
                params=[
                    agent,
                    limit,
                    _param("cursor", "query", {"type": "string"}, False),
                    _param("q", "query", {"type": "string"}, False),
                ],
                more=(409, 502),
            ),
            "delete": _operation(
                "forget all of the caller's items",
                _ok(ok_json, "DeletedCount"),
                codes,
                params=[agent],
            ),
        },
        "/agents/{name}/memory/{key}": {
            "delete": _operation(
                "forget one item",
                {"204": {"description": "deleted"}},
                codes,
                params=[
                    agent,
                    _param("key", "path", {"type": "string", "minLength": 1}, True),
                    _param("namespace", "query", {"type": "string"}, False),
                ],
            )
        },
        "/healthz": {"get": _operation("liveness", _ok(ok_json, "Health"), codes)},
        "/readyz": {"get": _operation("readiness", _ok(ok_json, "Health"), codes)},
        "/metrics": {
            "get": _operation(
                "Prometheus text format",
                {"200": {"description": "ok", "content": {"text/plain": {"schema": {}}}}},
                codes,
            )
        },
        "/openapi.json": {
            "get": _operation(
                "this document",
                {"200": {"description": "ok", "content": {"application/json": {"schema": {}}}}},
                codes,
            )
        },
    }


def _ok(base: dict[str, Any], ref: str) -> dict[str, Any]:
    return {"200": {**base, "content": _json(ref)}}


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
    agent = _param("name", "path", name, True)
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
                params.append(_param(extra, "path", {"type": "string", "minLength": 1}, True))
        operation: dict[str, Any] = {
            "summary": summary if method else "A2A HTTP+JSON",
            "tags": ["a2a"],
            "parameters": params,
            "responses": {"default": anything},
        }
        if verb in ("post", "put"):
            operation["requestBody"] = {
                "required": False,
                "content": {"application/json": {"schema": {}}},
            }
        paths.setdefault(path, {})[verb] = operation
    return paths


def _spec10_bindings(name: dict[str, Any]) -> dict[str, Any]:
    """The AG-UI and OpenAI-compatible bindings (SPEC 10): our request models, their answers.

    Their answers are the protocols' own shapes (AG-UI events, chat completion chunks,
    OpenAI error objects), so they are any JSON or any stream here.
    """
    answer = {
        "description": "the protocol's answer (a JSON object, or a stream of events)",
        "content": {"application/json": {"schema": {}}, "text/event-stream": {"schema": {}}},
    }

    def operation(summary: str, body: str | None, params: list[dict[str, Any]]) -> dict[str, Any]:
        item: dict[str, Any] = {
            "summary": summary,
            "tags": ["bindings"],
            "parameters": params,
            "responses": {"default": answer},
        }
        if body is not None:
            item["requestBody"] = {"required": True, "content": _json(body)}
        return item

    agent = _param("name", "path", name, True)
    model = _param("model", "path", {"type": "string", "minLength": 1}, True)
    return {
        "/agents/{name}/ag-ui": {
            "post": operation("AG-UI: run one turn", "RunAgentInput", [agent])
        },
        "/v1/chat/completions": {
            "post": operation("OpenAI-compatible chat completions", "ChatRequest", [])
        },
        "/v1/models": {"get": operation("OpenAI-compatible: the served agents", None, [])},
        "/v1/models/{model}": {"get": operation("OpenAI-compatible: one agent", None, [model])},
    }


def build_document(definitions: Iterable[str], *, ui: bool = False) -> dict[str, Any]:
    """The OpenAPI 3.1 document of a server serving `definitions` (the agents' names)."""
    names = sorted(definitions)
    name: dict[str, Any] = {"type": "string", "pattern": DEFINITION_NAME_PATTERN.pattern}
    if names:
        name["enum"] = names
    codes = error_codes()
    paths = {**_native(codes, name), **_binding(name), **_spec10_bindings(name)}
    if ui:
        page = {"200": {"description": "the demo chat page", "content": {"text/html": {}}}}
        paths["/"] = {"get": _operation("the demo chat page", page, codes)}
        asset = _param("path", "path", {"type": "string", "minLength": 1}, True)
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
