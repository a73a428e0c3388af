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

import gc
from collections.abc import Iterator
from contextlib import contextmanager

from pydantic_core import SchemaValidator, ValidationError, core_schema
from starlette.requests import Request

from agentkeel.bindings.agui.request import RunAgentInput, parse_run_input
from agentkeel.json_decode import decode_json
from agentkeel.server_settings import JSON_BODY

__all__ = ["decode_run_input", "read_run_input"]

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


def _holds_constant(body: bytes) -> bool:
    """Whether `body` may hold ``NaN`` or ``Infinity``, which pydantic-core's parser takes.

    `decode_json` refuses them, as `json` does. A one-byte search is a ``memchr``, far
    faster than the search for a word, and a body without an ``N`` holds no ``NaN``
    (no such letter rules out ``Infinity``: every body has an ``I``, in ``threadId``).
    """
    return (b"N" in body and b"NaN" in body) or b"Infinity" in body


def decode_run_input(body: bytes) -> object:
    """`body` as JSON, ``messages`` as a tuple whose earlier elements are placeholders.

    The tuple keeps the count of messages (for the index an error names) and the last
    two messages as sent; ValueError or RecursionError when the body is not JSON.
    """
    if not _holds_constant(body):
        try:
            return _BODY.validate_json(body)
        except ValidationError:
            pass  # not the shape the fast path takes: decode it whole, for its errors
    return decode_json(body)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Hold off the cyclic garbage collector (when it is on) for a synchronous step.

    The placeholders of a long thread are hundreds of objects alive at once: past the
    collector's threshold (700) each run would start a collection in the middle of
    its decode, which scans them and moves the request's other young objects to an
    older generation, making the later full collections longer. Paused, the
    placeholders are freed by their reference counts before the collector looks.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


async def read_run_input(request: Request) -> RunAgentInput:
    """The RunAgentInput of a run request, its body decoded by `decode_run_input`.

    Behind an app whose middleware decoded the body already, that value is used.
    Raises what `decode_run_input` and `parse_run_input` raise.
    """
    decoded = request.scope.get("state", {}).get(JSON_BODY, _MISSING)
    if decoded is not _MISSING:
        return parse_run_input(decoded)
    body = await request.body()
    with _collector_paused():
        # the decoded body (and its placeholders) is gone when this line is done
        return parse_run_input(decode_run_input(body))
