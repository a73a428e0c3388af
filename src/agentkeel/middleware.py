"""Agent middleware: code that wraps the model and tool calls of every run.

Not ASGI middleware. Composition order, for ``middleware=[outer, inner]``:

- `before_model`: ``outer`` then ``inner`` (each sees the request the previous returned);
- `after_model`: ``inner`` then ``outer`` (the reverse, like unwinding a stack);
- `wrap_tool`: ``outer`` wraps ``inner`` wraps the tool.

A subclass overrides only what it needs; the defaults pass everything through.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from agentkeel.context import RunContext
from agentkeel.messages import JSONValue, Message, ToolCallPart
from agentkeel.models.base import ModelRequest

__all__ = ["AgentMiddleware", "ModelResponse", "ToolHandler", "ToolOutcome", "compose_tool"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelResponse:
    """A model's complete answer to one request."""

    message: Message
    stop_reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolOutcome:
    """What one tool call produced: the content the model sees and whether it failed."""

    content: JSONValue
    status: Literal["success", "error"] = "success"


ToolHandler = Callable[[ToolCallPart], Awaitable[ToolOutcome]]


class AgentMiddleware:
    """Base class for agent middleware; every method defaults to passing through."""

    async def before_model(self, context: RunContext, request: ModelRequest) -> ModelRequest:
        """Return the request to send (it may be changed)."""
        return request

    async def after_model(self, context: RunContext, response: ModelResponse) -> ModelResponse:
        """Return the response to keep (it may be changed).

        Text appended here reaches clients as token events, as the seed's section 5
        describes; any other change reaches them through the final text.
        """
        return response

    async def wrap_tool(
        self, context: RunContext, call: ToolCallPart, call_next: ToolHandler
    ) -> ToolOutcome:
        """Run `call_next(call)` (possibly with a changed call) and return its outcome."""
        return await call_next(call)


def compose_tool(
    middleware: Sequence[AgentMiddleware], context: RunContext, handler: ToolHandler
) -> ToolHandler:
    """Wrap `handler` so that the first middleware is the outermost."""
    wrapped = handler
    for layer in reversed(middleware):
        wrapped = _bind(layer, context, wrapped)
    return wrapped


def _bind(layer: AgentMiddleware, context: RunContext, call_next: ToolHandler) -> ToolHandler:
    async def handle(call: ToolCallPart) -> ToolOutcome:
        return await layer.wrap_tool(context, call, call_next)

    return handle
