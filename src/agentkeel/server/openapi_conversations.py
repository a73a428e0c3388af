"""The OpenAPI paths of the conversation endpoints and cancel (SPEC 3).

The list of contexts, one summary, the transcript, fork and cancel: their answers are
the models of `agentkeel.server.openapi_models`, fork's body the `ForkRequest` that
validates it, and each names the error statuses it can answer beyond the common ones.
"""

from __future__ import annotations

from typing import Any

from agentkeel.messages import MESSAGE_ID_PATTERN
from agentkeel.server.openapi_parts import CONTEXT_ID, ok, operation, param

__all__ = ["conversation_paths"]


def conversation_paths(codes: dict[str, tuple[int, str]], name: dict[str, Any]) -> dict[str, Any]:
    """The paths below ``/agents/{name}/contexts`` other than reconnect and delete."""
    agent = param("name", "path", name, True)
    context = param("context_id", "path", CONTEXT_ID, True)
    limit = param("limit", "query", {"type": "string"}, False)
    base = {"description": "ok"}
    one = "/agents/{name}/contexts/{context_id}"
    return {
        "/agents/{name}/contexts": {
            "get": operation(
                "the caller's conversations with this agent, newest first",
                ok(base, "ContextPage"),
                codes,
                params=[agent, limit, param("cursor", "query", {"type": "string"}, False)],
            )
        },
        one: {
            "get": operation(
                "one conversation's summary",
                ok(base, "ContextSummary"),
                codes,
                params=[agent, context],
            )
        },
        one + "/messages": {
            "get": operation(
                "the transcript, oldest first",
                ok(base, "TranscriptPage"),
                codes,
                params=[
                    agent,
                    context,
                    limit,
                    param(
                        "after",
                        "query",
                        {"type": "string", "pattern": MESSAGE_ID_PATTERN.pattern},
                        False,
                    ),
                ],
            )
        },
        one + "/fork": {
            "post": operation(
                "copy the conversation up to a message into a new context",
                ok({"description": "created"}, "ForkCreated", 201),
                codes,
                params=[agent, context],
                body="ForkRequest",
                body_required=False,
                more=(409,),
            )
        },
        one + "/cancel": {
            "post": operation(
                "stop the context's running run, on whichever replica runs it",
                ok({"description": "accepted"}, "CancelAccepted", 202),
                codes,
                params=[agent, context],
                more=(409,),
            )
        },
    }
