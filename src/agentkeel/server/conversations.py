"""The conversation endpoints of SPEC section 3: context list, summary, transcript, fork.

The transcript is a read-only view of what the agent remembers, for the owning
principal: one entry per user and assistant message of the committed turns, with its
stable id, never tool inputs or outputs, thinking or any state. Every key includes the
caller's principal, so another principal's context is simply not found (``404
context_not_found``), the same answer as a context that never existed.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agentkeel.auth_settings import PRINCIPAL
from agentkeel.errors import (
    ConcurrentWriteError,
    ContextExistsError,
    ContextNotFoundError,
    InvalidRequestError,
    MessageNotFoundError,
)
from agentkeel.ids import new_context_id, validate_context_id
from agentkeel.keys import SessionKey
from agentkeel.messages import MESSAGE_ID_PATTERN, JSONObject, JSONValue, Message
from agentkeel.multiagent.fork import fork_swarm
from agentkeel.multiagent.session import MEMBER_SEPARATOR, SwarmSession
from agentkeel.runtime.runs import ServerRuntime
from agentkeel.runtime.wire import ForkRequest, interrupt_json
from agentkeel.server.errors import AgentNotFoundError, RouteNotFoundError
from agentkeel.server.limits import JSON_BODY
from agentkeel.storage.base import SessionStorage
from agentkeel.storage.transcript import (
    TITLE_LENGTH,
    ContextListing,
    TranscriptStorage,
    in_transcript,
    title_of,
)
from agentkeel.storage.usage import UsageStorage

__all__ = ["conversation_routes", "timestamp", "transcript_message"]

_PAGE_ROUNDS = 8
"""How many storage pages one transcript page may read to skip tool results."""


def timestamp(at: float) -> str:
    """Unix time as the wire writes it: ISO 8601 in UTC, ``Z``-suffixed, to the second."""
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def transcript_message(message: Message) -> JSONObject:
    """One TranscriptMessage: its id, role, joined text and the names of the tools it called.

    ``createdAt`` is when its turn committed, null for a message stored before 0.3 kept
    that time; ``agent`` (a swarm's) names the member that wrote an assistant message.
    """
    data: JSONObject = {
        "id": message.id,
        "role": message.role,
        "text": message.text,
        "toolCalls": [call.name for call in message.tool_calls],
        "createdAt": None if message.created_at is None else timestamp(message.created_at),
    }
    if message.run_id is not None:
        data["runId"] = message.run_id
    if message.agent is not None:
        data["agent"] = message.agent
    return data


def _runtime(request: Request) -> ServerRuntime:
    runtime: ServerRuntime = request.app.state.runtime
    return runtime


def _storage(runtime: ServerRuntime) -> TranscriptStorage:
    storage = runtime.framework.storage
    if not isinstance(storage, TranscriptStorage):
        raise RouteNotFoundError("this server's storage keeps no transcripts")
    return storage


def _key(request: Request, context_id: object | None = None) -> SessionKey:
    name = str(request.path_params["name"])
    if name not in _runtime(request).framework.definitions:
        raise AgentNotFoundError(f"no agent is named {name!r}")
    principal = request.scope.get("state", {}).get(PRINCIPAL)
    return SessionKey(
        definition=name,
        context_id=validate_context_id(
            request.path_params["context_id"] if context_id is None else context_id
        ),
        principal=principal if isinstance(principal, str) and principal else None,
    )


def _not_found(key: SessionKey) -> ContextNotFoundError:
    return ContextNotFoundError(f"no context {key.context_id!r} for agent {key.definition!r}")


def _limit(request: Request, default: int, most: int) -> int:
    raw = request.query_params.get("limit")
    if raw is None:
        return default
    if not raw.isdigit() or not 1 <= int(raw) <= most:
        raise InvalidRequestError(f"limit must be an integer from 1 to {most}")
    return int(raw)


async def _status(runtime: ServerRuntime, key: SessionKey) -> JSONObject:
    """``status`` (and ``interrupt`` while suspended), from the live stream and run record."""
    stream = await runtime.latest(key)
    if stream is not None and stream.active:
        return {"status": "running"}
    record = await runtime.framework.storage.latest_run(key)
    if record is not None and record.status == "suspended" and record.interrupts:
        return {"status": "suspended", "interrupt": interrupt_json(record.interrupts[0])}
    return {"status": "idle"}


async def _usage(storage: SessionStorage, key: SessionKey) -> JSONObject | None:
    if not isinstance(storage, UsageStorage):
        return None
    usage = await storage.context_usage(key)
    return {"inputTokens": usage.input_tokens, "outputTokens": usage.output_tokens}


async def _summary(runtime: ServerRuntime, listing: ContextListing) -> JSONObject:
    meta = listing.metadata
    key = SessionKey(definition=meta.definition, context_id=meta.context_id, principal=meta.owner)
    data: JSONObject = {
        "contextId": meta.context_id,
        "title": listing.title[:TITLE_LENGTH] if runtime.framework.server.transcript else "",
        "createdAt": timestamp(meta.created_at),
        "updatedAt": timestamp(meta.updated_at),
        "messageCount": listing.transcript_count,
        **await _status(runtime, key),
    }
    usage = await _usage(runtime.framework.storage, key)
    if usage is not None:
        data["usage"] = usage
    return data


async def list_contexts(request: Request) -> Response:
    """``GET /agents/{name}/contexts``: the caller's conversations, newest first."""
    runtime = _runtime(request)
    name = str(request.path_params["name"])
    if name not in runtime.framework.definitions:
        raise AgentNotFoundError(f"no agent is named {name!r}")
    principal = request.scope.get("state", {}).get(PRINCIPAL)
    listings, cursor = await _storage(runtime).list_sessions(
        principal if isinstance(principal, str) and principal else None,
        name,
        limit=_limit(request, 50, 200),
        cursor=request.query_params.get("cursor"),
    )
    contexts: list[JSONValue] = [await _summary(runtime, item) for item in listings]
    return JSONResponse({"contexts": contexts, "nextCursor": cursor})


async def get_context(request: Request) -> Response:
    """``GET /agents/{name}/contexts/{contextId}``: one ContextSummary."""
    runtime = _runtime(request)
    key = _key(request)
    storage = runtime.framework.storage
    snapshot = await storage.load(key)
    if snapshot is not None:
        listing = ContextListing(
            metadata=snapshot.metadata,
            title=title_of(snapshot.messages),
            transcript_count=sum(1 for m in snapshot.messages if in_transcript(m)),
        )
        return JSONResponse(await _summary(runtime, listing))
    if not await storage.exists(key):
        raise _not_found(key)
    # a first turn that runs or waits for a decision: the context is there, empty so far
    latest = await storage.latest_run(key)
    at = time.time() if latest is None else latest.started_at
    data: JSONObject = {
        "contextId": key.context_id,
        "title": "",
        "createdAt": timestamp(at),
        "updatedAt": timestamp(at),
        "messageCount": 0,
        **await _status(runtime, key),
    }
    return JSONResponse(data)


async def list_messages(request: Request) -> Response:
    """``GET /agents/{name}/contexts/{contextId}/messages``: a page of the transcript."""
    runtime = _runtime(request)
    key = _key(request)
    storage = _storage(runtime)
    limit = _limit(request, 100, 500)
    after = request.query_params.get("after")
    if after is not None and not MESSAGE_ID_PATTERN.fullmatch(after):
        raise InvalidRequestError("after must be a message id (msg- and 24 hex characters)")
    if not runtime.framework.server.transcript:
        if not await runtime.framework.storage.exists(key):
            raise _not_found(key)
        raise RouteNotFoundError("this server does not serve transcripts (server.transcript)")
    shown: list[JSONValue] = []
    more = False
    for _ in range(_PAGE_ROUNDS):
        page = await storage.read_messages(key, after=after, limit=limit)
        if page is None:
            if await runtime.framework.storage.exists(key):
                break  # a first turn that has not committed yet: nothing to show
            raise _not_found(key)
        visible = [m for m in page.messages if in_transcript(m)]
        room = limit - len(shown)
        shown.extend(transcript_message(m) for m in visible[:room])
        more = page.more or len(visible) > room
        if len(shown) >= limit or not page.more or not page.messages:
            break
        after = page.messages[-1].id
    last = shown[-1] if shown else None
    cursor = last["id"] if more and isinstance(last, dict) else None
    return JSONResponse({"messages": shown, "nextCursor": cursor})


def _fork_body(request: Request) -> tuple[str | None, str | None]:
    body = request.scope.get("state", {}).get(JSON_BODY, {})
    if not isinstance(body, dict):
        raise InvalidRequestError("the request body must be a JSON object")
    try:
        parsed = ForkRequest.model_validate(body)
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        if first["type"] == "extra_forbidden":
            raise InvalidRequestError(f"unknown field {str(first['loc'][0])!r}") from None
        raise InvalidRequestError(
            "messageId must be a message id (msg- and 24 hex characters)"
        ) from None
    context_id = parsed.context_id
    if context_id is not None:
        context_id = validate_context_id(context_id)
    return parsed.message_id, context_id


async def fork(request: Request) -> Response:
    """``POST /agents/{name}/contexts/{contextId}/fork``: copy a conversation; ``201``.

    The copy holds the history up to and including the message (all of it without one),
    with the same message ids, and a copy of the AgentState, for the same principal. It
    is written as the new context's first turn, expected to be its first: a context id
    taken already, also by a fork at the same instant, is ``409 context_exists``.
    """
    runtime = _runtime(request)
    key = _key(request)
    message_id, new_id = _fork_body(request)
    storage = runtime.framework.storage
    target = _key(request, new_context_id() if new_id is None else new_id)
    swarm = await _swarm_session(runtime, key)
    if swarm is not None:
        if await storage.exists(target):
            raise ContextExistsError(f"context {target.context_id!r} exists already")
        if await swarm.load() is None and not await storage.exists(key):
            raise _not_found(key)
        await fork_swarm(swarm, _swarm_home(swarm, target), message_id)
        runtime.metrics.forks.inc(key.definition)
        return JSONResponse({"contextId": target.context_id}, status_code=201)
    snapshot = await storage.load(key)
    if snapshot is None:
        if await storage.exists(key):
            raise MessageNotFoundError("the conversation holds no committed message yet")
        raise _not_found(key)
    messages = snapshot.messages
    if message_id is not None:
        index = next((i for i, m in enumerate(messages) if m.id == message_id), None)
        if index is None:
            raise MessageNotFoundError(f"the conversation holds no message {message_id!r}")
        messages = messages[: index + 1]
    if await storage.exists(target):
        raise ContextExistsError(f"context {target.context_id!r} exists already")
    try:
        await storage.append(target, messages, snapshot.state, expected_version=0)
    except ConcurrentWriteError:
        raise ContextExistsError(f"context {target.context_id!r} exists already") from None
    runtime.metrics.forks.inc(key.definition)
    return JSONResponse({"contextId": target.context_id}, status_code=201)


async def _swarm_session(runtime: ServerRuntime, key: SessionKey) -> SwarmSession | None:
    """`key`'s SwarmSession when its definition serves a swarm (declared, or by its record)."""
    if MEMBER_SEPARATOR in key.definition:
        return None
    swarm = SwarmSession(
        key.definition,
        key.context_id,
        runtime.framework.storage,
        checkpointer=runtime.framework.checkpointer,
        principal=key.principal,
    )
    if key.definition in runtime.cache.swarms or await swarm.load() is not None:
        return swarm
    return None


def _swarm_home(source: SwarmSession, target: SessionKey) -> SwarmSession:
    return SwarmSession(
        target.definition,
        target.context_id,
        source.storage,
        checkpointer=source.checkpointer,
        principal=target.principal,
    )


def conversation_routes() -> list[Route]:
    """The routes of this module, for the app factory."""
    context = "/agents/{name}/contexts/{context_id}"
    return [
        Route("/agents/{name}/contexts", list_contexts, methods=["GET"]),
        Route(context, get_context, methods=["GET"]),
        Route(context + "/messages", list_messages, methods=["GET"]),
        Route(context + "/fork", fork, methods=["POST"]),
    ]
