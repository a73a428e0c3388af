"""Structured output: the type an agent's answer must have, its schema, its validation.

`OutputType.of(Weather)` takes what users already write their data as (a pydantic
model, a dataclass, a TypedDict, a union of them or a list of them, which means the
union) and prepares, once per agent, everything a run needs: the JSON schema a provider
sends, its strict variant, and a pydantic validator. Providers want an *object* at the
root, so any other type (a union, a list) is wrapped as ``{"result": ...}`` and
unwrapped after validation; the caller never sees the wrapper.

The strict variant follows OpenAI's strict mode, the strictest of the native modes:
every object lists all its properties as required and forbids others. A type that
cannot say that without changing its meaning (an optional field, a free-form mapping,
keywords strict mode refuses) gets no strict variant, and the provider falls back to
the non-strict schema rather than sending one the API would refuse.
"""

from __future__ import annotations

import copy
import re
import types
from dataclasses import dataclass
from typing import Any, Protocol, Union, cast

from pydantic import TypeAdapter, ValidationError, create_model
from pydantic_core import to_jsonable_python

from agentkeel.errors import ConfigurationError
from agentkeel.messages import JSONObject, JSONValue
from agentkeel.models.base import OutputSchema

__all__ = ["OutputParseError", "OutputType", "output_json", "strict_schema"]

_WRAPPER_FIELD = "result"
_NAME = re.compile(r"[^A-Za-z0-9_-]")
_STRICT_REFUSED = frozenset(
    {
        "patternProperties",
        "unevaluatedProperties",
        "propertyNames",
        "minProperties",
        "maxProperties",
        "unevaluatedItems",
        "contains",
        "minContains",
        "maxContains",
        "uniqueItems",
        "oneOf",
        "not",
        "if",
        "then",
        "else",
        "dependentRequired",
        "dependentSchemas",
    }
)
"""Keywords OpenAI's strict mode rejects; a schema using one is sent non-strict."""
_DESCRIPTION = (
    "Give your final answer by calling this tool; its input is the answer. "
    "Call it once, after any other tools you need."
)


class _Validator(Protocol):
    """What `OutputType` calls of a pydantic ``SchemaValidator``."""

    def validate_json(self, data: str, /) -> Any: ...

    def validate_python(self, data: object, /) -> Any: ...


class OutputParseError(Exception):
    """An answer that is not valid JSON of the output type; `errors` is for the model."""

    def __init__(self, errors: str) -> None:
        super().__init__(errors)
        self.errors = errors


@dataclass(frozen=True, slots=True)
class OutputType:
    """An agent's output type, prepared: its schema for providers and its validator."""

    target: object
    """The type as the user gave it."""
    schema: OutputSchema
    _validator: _Validator
    """The adapter's own validator, called directly: a turn pays for validation only."""
    _wrapped: bool

    @classmethod
    def of(cls, output_type: object) -> OutputType:
        """Prepare `output_type`; a list or tuple of types means their union.

        Raises:
            ConfigurationError: If pydantic cannot build a JSON schema for the type.
        """
        target = _union(output_type)
        try:
            adapter: TypeAdapter[Any] = TypeAdapter(cast(Any, target))
            schema = adapter.json_schema()
            wrapped = schema.get("type") != "object"
            if wrapped:
                wrapper = create_model("Result", **{_WRAPPER_FIELD: (target, ...)})  # type: ignore[call-overload]
                adapter = TypeAdapter(wrapper)
                schema = adapter.json_schema()
        except Exception as exc:  # pydantic raises several error types for unusable types
            raise ConfigurationError(
                f"output_type {output_type!r} cannot be described as a JSON schema: {exc}"
            ) from exc
        name = _schema_name(target)
        description = str(schema.get("description") or "")
        return cls(
            target=output_type,
            schema=OutputSchema(
                name=name,
                schema=cast(JSONObject, schema),
                strict_schema=strict_schema(cast(JSONObject, schema)),
                description=description or _DESCRIPTION,
            ),
            _validator=adapter.validator,
            _wrapped=wrapped,
        )

    def parse_text(self, text: str) -> Any:
        """The validated value of an answer given as JSON text.

        A model sometimes wraps its JSON in a Markdown code fence; that is taken off.

        Raises:
            OutputParseError: With errors worded for the model to correct itself.
        """
        raw = _strip_fence(text)
        try:
            value = self._validator.validate_json(raw)
        except ValidationError as exc:
            raise OutputParseError(_describe(exc)) from None
        return self._unwrap(value)

    def parse_object(self, data: JSONObject) -> Any:
        """The validated value of an answer given as a JSON object (a tool's input)."""
        try:
            value = self._validator.validate_python(data)
        except ValidationError as exc:
            raise OutputParseError(_describe(exc)) from None
        return self._unwrap(value)

    def _unwrap(self, value: Any) -> Any:
        return getattr(value, _WRAPPER_FIELD) if self._wrapped else value


def output_json(value: object) -> JSONValue:
    """A validated output as JSON (the wire's ``output``)."""
    return cast(JSONValue, to_jsonable_python(value))


def _union(output_type: object) -> object:
    if isinstance(output_type, list | tuple):
        if not output_type:
            raise ConfigurationError("output_type must not be an empty list")
        members = tuple(_union(item) for item in output_type)
        return members[0] if len(members) == 1 else Union[members]  # noqa: UP007
    return output_type


def _schema_name(target: object) -> str:
    if isinstance(target, type):
        name = _NAME.sub("_", target.__name__)[:64]
        if name:
            return name
    if isinstance(target, types.UnionType) or getattr(target, "__origin__", None) is Union:
        return "answer"
    return "answer"


def _strip_fence(text: str) -> str:
    stripped = text.strip()
    if stripped.startswith("```") and stripped.endswith("```") and len(stripped) > 6:
        body = stripped[3:-3]
        newline = body.find("\n")
        return body[newline + 1 :] if newline >= 0 else body
    return stripped


def _describe(exc: ValidationError) -> str:
    lines = []
    for error in exc.errors(include_url=False, include_input=False)[:20]:
        where = ".".join(str(part) for part in error["loc"]) or "the answer"
        lines.append(f"- {where}: {error['msg']}")
    return "\n".join(lines)


def strict_schema(schema: JSONObject) -> JSONObject | None:
    """`schema` in the form strict mode accepts, or None when it cannot be.

    Every object gets ``additionalProperties: false``; an object with a property that
    is not required, or one that allows other properties, makes the type unfit, since
    making it strict would change what the type accepts.
    """
    result = copy.deepcopy(schema)
    return result if _make_strict(result) else None


def _make_strict(node: JSONValue) -> bool:
    if isinstance(node, list):
        return all(_make_strict(item) for item in node)
    if not isinstance(node, dict):
        return True
    if _STRICT_REFUSED & node.keys():
        return False
    properties = node.get("properties")
    if node.get("type") == "object" or isinstance(properties, dict):
        extra = node.get("additionalProperties", False)
        if extra is not False or not isinstance(properties, dict):
            return False
        required = node.get("required")
        if not isinstance(required, list) or set(properties) != set(map(str, required)):
            return False
        node["additionalProperties"] = False
    node.pop("default", None)
    for key, value in node.items():
        if key in ("properties", "$defs", "definitions") and isinstance(value, dict):
            if not all(_make_strict(item) for item in value.values()):
                return False
        elif isinstance(value, dict | list) and not _make_strict(value):
            return False
    return True
