"""Decoding a RunAgentInput without building the client's copy of the thread.

``HttpAgent`` posts its whole copy of the thread with every run, and the binding reads
only the last two messages of it (`agentkeel.bindings.agui.request`). Decoding the whole
body into Python objects would make each run on a long thread cost its history, so the
body is validated by pydantic-core against a schema that keeps the top-level keys and the
last two elements of ``messages`` as JSON values and turns each earlier element into an
empty placeholder (no strings, no nested values are built for it). The whole body is
still parsed, so a malformed one anywhere is refused.

Whatever that schema does not take (``messages`` not an array, an earlier element that
is not an object, a body that is not an object, ``NaN``, a byte-order mark, a lone
surrogate, deep nesting) is decoded whole by `decode_json`, the server's own decoder, so
the route accepts and refuses exactly the bodies every other route does, and the errors
are the ones a whole decode gives.
"""

from __future__ import annotations

from pydantic_core import SchemaValidator, ValidationError, core_schema
from starlette.requests import Request

from agentkeel.json_decode import decode_json
from agentkeel.server_settings import JSON_BODY

__all__ = ["decode_run_input", "run_input_body"]

_MISSING = object()
_ANY = core_schema.any_schema()
_PLACEHOLDER = core_schema.typed_dict_schema({}, extra_behavior="ignore")
_TAIL = core_schema.union_schema(
    [
        core_schema.tuple_schema([_PLACEHOLDER, _ANY, _ANY], variadic_item_index=0),
        core_schema.tuple_schema([_ANY]),
        core_schema.tuple_schema([]),
    ],
    mode="left_to_right",
)
_BODY = SchemaValidator(
    core_schema.typed_dict_schema(
        {"messages": core_schema.typed_dict_field(_TAIL, required=False)},
        extra_behavior="allow",
    )
)
_CONSTANTS = (b"NaN", b"Infinity")
"""pydantic-core's parser takes these; `decode_json` refuses them, as `json` does."""


def decode_run_input(body: bytes) -> object:
    """`body` as JSON, ``messages`` as a tuple whose earlier elements are placeholders.

    The tuple keeps the count of messages (for the index an error names) and the last
    two messages as sent; ValueError or RecursionError when the body is not JSON.
    """
    if not any(constant in body for constant in _CONSTANTS):
        try:
            return _BODY.validate_json(body)
        except ValidationError:
            pass  # not the shape the fast path takes: decode it whole, for its errors
    return decode_json(body)


async def run_input_body(request: Request) -> object:
    """The body of a run request, decoded by `decode_run_input`.

    Behind an app whose middleware decoded the body already, that value is used.
    """
    parsed = request.scope.get("state", {}).get(JSON_BODY, _MISSING)
    if parsed is not _MISSING:
        return parsed
    return decode_run_input(await request.body())
