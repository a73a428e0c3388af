"""The memory endpoints: what an agent remembers of the caller, to see and to erase.

``GET /agents/{name}/memory`` lists the caller's items (``?limit=``, ``?cursor=``) or
searches them (``?q=``); ``DELETE /agents/{name}/memory/{key}`` forgets one and
``DELETE /agents/{name}/memory`` all of them. The scope always comes from the
authenticated principal, never from the request, so another principal's items are
invisible: a key they hold is ``404 memory_not_found`` as if it never existed.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agentkeel.auth_settings import PRINCIPAL
from agentkeel.memory.errors import EmbeddingError, EmbeddingMismatchError
from agentkeel.memory.memory import AgentMemory
from agentkeel.memory.records import MemoryItem
from agentkeel.messages import JSONObject
from agentkeel.runtime.runs import ServerRuntime
from agentkeel.server.errors import AgentNotFoundError, HTTPError
from agentkeel.server.memory_query import MemoryItemQuery, MemoryListQuery, parse_query

__all__ = ["memory_routes"]


class MemoryNotConfiguredHTTPError(HTTPError):
    """The server has no ``memory`` section: there is nothing to list or delete."""

    code = "memory_not_configured"
    status = 404


class MemoryNotFoundHTTPError(HTTPError):
    """No item under this key in the caller's memory."""

    code = "memory_not_found"
    status = 404


class EmbeddingMismatchHTTPError(HTTPError):
    """The stored vectors are of another embedding model than the configured one."""

    code = "embedding_mismatch"
    status = 409


class EmbeddingFailedHTTPError(HTTPError):
    """The embeddings provider failed."""

    code = "embedding_failed"
    status = 502


def _memory(request: Request) -> AgentMemory:
    runtime: ServerRuntime = request.app.state.runtime
    name = str(request.path_params["name"])
    if name not in runtime.framework.definitions:
        raise AgentNotFoundError(f"no agent is named {name!r}")
    memory = runtime.framework.memory
    if memory is None:
        raise MemoryNotConfiguredHTTPError("this server keeps no memory across conversations")
    principal = request.scope.get("state", {}).get(PRINCIPAL)
    return memory.bind(principal if isinstance(principal, str) and principal else None, name)


def item_json(item: MemoryItem) -> JSONObject:
    """An item as the wire shows it to its owner (never its vector)."""
    return {
        "key": item.key,
        "namespace": item.namespace,
        "text": item.text,
        "value": item.value,
        "createdAt": item.created_at.isoformat().replace("+00:00", "Z"),
        "updatedAt": item.updated_at.isoformat().replace("+00:00", "Z"),
        "source": {"contextId": item.source.context_id, "agent": item.source.agent},
    }


def _translated(exc: Exception) -> HTTPError:
    if isinstance(exc, EmbeddingMismatchError):
        return EmbeddingMismatchHTTPError(exc.message)
    if isinstance(exc, EmbeddingError):
        return EmbeddingFailedHTTPError(exc.message)
    raise exc


async def list_memory(request: Request) -> Response:
    """``GET /agents/{name}/memory``: a page of the caller's items, or matches for ``q``."""
    memory = _memory(request)
    query = parse_query(request, MemoryListQuery)
    try:
        if query.q is not None:
            matches = await memory.recall(query.q, limit=query.limit or 10, namespace=None)
            items = [{**item_json(m.item), "score": round(m.score, 4)} for m in matches]
            return JSONResponse({"items": items, "nextCursor": None})
        page = await memory.page(cursor=query.cursor, limit=query.limit or 50)
    except (EmbeddingError, EmbeddingMismatchError) as exc:
        raise _translated(exc) from None
    body = {"items": [item_json(i) for i in page.items], "nextCursor": page.next_cursor}
    return JSONResponse(body)


async def delete_item(request: Request) -> Response:
    """``DELETE /agents/{name}/memory/{key}``: forget one item; ``204``."""
    memory = _memory(request)
    query = parse_query(request, MemoryItemQuery)
    if not await memory.forget(str(request.path_params["key"]), namespace=query.namespace):
        raise MemoryNotFoundHTTPError("nothing is remembered under this key")
    return Response(status_code=204)


async def delete_all(request: Request) -> Response:
    """``DELETE /agents/{name}/memory``: forget everything of the caller; ``{"deleted": n}``."""
    memory = _memory(request)
    return JSONResponse({"deleted": await memory.forget_all()})


def memory_routes() -> list[Route]:
    """The routes of this module, for the app factory."""
    return [
        Route("/agents/{name}/memory", list_memory, methods=["GET"]),
        Route("/agents/{name}/memory", delete_all, methods=["DELETE"]),
        Route("/agents/{name}/memory/{key:path}", delete_item, methods=["DELETE"]),
    ]
