"""The OpenAPI document: every served route is in it, and every error code it names is real."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from starlette.routing import BaseRoute, Mount, Route

from agentkeel.server import create_app
from agentkeel.server.error_codes import WIRE_ERRORS, error_codes, placeholder, wire_error_classes
from agentkeel.server.errors import error_response, error_status
from openapi import API_KEY, framework, served

_PARAM = re.compile(r"\{([^}:]+)(:[^}]+)?\}")


def _walk(routes: list[BaseRoute], prefix: str = "") -> Iterator[tuple[str, str]]:
    for route in routes:
        if isinstance(route, Route):
            for method in sorted((route.methods or set()) - {"HEAD"}):
                yield method.lower(), prefix + route.path
        elif isinstance(route, Mount):
            inner = getattr(route.app, "app", route.app)  # a pure ASGI wrapper around a router
            sub = route.routes or getattr(inner, "routes", None)
            if not sub:
                yield "get", prefix + route.path + "/{path}"  # static files
            else:
                yield from _walk(list(sub), prefix + route.path)


def _template(path: str, agents: set[str]) -> str:
    path = _PARAM.sub(lambda m: "{" + m.group(1) + "}", path)
    parts = path.split("/")
    if len(parts) > 2 and parts[1] == "agents" and parts[2] in agents:
        parts[2] = "{name}"  # the A2A routes are mounted once per agent
    return "/".join(parts)


def _document(tmp_path: Path) -> tuple[dict[str, object], list[tuple[str, str]]]:
    path = tmp_path / "framework.json"
    path.write_text(json.dumps(framework(tmp_path)), encoding="utf-8")
    app = create_app(path)
    agents = {"demo", "scripted"}
    served_routes = sorted({(m, _template(p, agents)) for m, p in _walk(list(app.routes))})
    return app.state.openapi, served_routes


def test_every_route_the_app_serves_is_documented(tmp_path: Path) -> None:
    document, routes = _document(tmp_path)
    paths = document["paths"]
    assert isinstance(paths, dict)
    missing = [(m, p) for m, p in routes if m not in paths.get(p, {})]
    assert missing == []
    assert len(routes) > 20  # the native wire, memory, and the A2A binding's routes
    assert ("post", "/agents/{name}/a2a/v1/message:send") in routes
    documented = {(m, p) for p, item in paths.items() for m in item}
    assert documented - set(routes) == set()  # and nothing documented is not served


def test_the_document_is_openapi_3_1_with_the_wire_models(tmp_path: Path) -> None:
    document, _ = _document(tmp_path)
    assert document["openapi"] == "3.1.0"
    schemas = document["components"]["schemas"]  # type: ignore[index]
    for model in ("SendRequest", "SendResult", "EventFrame", "DoneFrame", "ErrorBody"):
        assert model in schemas
    send = schemas["SendRequest"]["properties"]
    assert {"message", "contextId", "resume"} <= set(send)
    events = {
        schemas[ref["$ref"].rsplit("/", 1)[1]]["properties"]["type"]["const"]
        for ref in schemas["EventFrame"]["properties"]["event"]["oneOf"]
    }
    assert events == {
        *("status", "step", "token", "thinking"),
        *("tool_call", "tool_result", "interrupt", "error"),
    }
    name = document["paths"]["/agents/{name}/send"]["post"]["parameters"][0]  # type: ignore[index]
    assert name["schema"]["enum"] == ["demo", "scripted"]


def test_every_documented_error_code_is_raised_by_an_error_class_with_that_status() -> None:
    documented = error_codes()
    by_class: dict[str, set[int]] = {}
    for cls in wire_error_classes():
        code = cls.code
        if isinstance(code, str):
            error = placeholder(cls)
            status, body = error_response(error)
            assert json.loads(body)["error"]["code"] == code
            assert error_status(error) == status
            by_class.setdefault(code, set()).add(status)
    for code, (status, _) in documented.items():
        if code in WIRE_ERRORS:
            continue
        assert status in by_class[code], code
    assert set(by_class) <= set(documented)
    assert documented["context_busy"][0] == 409
    assert documented["payload_too_large"][0] == 413
    assert documented["unauthorized"][0] == 401


_DRIVEN: list[tuple[str, str, str, dict[str, object], int, str]] = [
    # (name, method, path, request options, status, code)
    ("bad json", "POST", "/agents/demo/send", {"content": b"{nope"}, 400, "invalid_json"),
    ("not an object", "POST", "/agents/demo/send", {"json": [1]}, 400, "invalid_request"),
    ("unknown field", "POST", "/agents/demo/send", {"json": {"x": 1}}, 400, "invalid_request"),
    (
        "bad context id",
        "POST",
        "/agents/demo/send",
        {"json": {"message": "hi", "contextId": "../up"}},
        400,
        "invalid_context_id",
    ),
    (
        "unknown agent",
        "POST",
        "/agents/nobody/send",
        {"json": {"message": "hi"}},
        404,
        "agent_not_found",
    ),
    ("no route", "GET", "/nowhere", {}, 404, "not_found"),
    ("wrong method", "PUT", "/agents", {}, 405, "method_not_allowed"),
    (
        "too large",
        "POST",
        "/agents/demo/send",
        {"content": b"{" + b" " * 70000},
        413,
        "payload_too_large",
    ),
    ("unknown context", "DELETE", "/agents/demo/contexts/ctx-none", {}, 404, "context_not_found"),
    ("no run", "GET", "/agents/demo/contexts/ctx-none/stream", {}, 404, "context_not_found"),
    ("no key", "GET", "/agents", {"headers": {"x-api-key": ""}}, 401, "unauthorized"),
    (
        "bad token",
        "GET",
        "/agents",
        {"headers": {"authorization": "Bearer a.b.c"}},
        401,
        "unauthorized",
    ),
]


@pytest.mark.parametrize(
    ("method", "path", "options", "status", "code"),
    [case[1:] for case in _DRIVEN],
    ids=[case[0] for case in _DRIVEN],
)
def test_a_real_server_answers_each_documented_code(
    tmp_path: Path, method: str, path: str, options: dict[str, object], status: int, code: str
) -> None:
    with served(tmp_path) as url:
        options = dict(options)
        headers = {"x-api-key": API_KEY, **options.pop("headers", {})}  # type: ignore[dict-item]
        if headers.get("x-api-key") == "":
            headers.pop("x-api-key")
        response = httpx.request(method, url + path, headers=headers, timeout=10, **options)  # type: ignore[arg-type]
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code
    assert error_codes()[code][0] == status


def test_the_error_modules_list_names_every_module_that_defines_a_code() -> None:
    import agentkeel
    from agentkeel.server import error_codes as table

    src = Path(agentkeel.__file__).parent
    defining = {
        "agentkeel." + ".".join(path.relative_to(src).with_suffix("").parts)
        for path in src.rglob("*.py")
        if re.search(r'^    code = "', path.read_text(encoding="utf-8"), re.MULTILINE)
    }
    native = {m for m in defining if not m.startswith(("agentkeel.client", "agentkeel.bindings"))}
    assert native == set(table.ERROR_MODULES)


def test_the_conversation_endpoints_answer_their_models(tmp_path: Path) -> None:
    document, _ = _document(tmp_path)
    paths: dict[str, dict[str, dict[str, object]]] = document["paths"]  # type: ignore[assignment]
    one = "/agents/{name}/contexts/{context_id}"

    def answer(path: str, method: str, status: str) -> str:
        response = paths[path][method]["responses"][status]  # type: ignore[index]
        ref: str = response["content"]["application/json"]["schema"]["$ref"]
        return ref.rsplit("/", 1)[1]

    assert answer("/agents/{name}/contexts", "get", "200") == "ContextPage"
    assert answer(one, "get", "200") == "ContextSummary"
    assert answer(one + "/messages", "get", "200") == "TranscriptPage"
    assert answer(one + "/fork", "post", "201") == "ForkCreated"
    assert answer(one + "/cancel", "post", "202") == "CancelAccepted"
    assert "409" in paths[one + "/cancel"]["post"]["responses"]  # type: ignore[operator]
    assert set(paths[one]) == {"get", "delete"}
    fork_body = paths[one + "/fork"]["post"]["requestBody"]
    assert fork_body["content"]["application/json"]["schema"]["$ref"].endswith("/ForkRequest")  # type: ignore[index]
    schemas = document["components"]["schemas"]  # type: ignore[index]
    assert {"messageId", "contextId"} == set(schemas["ForkRequest"]["properties"])
    assert "ChatTransportBody" in schemas
