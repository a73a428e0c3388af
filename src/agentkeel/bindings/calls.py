"""What every SPEC 10 binding asks of an HTTP request and of the runtime facade.

The caller's principal (set by the authentication middleware, None while it is off),
the definition a path or a ``model`` names, the context key, and the frames of a run as
data: the same few steps the native wire and A2A take, so that a binding's context is
the same context whichever wire it came from.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from contextlib import aclosing

from starlette.requests import Request

from agentkeel.auth_settings import PRINCIPAL
from agentkeel.ids import validate_context_id
from agentkeel.messages import JSONObject
from agentkeel.runtime.coordination import RunStream
from agentkeel.runtime.facade import RunFacade
from agentkeel.server_settings import JSON_BODY
from agentkeel.storage.base import SessionKey

_MISSING = object()

__all__ = ["batches", "context_key", "json_body", "principal_of"]


def principal_of(request: Request) -> str | None:
    """The authenticated caller (None while authentication is off)."""
    principal = request.scope.get("state", {}).get(PRINCIPAL)
    return principal if isinstance(principal, str) and principal else None


async def json_body(request: Request) -> object:
    """The request's JSON body, decoded once.

    The server's `RequestLimits` middleware decodes every body it lets through (to
    refuse malformed JSON up front) and leaves the value in the scope: a binding whose
    clients post whole histories (AG-UI's HttpAgent, the AI SDK, Chat Completions)
    would otherwise decode them twice. Behind another app, the body is decoded here;
    ValueError when it is not JSON.
    """
    parsed = request.scope.get("state", {}).get(JSON_BODY, _MISSING)
    if parsed is not _MISSING:
        return parsed
    try:
        return json.loads(await request.body())
    except RecursionError:
        raise ValueError("the request body nests too deeply") from None


def context_key(request: Request, definition: str, context_id: object) -> SessionKey:
    """The context's key; InvalidRequestError (``invalid_context_id``) for a bad id."""
    return SessionKey(
        definition=definition,
        context_id=validate_context_id(context_id),
        principal=principal_of(request),
    )


async def batches(
    runtime: RunFacade, stream: RunStream, after: int
) -> AsyncGenerator[list[JSONObject], None]:
    """The frame data after id `after` up to a done frame, in the batches they came in.

    Frames that arrived together leave together, so a binding writes a burst of tokens
    at once (as the native wire does); an empty batch means nothing came for
    ``server.heartbeatSeconds``, when a streaming binding sends its keep-alive.
    """
    async with aclosing(runtime.follow(stream, after)) as followed:
        async for batch in followed:
            yield [frame.data for frame in batch]
