"""AsyncAgentClient: one conversation with a served agent, over the native wire.

A flaky network is safe: every turn carries an ``Idempotency-Key`` that a retried POST
reuses, so the server answers with the original run instead of running it twice; and a
stream that drops before its ``done`` frame reconnects with ``Last-Event-ID``, tracking
frame ids so that every event reaches the caller exactly once.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import asynccontextmanager
from typing import Unpack
from urllib.parse import quote

import anyio
import httpx

from agentkeel.client.conversations import ConversationsMixin
from agentkeel.client.errors import ConnectionLostError, ServerError, wire_error
from agentkeel.client.records import (
    DEFAULT_TIMEOUT,
    AgentInfo,
    ClientOptions,
    ClientStreamItem,
    MultitaskPolicy,
    SendResult,
    cancel,
)
from agentkeel.client.wire import FrameTracker, parse_agents, parse_result, read_json
from agentkeel.errors import AgentkeelError, InvalidRequestError
from agentkeel.memory.client_methods import AsyncMemoryMethods
from agentkeel.messages import JSONObject, JSONValue
from agentkeel.sse import SSEDecoder

__all__ = ["AsyncAgentClient"]

_TRANSIENT_STATUSES = frozenset({502, 503, 504})
_NOT_RETRIED = (httpx.UnsupportedProtocol, httpx.LocalProtocolError, httpx.ProxyError)
"""Failures that trying again cannot fix."""


class AsyncAgentClient(ConversationsMixin, AsyncMemoryMethods):
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

    def reset(self, context_id: str | None = None) -> None:
        """Forget the context id locally (it stays on the server): a new conversation next.

        With `context_id`, continue that conversation instead (say one from `contexts`).
        """
        self._context_id = context_id

    async def send(
        self,
        text: str | None = None,
        *,
        replace: str | None = None,
        regenerate: str | None = None,
        multitask: MultitaskPolicy | None = None,
    ) -> SendResult:
        """Run one turn and wait for its result.

        Args:
            text: The message; None only with `regenerate`.
            replace: Edit: the id of a user message of this conversation (from
                `messages`). The history is cut just before it, and the turn runs with
                `text` in its place.
            regenerate: The id of an assistant message: the history is cut just before
                it and the model answers again (no `text`).
            multitask: This turn's policy if the context is running another one
                (``queue``, ``reject``, ``interrupt``, ``rollback``), overriding the
                server's ``server.concurrency``.

        Raises:
            AgentkeelError: The typed error the server answered with (e.g.
                InterruptPendingError: `resume` first; MessageNotFoundError for an
                unknown `replace` or `regenerate` id), or ConnectionLostError.
            InvalidRequestError: A bad combination of arguments (nothing is sent).
        """
        return await self._send(self._message_body(text, replace, regenerate, multitask))

    async def resume(self, interrupt_id: str, decision: JSONValue) -> SendResult:
        """Answer a pending interrupt and wait for the run to end (or suspend again).

        Args:
            interrupt_id: `SendResult.interrupt.id` of the suspended run.
            decision: `approve()` or `reject(reason)` for an approval; the answer (any
                JSON, usually text) for an input; `cancel()` abandons the run.
        """
        return await self._send(self._resume_body(interrupt_id, decision))

    def stream(
        self,
        text: str | None = None,
        *,
        replace: str | None = None,
        regenerate: str | None = None,
        multitask: MultitaskPolicy | None = None,
    ) -> AsyncGenerator[ClientStreamItem, None]:
        """Run one turn, yielding its typed events as they happen, then its SendResult.

        The arguments are those of `send`. A connection dropped mid-stream is resumed
        after the last frame received, so every event arrives exactly once. Closing the
        generator early stops listening; the run goes on on the server (`cancel` stops it).
        """
        return self._stream(self._message_body(text, replace, regenerate, multitask), None)

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
        return parse_agents(read_json(await self._request("GET", self._base_url + "/agents")))

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
        self,
        method: str,
        url: str,
        *,
        body: JSONObject | None = None,
        key: str | None = None,
        params: dict[str, str | int] | None = None,
        retried: bool = True,
    ) -> httpx.Response:
        """Send a request; retry (with the same key) a drop or a 502/503/504, unless told not to."""
        attempt, budget = 0, self._max_retries if retried and method != "DELETE" else 0
        while True:
            try:
                response = await self._http.request(
                    method, url, json=body, params=params, headers=self._headers(key=key)
                )
                if response.status_code not in _TRANSIENT_STATUSES:
                    break
                failure: Exception = wire_error(response.status_code, response.content)
            except httpx.TransportError as exc:
                failure = exc
            if attempt >= budget or isinstance(failure, _NOT_RETRIED):
                raise self._lost(failure) from failure
            await anyio.sleep(_backoff(attempt))
            attempt += 1
        if response.is_error:
            raise wire_error(response.status_code, response.content)
        return response

    def _message_body(
        self,
        text: str | None,
        replace: str | None,
        regenerate: str | None,
        multitask: MultitaskPolicy | None,
    ) -> JSONObject:
        body: JSONObject = {}
        if regenerate is not None:
            if text is not None or replace is not None:
                raise InvalidRequestError("regenerate takes no text and no replace")
            body["regenerate"] = regenerate
        elif text is None:
            raise InvalidRequestError("a turn needs a text (or regenerate)")
        else:
            body["message"] = text
            if replace is not None:
                body["replace"] = replace
        if (replace is not None or regenerate is not None) and self._context_id is None:
            raise InvalidRequestError("there is no conversation to edit yet")
        if multitask is not None:
            body["multitask"] = multitask
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
        result = parse_result(read_json(response))
        self._learn(result.context_id)
        return result

    @asynccontextmanager
    async def _open(
        self, body: JSONObject | None, key: str, tracker: FrameTracker
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
                raise wire_error(response.status_code, response.content)
            yield response
        finally:
            await response.aclose()

    async def _stream(
        self, body: JSONObject | None, after: int | None
    ) -> AsyncGenerator[ClientStreamItem, None]:
        tracker = FrameTracker(self._context_id, after)
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
