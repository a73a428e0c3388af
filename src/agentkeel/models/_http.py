"""HTTP plumbing shared by the provider modules: retries, error mapping, SSE transport.

A provider module only maps requests and parses chunks; everything about talking HTTP
lives here, so that every provider retries, times out and reports failures the same way:

- Retries (429, 408, 5xx, connection errors) happen only before the first byte of a
  streamed body has been handed on: once the caller has seen a chunk, a retry would
  replay it, so a failure mid-stream raises `ModelUnavailableError` instead.
- The wait before a retry is exponential with jitter, or what the server asked for in
  ``Retry-After`` (seconds or an HTTP-date) or ``retry-after-ms``.
- An HTTP status becomes a typed `ModelError`; a body that says the prompt no longer
  fits becomes `ContextOverflowError`, which a conversation manager can act on.
- An error's message is ours (provider, status, whether and when to try again): it is
  what a client sees. The provider's own body goes to the log only, scrubbed of the
  credentials, whatever the server echoed back.
"""

from __future__ import annotations

import email.utils
import json
import logging
import random
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

import anyio
import httpx

from agentkeel.errors import (
    ContextOverflowError,
    ModelAuthError,
    ModelBadRequestError,
    ModelError,
    ModelRateLimitError,
    ModelUnavailableError,
)
from agentkeel.messages import JSONObject
from agentkeel.sse import SSEDecoder, SSEFrame

__all__ = [
    "HTTPEndpoint",
    "RetryPolicy",
    "error_for_kind",
    "error_for_status",
    "is_context_overflow",
    "parse_retry_after",
    "redact",
    "stream_sse",
]

logger = logging.getLogger(__name__)

_OVERFLOW_MARKERS = (
    "context_length_exceeded",
    "maximum context length",
    "prompt is too long",
    "context window",
    "exceed_context_size",
    "exceeds the available context size",
    "input is too long",
)
_MAX_DETAIL = 500


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How often and how long to wait before trying a failed request again."""

    max_retries: int = 3
    """Retries after the first attempt; 0 disables retrying."""
    backoff_base: float = 0.5
    """Seconds before the first retry; each later retry doubles it (before jitter)."""
    backoff_max: float = 30.0
    """Cap on the computed backoff, in seconds."""
    max_retry_after: float = 60.0
    """A server asking for a longer wait than this gets no retry: the error is raised."""
    sleep: Callable[[float], Awaitable[None]] = field(default=anyio.sleep)
    """How to wait; injectable so a test can observe the delays without spending them."""

    def backoff(self, attempt: int) -> float:
        """The jittered delay before retry number `attempt` (0-based).

        Equal jitter (half fixed, half random) keeps a floor under the wait while still
        spreading out clients that failed together.
        """
        delay = min(self.backoff_max, self.backoff_base * 2.0**attempt)
        return delay / 2 + random.uniform(0, delay / 2)


@dataclass(frozen=True, slots=True, kw_only=True)
class HTTPEndpoint:
    """Where and how a provider posts its streaming requests."""

    provider: str
    """The provider's name, used in error messages (``openai``, ``anthropic``)."""
    url: str
    """The full URL of the streaming endpoint."""
    headers: Mapping[str, str]
    """Headers of every request, credentials included."""
    timeout: float
    """Seconds allowed to connect, and between two bytes of the answer."""
    retry: RetryPolicy
    """When to try again."""
    secrets: Sequence[str] = ()
    """Strings that must never appear in an error message (the API key)."""
    client: httpx.AsyncClient | None = None
    """A caller-owned client to reuse; None opens one per request and closes it."""


def redact(text: str, secrets: Sequence[str]) -> str:
    """Remove every secret from `text`, so no error message ever leaks a credential."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "[redacted]")
    return text


def parse_retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """The wait, in seconds, a server asked for; None when it did not say.

    Reads ``retry-after-ms`` (OpenAI) and ``Retry-After`` as delta-seconds or as an
    HTTP-date. A date in the past means no wait.

    Args:
        headers: The response headers (looked up case-insensitively by httpx).
        now: The current Unix time, for tests; defaults to the clock.
    """
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


def is_context_overflow(text: str) -> bool:
    """Whether an error text or code says the prompt no longer fits the context window."""
    lowered = text.lower()
    return any(marker in lowered for marker in _OVERFLOW_MARKERS)


def _error_detail(body: str) -> tuple[str, str]:
    """(kind, message) from a JSON error body of either vendor; raw text otherwise."""
    try:
        data = json.loads(body)
    except ValueError:
        return "", body.strip()
    error = data.get("error", data) if isinstance(data, dict) else data
    if isinstance(error, str):
        return "", error
    if not isinstance(error, dict):
        return "", body.strip()
    message = error.get("message")
    kind = " ".join(str(error[key]) for key in ("type", "code") if isinstance(error.get(key), str))
    return kind, message if isinstance(message, str) else body.strip()


def _shorten(text: str) -> str:
    return text if len(text) <= _MAX_DETAIL else text[:_MAX_DETAIL] + "…"


def _log_answer(provider: str, what: str, detail: str, secrets: Sequence[str]) -> None:
    """Put the provider's own words in the server log: the only place they go."""
    logger.warning(
        "provider=<%s> | %s: %s", provider, what, redact(_shorten(detail), secrets) or "(empty)"
    )


def _wait_advice(retry_after: float | None) -> str:
    if retry_after is None:
        return "try again later"
    return f"try again in {max(1, round(retry_after))} s"


def error_for_status(
    status: int,
    body: str,
    *,
    provider: str,
    secrets: Sequence[str] = (),
    retry_after: float | None = None,
) -> ModelError:
    """The typed error for an HTTP error answer, with a message of ours.

    The message names the provider and the status and says whether trying again may
    help; the provider's body goes to the log only (it may name internal hosts, echo
    the request, or carry a credential), so nothing a provider writes reaches a client.

    Args:
        status: The HTTP status code.
        body: The response body as text (JSON error bodies are understood).
        provider: The provider's name, for the message.
        secrets: Strings to scrub from the logged body.
        retry_after: The wait the provider asked for, in seconds, for the advice.
    """
    kind, detail = _error_detail(body)
    _log_answer(provider, f"HTTP {status} answer", f"{kind} {detail}".strip(), secrets)
    where = f"{provider} answered HTTP {status}"
    if status in (401, 403):
        text = f"{where}: it refused the credentials; check the API key and its permissions"
        return ModelAuthError(text, status_code=status)
    if status == 429:
        if "insufficient_quota" in f"{kind} {detail}":
            text = f"{where}: the account's quota is used up; check its plan and billing"
        else:
            text = f"{where}: it is limiting the request rate; {_wait_advice(retry_after)}"
        return ModelRateLimitError(text, status_code=status)
    if status == 408 or status >= 500:
        text = f"{where}: it failed on its side; {_wait_advice(retry_after)}"
        return ModelUnavailableError(text, status_code=status)
    if 400 <= status < 500:
        if is_context_overflow(f"{kind} {detail}"):
            text = (
                f"{where}: the conversation no longer fits the model's context window; "
                "shorten it (a conversation manager can trim it)"
            )
            return ContextOverflowError(text, status_code=status)
        text = f"{where}: it rejected the request; retrying it unchanged will not help"
        return ModelBadRequestError(text, status_code=status)
    return ModelError(f"{where}, which is not a usable answer", status_code=status)


def error_for_kind(
    kind: str, message: str, *, provider: str, secrets: Sequence[str] = ()
) -> ModelError:
    """The typed error for an error a provider reported inside a stream, in our words.

    As for `error_for_status`, the vendor's own message goes to the log only.

    Args:
        kind: The vendor's error type and/or code (``overloaded_error``,
            ``rate_limit_exceeded``, ``context_length_exceeded``...).
        message: The vendor's message.
        provider: The provider's name, for the message.
        secrets: Strings to scrub from the logged message.
    """
    _log_answer(provider, f"stream error ({kind or 'unknown'})", message, secrets)
    where = f"{provider} reported an error in its answer"
    lowered = kind.lower()
    if is_context_overflow(f"{kind} {message}"):
        return ContextOverflowError(
            f"{where}: the conversation no longer fits the model's context window; shorten it"
        )
    if "auth" in lowered or "permission" in lowered or "api_key" in lowered:
        return ModelAuthError(f"{where}: it refused the credentials; check the API key")
    if "rate_limit" in lowered or "quota" in lowered:
        return ModelRateLimitError(f"{where}: it is limiting the request rate; try again later")
    if any(word in lowered for word in ("overloaded", "server_error", "api_error", "timeout")):
        return ModelUnavailableError(f"{where}: it failed on its side; try again later")
    if any(word in lowered for word in ("invalid_request", "not_found", "too_large")):
        return ModelBadRequestError(
            f"{where}: it rejected the request; retrying it unchanged will not help"
        )
    return ModelError(f"{where}; the server log has the details")


async def _error_answer(
    endpoint: HTTPEndpoint, response: httpx.Response
) -> tuple[ModelError, bool]:
    """The typed error for an error answer, and whether trying again may help."""
    text = (await response.aread()).decode("utf-8", errors="replace")
    error = error_for_status(
        response.status_code,
        text,
        provider=endpoint.provider,
        secrets=endpoint.secrets,
        retry_after=parse_retry_after(response.headers),
    )
    # An empty account does not refill by waiting (OpenAI answers 429 for both).
    return error, error.retryable and "insufficient_quota" not in text


async def _wait(endpoint: HTTPEndpoint, attempt: int, retry_after: float | None) -> bool:
    """Sleep before retry `attempt`; False when the policy says to give up instead."""
    policy = endpoint.retry
    if attempt >= policy.max_retries:
        return False
    if retry_after is not None and retry_after > policy.max_retry_after:
        return False
    delay = policy.backoff(attempt) if retry_after is None else retry_after
    logger.debug(
        "provider=<%s>, attempt=<%d>, delay=<%.3f> | retrying", endpoint.provider, attempt, delay
    )
    await policy.sleep(delay)
    return True


async def stream_sse(endpoint: HTTPEndpoint, body: JSONObject) -> AsyncGenerator[SSEFrame, None]:
    """POST `body` and yield the answer's SSE frames, retrying only before the first one.

    Args:
        endpoint: Where to post, with which headers, timeout and retry policy.
        body: The JSON request body.

    Yields:
        The decoded frames of the answer, as they arrive.

    Raises:
        ModelError: A typed subclass for every failure; `ModelUnavailableError` when the
            connection fails after frames were yielded.
    """
    attempt = 0
    yielded = False
    while True:
        retry_after: float | None = None
        cause: httpx.HTTPError | None = None
        client = endpoint.client or httpx.AsyncClient(timeout=endpoint.timeout)
        try:
            async with client.stream(
                "POST",
                endpoint.url,
                json=body,
                headers=dict(endpoint.headers),
                timeout=endpoint.timeout,
            ) as response:
                if response.status_code >= 400:
                    error, retry = await _error_answer(endpoint, response)
                    retry_after = parse_retry_after(response.headers)
                else:
                    decoder = SSEDecoder()
                    async for chunk in response.aiter_bytes():
                        for frame in decoder.feed(chunk):
                            yielded = True
                            yield frame
                    return
        except httpx.HTTPError as exc:
            if yielded:
                raise _transport_error(endpoint, exc, mid_stream=True) from exc
            # Nothing reached the caller yet, so trying again replays nothing.
            error, retry, cause = _transport_error(endpoint, exc, mid_stream=False), True, exc
        finally:
            if endpoint.client is None:
                await client.aclose()
        # The connection is closed by now: a long Retry-After holds no socket.
        if not (retry and await _wait(endpoint, attempt, retry_after)):
            raise error from cause
        attempt += 1


def _transport_error(
    endpoint: HTTPEndpoint, exc: httpx.HTTPError, *, mid_stream: bool
) -> ModelUnavailableError:
    where = "while streaming the answer" if mid_stream else "before an answer arrived"
    # The reason may name hosts and addresses: the log gets it, the message only its kind.
    _log_answer(endpoint.provider, f"connection failed {where}", str(exc), endpoint.secrets)
    advice = "" if mid_stream else "; try again later"
    message = f"{endpoint.provider} connection failed {where} ({type(exc).__name__}){advice}"
    return ModelUnavailableError(message)
