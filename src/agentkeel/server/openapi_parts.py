"""The building blocks of the OpenAPI document: parameters, operations, error answers.

Shared by `agentkeel.server.openapi` (which assembles the document) and the modules that
describe one group of endpoints each (`agentkeel.server.openapi_conversations`), so that
every operation documents its errors the same way: one answer per status, naming the
codes of that status from the error table.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel

__all__ = [
    "COMMON",
    "CONTEXT_ID",
    "REF",
    "errors",
    "json_body",
    "ok",
    "operation",
    "param",
    "query_params",
]

REF = "#/components/schemas/{model}"
CONTEXT_ID = {
    "type": "string",
    "pattern": r"^(?!.*\.\.)[A-Za-z0-9][A-Za-z0-9._@:-]{0,127}$",
    "description": "SPEC 2: letters, digits and ._@:- (not first), at most 128, no '..'",
}
COMMON = (400, 401, 403, 404, 405, 413, 429, 500, 503)
"""What any endpoint may answer: bad input, auth, unknown agent, limits, the guards."""


def json_body(ref: str) -> dict[str, Any]:
    """A JSON content entry whose schema is the component `ref`."""
    return {"application/json": {"schema": {"$ref": REF.format(model=ref)}}}


def errors(statuses: Iterable[int], codes: dict[str, tuple[int, str]]) -> dict[str, Any]:
    """One ErrorBody answer per status, its description naming the codes of that status."""
    answers: dict[str, Any] = {}
    for status in sorted(set(statuses)):
        named = sorted(code for code, (known, _) in codes.items() if known == status)
        answers[str(status)] = {
            "description": "codes: " + ", ".join(named) if named else "an error",
            "content": json_body("ErrorBody"),
        }
    return answers


def param(name: str, where: str, schema: dict[str, Any], required: bool) -> dict[str, Any]:
    """An OpenAPI parameter object."""
    return {"name": name, "in": where, "required": required, "schema": schema}


def query_params(model: type[BaseModel]) -> list[dict[str, Any]]:
    """The query parameters of `model` (its fields), with the schema that checks them."""
    schema = model.model_json_schema()
    required = set(schema.get("required", ()))
    found = []
    for name, field in schema.get("properties", {}).items():
        kept = {k: v for k, v in field.items() if k not in ("title", "default")}
        options = [o for o in kept.pop("anyOf", ()) if o.get("type") != "null"]
        found.append(
            param(name, "query", {**kept, **(options[0] if options else {})}, name in required)
        )
    return found


def ok(base: dict[str, Any], ref: str, status: int = 200) -> dict[str, Any]:
    """A success answer whose JSON body is the component `ref`."""
    return {str(status): {**base, "content": json_body(ref)}}


def operation(
    summary: str,
    answers: dict[str, Any],
    codes: dict[str, tuple[int, str]],
    *,
    params: list[dict[str, Any]] | None = None,
    body: str | None = None,
    body_required: bool = True,
    more: Iterable[int] = (),
) -> dict[str, Any]:
    """An operation of the native wire: its success answers, then every error it may give."""
    item: dict[str, Any] = {
        "summary": summary,
        "parameters": params or [],
        "responses": {**answers, **errors([*COMMON, *more], codes)},
    }
    if body is not None:
        item["requestBody"] = {"required": body_required, "content": json_body(body)}
    return item
