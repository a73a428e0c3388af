"""The memory endpoints' query strings as pydantic models: the checks and the document.

The OpenAPI document's parameters are generated from these models too. A parameter
given twice is refused (which one was meant is a guess); parameters these endpoints do
not know are ignored, as proxies and caches add their own. Every refusal is ``400
invalid_memory_key`` naming the parameter, as the store's own checks answer.
"""

from __future__ import annotations

from typing import Self, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from starlette.requests import Request

from agentkeel.memory.errors import InvalidMemoryKeyError
from agentkeel.memory.records import DEFAULT_NAMESPACE, MAX_TEXT_CHARS, NAMESPACE_PATTERN
from agentkeel.runtime.wire import first_error

__all__ = ["MemoryItemQuery", "MemoryListQuery", "parse_query"]

SEARCH_LIMIT = 50
"""The most matches one search returns."""


class _Query(BaseModel):
    model_config = ConfigDict(
        extra="ignore", frozen=True, hide_input_in_errors=True, use_attribute_docstrings=True
    )


Q = TypeVar("Q", bound=_Query)


class MemoryListQuery(_Query):
    """``GET /agents/{name}/memory``: a page of the caller's items, or a search."""

    q: str | None = Field(default=None, min_length=1, max_length=MAX_TEXT_CHARS)
    """Search: the items closest in meaning to this text, best first."""
    limit: int | None = Field(default=None, ge=1, le=200)
    """Items in the page (default 50), or matches of a search (default 10, at most 50)."""
    cursor: str | None = Field(default=None, min_length=1, max_length=2048)
    """The previous page's ``nextCursor``."""

    @model_validator(mode="after")
    def _search_limit(self) -> Self:
        if self.q is not None and self.limit is not None and self.limit > SEARCH_LIMIT:
            raise ValueError(f"limit must be an integer from 1 to {SEARCH_LIMIT} with q")
        return self


class MemoryItemQuery(_Query):
    """``DELETE /agents/{name}/memory/{key}``: which namespace the key is in."""

    namespace: str = Field(default=DEFAULT_NAMESPACE, pattern=NAMESPACE_PATTERN)
    """Where the item is kept (default ``memories``, where the memory tools keep theirs)."""


def parse_query(request: Request, model: type[Q]) -> Q:
    """`request`'s query string checked against `model`.

    Raises:
        InvalidMemoryKeyError: A parameter given twice, or one `model` refuses (``400``).
    """
    given: dict[str, str] = {}
    for name, value in request.query_params.multi_items():
        if name in given and name in model.model_fields:
            raise InvalidMemoryKeyError(f"{name}: given more than once")
        given[name] = value
    try:
        return model.model_validate(given)
    except ValidationError as exc:
        raise InvalidMemoryKeyError(first_error(exc)) from None
