"""AgentClient: talk to a served agent over the native wire (SPEC sections 3 and 4).

The client owns the wire; the server owns the memory. So a client holds exactly one
piece of conversation state, the opaque context id, and no history: a turn posts the
message with that id, and the server continues the conversation it stores under it.

A flaky network is safe: every turn carries an ``Idempotency-Key`` that a retried POST
reuses, so the server answers with the original run instead of running it twice; and a
stream that drops before its ``done`` frame reconnects with ``Last-Event-ID``, tracking
frame ids so that every event reaches the caller exactly once. Error answers become the
typed errors of `agentkeel.errors`, chosen by their wire ``code``. `AsyncAgentClient`
is the implementation; `AgentClient` is its blocking form.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, TypeAlias, TypedDict, TypeVar, Unpack, get_args
from urllib.parse import quote

import anyio
import httpx
import pydantic
from pydantic.alias_generators import to_snake

from agentkeel import errors
from agentkeel._portal import Portal
from agentkeel.errors import AgentkeelError, InterruptPendingError, InvalidRequestError
from agentkeel.events import RunEvent
from agentkeel.memory.client_methods import AsyncMemoryMethods, MemoryMethods
from agentkeel.messages import JSONObject, JSONValue
from agentkeel.send_result import SendResult
from agentkeel.sse import SSEDecoder, SSEFrame

__all__ = [
    "DEFAULT_TIMEOUT",
    "AgentClient",
    "AgentInfo",
    "AsyncAgentClient",
    "ClientOptions",
    "ClientStreamItem",
    "ConnectionLostError",
    "SendResult",
    "ServerError",
    "approve",
    "cancel",
    "reject",
]

DEFAULT_TIMEOUT = httpx.Timeout(30.0, read=300.0)
"""A read may wait 5 minutes (``send`` answers when the run ends); a read timeout is a
dropped connection, so the POST is retried with its key and re-attaches to the run."""

_TRANSIENT_STATUSES = frozenset({502, 503, 504})
_NOT_RETRIED = (httpx.UnsupportedProtocol, httpx.LocalProtocolError, httpx.ProxyError)
"""Failures that trying again cannot fix."""
_INTERRUPT_ID = re.compile(r"\bint-[A-Za-z0-9_-]+")
_T = TypeVar("_T")


class ServerError(AgentkeelError):
    """An error answer without a class of its own; `code` is the wire code as sent."""

    code: str  # type: ignore[misc]  # an instance value here, a class constant elsewhere

    def __init__(self, message: str, *, code: str, status_code: int) -> None:
        super().__init__(message)
        self.code = code
        self.status_code = status_code
        """The HTTP status of the answer."""


class ConnectionLostError(AgentkeelError):
    """The server stayed unreachable through every retry (the turn may have run anyway)."""

    code = "connection_lost"


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentInfo:
    """One entry of ``GET /agents``: an agent a client may talk to."""

    name: str
    description: str = ""
    skills: tuple[str, ...] = ()  # its tool names
    a2a: str | None = None  # the URL of its A2A agent card


ClientStreamItem: TypeAlias = RunEvent | SendResult
"""What `AsyncAgentClient.stream` yields: the run's events, then one SendResult."""


class ClientOptions(TypedDict, total=False):
    """The options both clients take, each optional."""

    api_key: str | None
    """A static API key, sent as ``Authorization: Bearer <key>``."""
    token: str | None
    """A bearer JWT, sent as ``Authorization: Bearer <token>`` (not with `api_key`)."""
    context_id: str | None
    """A conversation to continue (or a new id of your own); None: the server mints one."""
    on_context: Callable[[str], None] | None
    """Called with the context id when it becomes known or changes; persist it there."""
    timeout: httpx.Timeout | float | None
    """HTTP timeouts; `DEFAULT_TIMEOUT` by default."""
    max_retries: int
    """Retries of a dropped connection (default 6); on a stream, each frame resets it."""


def approve() -> JSONValue:
    """The decision that lets a tool waiting for approval run."""
    return {"approved": True}


def reject(reason: str = "rejected by the user") -> JSONValue:
    """The decision that refuses a tool call; the model gets `reason` as the tool's error."""
    return {"approved": False, "reason": reason}


def cancel() -> JSONValue:
    """The decision that abandons the suspended run, whatever it waits for."""
    return {"cancel": True}


# -- reading the wire: the only place that knows its camelCase names ---------------------

_EVENTS: pydantic.TypeAdapter[RunEvent] = pydantic.TypeAdapter(
    Annotated[RunEvent, pydantic.Field(discriminator="type")]
)
_EVENT_TYPES = frozenset(cls.__dataclass_fields__["type"].default for cls in get_args(RunEvent))
_RESULTS = pydantic.TypeAdapter(SendResult)
_AGENTS = pydantic.TypeAdapter(list[AgentInfo])
_PYTHON_NAMES = {"contextId": "context_id", "runId": "run_id", "toolCalls": "tool_calls"}
_ERROR_CLASSES: dict[str, Callable[[str], AgentkeelError]] = {
    "context_not_found": errors.ContextNotFoundError,
    "context_busy": errors.RunInProgressError,
    "invalid_context_id": errors.InvalidContextIdError,
    "invalid_request": InvalidRequestError,
    "invalid_json": InvalidRequestError,
    "interrupt_not_found": errors.InterruptNotFoundError,
    "interrupt_error": errors.InterruptError,
    "storage_error": errors.StorageError,
}


def _bad(what: str) -> ServerError:
    return ServerError(f"malformed answer: {what}", code="bad_response", status_code=200)


def _json(response: httpx.Response) -> object:
    try:
        return response.json()
    except ValueError as exc:
        raise _bad(f"{response.request.method} {response.url.path} is not JSON") from exc


def _decode(adapter: pydantic.TypeAdapter[_T], data: object, what: str) -> _T:
    try:
        return adapter.validate_python(data)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        raise _bad(f"{what}: {first['msg']} at {list(first['loc'])}") from exc


def _parse_result(data: object) -> SendResult:
    """Decode a SendResult: the ``send`` body, or the fields of the ``done`` frame."""
    if not isinstance(data, dict):
        raise _bad("a run result is not a JSON object")
    fields = {_PYTHON_NAMES.get(k, k): v for k, v in data.items()}
    if isinstance(usage := data.get("usage"), dict):  # camelCase counts, and a cost
        fields["usage"] = {to_snake(key): v for key, v in usage.items() if key != "cost"}
        fields["cost"] = usage.get("cost")
    return _decode(_RESULTS, fields, "a result")


def _wire_error(status_code: int, body: bytes) -> AgentkeelError:
    """Turn an error answer (``{"error": {"code", "message"}}``) into a typed error."""
    try:
        error = json.loads(body)["error"]
        code, message = error["code"], error["message"]
        if not isinstance(code, str) or not isinstance(message, str):
            raise TypeError("code and message must be strings")
    except (ValueError, LookupError, TypeError):
        message = f"the server answered HTTP {status_code} without an error body"
        return ServerError(message, code="http_error", status_code=status_code)
    if code == "interrupt_pending":
        named, found = error.get("interruptId"), _INTERRUPT_ID.search(message)
        interrupt_id = named if isinstance(named, str) else found.group() if found else ""
        return InterruptPendingError(message, interrupt_id=interrupt_id)
    make = _ERROR_CLASSES.get(code)
    return make(message) if make else ServerError(message, code=code, status_code=status_code)


class _FrameTracker:
    """Follows one run's frames across reconnects: drops repeats, remembers where it is."""

    def __init__(self, context_id: str | None, after: int | None) -> None:
        self.context_id = context_id
        self.run_id: str | None = None
        self.last_id = after

    def accept(self, frame: SSEFrame) -> ClientStreamItem | None:
        """The item `frame` carries; None for a repeat or an event type this client skips."""
        frame_id = int(frame.id) if frame.id is not None and frame.id.isdigit() else None
        if frame_id is not None and self.last_id is not None and frame_id <= self.last_id:
            return None  # replayed after a reconnect: already delivered
        try:
            data = json.loads(frame.data)
        except ValueError as exc:
            raise _bad("a stream frame is not JSON") from exc
        if not isinstance(data, dict) or not isinstance(data.get("contextId"), str):
            raise _bad("a stream frame without contextId")
        run_id = data.get("runId")
        if self.run_id is not None and run_id != self.run_id:
            raise ConnectionLostError("the run's stream is gone: the context started another run")
        self.run_id = run_id if isinstance(run_id, str) else None
        self.context_id = data["contextId"]
        if frame_id is not None:
            self.last_id = frame_id
        if data.get("done") is True:
            return _parse_result(data)
        event = data.get("event")
        if not isinstance(event, dict) or event.get("type") not in _EVENT_TYPES:
            return None  # a type from a newer server: skipped, not an error
        if isinstance(data.get("agent"), str):
            event = {**event, "agent": data["agent"]}
        return _decode(_EVENTS, event, "an event")


# -- the clients --------------------------------------------------------------------------


class AsyncAgentClient(AsyncMemoryMethods):
    """A conversation with one served agent; it keeps the context id and nothing else.

    Args:
        base_url: The server, e.g. ``http://127.0.0.1:8000``.
        agent: The agent's name in the server's framework.json (`agents` lists them).
        http_client: An httpx client to use; `aclose` leaves it open.
        **options: `ClientOptions`: credentials, the context id to continue, the
            `on_context` callback, timeouts and retries.

    Raises:
        InvalidRequestError: If both `api_key` and `token` are given.
    """

    def __init__(
        self,
        base_url: str,
        *,
        agent: str,
        http_client: httpx.AsyncClient | None = None,
        **options: Unpack[ClientOptions],
    ) -> None:
        api_key, token = options.get("api_key"), options.get("token")
        if api_key is not None and token is not None:
            raise InvalidRequestError("give an api_key or a token, not both")
        self.agent = agent
        """The agent this client talks to."""
        self._base_url = base_url.rstrip("/")
        self._credential = api_key if api_key is not None else token
        self._context_id = options.get("context_id")
        self._on_context = options.get("on_context")
        self._max_retries = max(0, options.get("max_retries", 6))
        self._owned = http_client is None
        self._http = http_client or httpx.AsyncClient(
            timeout=options.get("timeout", DEFAULT_TIMEOUT)
        )

    @property
    def context_id(self) -> str | None:
        """The conversation's id; None until the server has minted one (or after reset)."""
        return self._context_id

    def reset(self) -> None:
        """Forget the context id locally (it stays on the server): a new conversation next."""
        self._context_id = None

    async def send(self, text: str) -> SendResult:
        """Run one turn and wait for its result.

        Raises:
            AgentkeelError: The typed error the server answered with (e.g.
                InterruptPendingError: `resume` first), or ConnectionLostError.
        """
        return await self._send(self._message_body(text))

    async def resume(self, interrupt_id: str, decision: JSONValue) -> SendResult:
        """Answer a pending interrupt and wait for the run to end (or suspend again).

        Args:
            interrupt_id: `SendResult.interrupt.id` of the suspended run.
            decision: `approve()` or `reject(reason)` for an approval; the answer (any
                JSON, usually text) for an input; `cancel()` abandons the run.
        """
        return await self._send(self._resume_body(interrupt_id, decision))

    def stream(self, text: str) -> AsyncGenerator[ClientStreamItem, None]:
        """Run one turn, yielding its typed events as they happen, then its SendResult.

        A connection dropped mid-stream is resumed after the last frame received, so
        every event arrives exactly once. Closing the generator early (or cancelling)
        stops listening; the run goes on on the server.
        """
        return self._stream(self._message_body(text), None)

    def resume_stream(
        self, interrupt_id: str, decision: JSONValue
    ) -> AsyncGenerator[ClientStreamItem, None]:
        """Streaming form of `resume`: the resumed run's events, then its SendResult."""
        return self._stream(self._resume_body(interrupt_id, decision), None)

    def follow(self, after: int | None = None) -> AsyncGenerator[ClientStreamItem, None]:
        """Listen to the context's latest run up to its next end (or suspension).

        It picks up a run nobody listened to, e.g. to learn what a suspended run waits
        for: from frame id `after` on, or (None) from the start of its latest segment.

        Raises:
            InvalidRequestError: There is no context id yet.
            ContextNotFoundError: The server does not know the context.
        """
        if self._context_id is None:
            raise InvalidRequestError("there is no conversation to follow yet")
        return self._stream(None, after)

    async def delete_context(self) -> None:
        """Delete the conversation on the server (history, state, runs), then forget its id.

        Raises:
            ContextNotFoundError: The server does not know the context.
        """
        if self._context_id is not None:
            await self._request("DELETE", self._url("contexts", self._context_id))
            self._context_id = None

    async def agents(self) -> list[AgentInfo]:
        """The agents the server offers (``GET /agents``), whatever `agent` is."""
        listing = _json(await self._request("GET", self._base_url + "/agents"))
        agents = listing.get("agents") if isinstance(listing, dict) else None
        return _decode(_AGENTS, agents, "GET /agents")

    async def aclose(self) -> None:
        """Close the HTTP connections this client opened."""
        if self._owned:
            await self._http.aclose()

    async def __aenter__(self) -> AsyncAgentClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # -- requests -----------------------------------------------------------------------

    def _url(self, *parts: str) -> str:
        """The URL of this agent's endpoint `parts` (ids percent-encoded)."""
        path = ("agents", self.agent, *parts)
        return self._base_url + "".join("/" + quote(part, safe="@:") for part in path)

    def _headers(self, *, key: str | None = None, stream: bool = False) -> dict[str, str]:
        headers = {"Accept": "text/event-stream" if stream else "application/json"}
        if self._credential is not None:
            headers["Authorization"] = f"Bearer {self._credential}"
        if key is not None:
            headers["Idempotency-Key"] = key
        return headers

    def _lost(self, cause: Exception) -> AgentkeelError:
        if isinstance(cause, AgentkeelError):
            return cause
        detail = str(cause) or type(cause).__name__
        return ConnectionLostError(f"lost the connection to {self._base_url}: {detail}")

    async def _request(
        self, method: str, url: str, *, body: JSONObject | None = None, key: str | None = None
    ) -> httpx.Response:
        """Send a request; retry (with the same key) a drop or a 502/503/504, but no DELETE."""
        attempt, budget = 0, 0 if method == "DELETE" else self._max_retries
        while True:
            try:
                response = await self._http.request(
                    method, url, json=body, headers=self._headers(key=key)
                )
                if response.status_code not in _TRANSIENT_STATUSES:
                    break
                failure: Exception = _wire_error(response.status_code, response.content)
            except httpx.TransportError as exc:
                failure = exc
            if attempt >= budget or isinstance(failure, _NOT_RETRIED):
                raise self._lost(failure) from failure
            await anyio.sleep(_backoff(attempt))
            attempt += 1
        if response.is_error:
            raise _wire_error(response.status_code, response.content)
        return response

    def _message_body(self, text: str) -> JSONObject:
        body: JSONObject = {"message": text}
        if self._context_id is not None:
            body["contextId"] = self._context_id
        return body

    def _resume_body(self, interrupt_id: str, decision: JSONValue) -> JSONObject:
        if self._context_id is None:
            raise InvalidRequestError("there is no conversation with an interrupt to resume")
        resume: JSONObject = {"interruptId": interrupt_id}
        if decision == cancel():
            resume["cancel"] = True  # SPEC: {"cancel": true} in place of the decision
        else:
            resume["decision"] = decision
        return {"contextId": self._context_id, "resume": resume}

    def _learn(self, context_id: str | None) -> None:
        if context_id is not None and context_id != self._context_id:
            self._context_id = context_id
            if self._on_context is not None:
                self._on_context(context_id)

    async def _send(self, body: JSONObject) -> SendResult:
        url, key = self._url("send"), str(uuid.uuid4())
        response = await self._request("POST", url, body=body, key=key)
        result = _parse_result(_json(response))
        self._learn(result.context_id)
        return result

    @asynccontextmanager
    async def _open(
        self, body: JSONObject | None, key: str, tracker: _FrameTracker
    ) -> AsyncIterator[httpx.Response]:
        # The POST again (same key) until the run's first frame; then a reconnect.
        if body is not None and tracker.last_id is None:
            url = self._url("stream")
            headers = self._headers(key=key, stream=True)
        else:
            context_id = tracker.context_id or ""
            url = self._url("contexts", context_id, "stream")
            headers = self._headers(stream=True)
            if tracker.last_id is not None:  # none: the latest segment, from its start
                headers["Last-Event-ID"] = str(tracker.last_id)
            body = None
        request = self._http.build_request(
            "POST" if body else "GET", url, json=body, headers=headers
        )
        response = await self._http.send(request, stream=True)
        try:
            if response.is_error:
                await response.aread()
                raise _wire_error(response.status_code, response.content)
            yield response
        finally:
            await response.aclose()

    async def _stream(
        self, body: JSONObject | None, after: int | None
    ) -> AsyncGenerator[ClientStreamItem, None]:
        tracker = _FrameTracker(self._context_id, after)
        key = str(uuid.uuid4())
        failures = 0
        while True:
            decoder = SSEDecoder()
            failure: Exception = ConnectionLostError("the stream ended before the run did")
            try:
                async with self._open(body, key, tracker) as response:
                    async for chunk in response.aiter_bytes():
                        for frame in decoder.feed(chunk):
                            item = tracker.accept(frame)
                            if item is None:
                                continue
                            failures = 0
                            self._learn(tracker.context_id)
                            yield item
                            if isinstance(item, SendResult):
                                return
            except httpx.TransportError as exc:
                failure = exc
            except ServerError as exc:
                if exc.status_code not in _TRANSIENT_STATUSES:
                    raise
                failure = exc
            if failures >= self._max_retries or isinstance(failure, _NOT_RETRIED):
                raise self._lost(failure) from failure
            await anyio.sleep(_backoff(failures, decoder.retry))
            failures += 1


def _backoff(attempt: int, advised_ms: int | None = None) -> float:
    return advised_ms / 1000 if advised_ms is not None else float(min(0.25 * 2**attempt, 4.0))


class AgentClient(MemoryMethods):
    """The blocking form of `AsyncAgentClient`, with the same methods and behaviour.

    It drives an `AsyncAgentClient` on an event loop in a background thread (where
    `on_context` runs), so the logic exists once; `close` stops the thread.

    Args:
        base_url: The server, e.g. ``http://127.0.0.1:8000``.
        agent: The agent's name in the server's framework.json.
        **options: `ClientOptions`, as for `AsyncAgentClient`.
    """

    def __init__(self, base_url: str, *, agent: str, **options: Unpack[ClientOptions]) -> None:
        self._portal = Portal("agentkeel-client")

        async def make() -> AsyncAgentClient:  # made on the loop that will use it
            return AsyncAgentClient(base_url, agent=agent, **options)

        try:
            self._client = self._portal.call(make)
        except BaseException:
            self._portal.close()
            raise
        self._portal.bind(self)

    @property
    def context_id(self) -> str | None:
        """The conversation's id; None until the server has minted one (or after reset)."""
        return self._client.context_id

    def reset(self) -> None:
        """Forget the context id locally: the next turn starts a new conversation."""
        self._client.reset()

    def send(self, text: str) -> SendResult:
        """Run one turn and wait for its result (see `AsyncAgentClient.send`)."""
        return self._portal.call(self._client.send, text)

    def resume(self, interrupt_id: str, decision: JSONValue) -> SendResult:
        """Answer a pending interrupt and wait for the run (see `AsyncAgentClient.resume`)."""
        return self._portal.call(self._client.resume, interrupt_id, decision)

    def stream(self, text: str) -> Iterator[ClientStreamItem]:
        """Run one turn, yielding its events and then its SendResult."""
        return self._iterate(self._client.stream(text))

    def resume_stream(self, interrupt_id: str, decision: JSONValue) -> Iterator[ClientStreamItem]:
        """Streaming form of `resume`."""
        return self._iterate(self._client.resume_stream(interrupt_id, decision))

    def follow(self, after: int | None = None) -> Iterator[ClientStreamItem]:
        """Listen to the context's latest run (see `AsyncAgentClient.follow`)."""
        return self._iterate(self._client.follow(after))

    def delete_context(self) -> None:
        """Delete the conversation on the server, then forget its id."""
        self._portal.call(self._client.delete_context)

    def agents(self) -> list[AgentInfo]:
        """The agents the server offers (``GET /agents``)."""
        return self._portal.call(self._client.agents)

    def close(self) -> None:
        """Close the connections and stop the background event loop."""
        if not self._portal.running:
            return
        try:
            self._portal.call(self._client.aclose)
        finally:
            self._portal.close()

    def __enter__(self) -> AgentClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _iterate(self, items: AsyncGenerator[_T, None]) -> Iterator[_T]:
        return self._portal.iterate(items)
