"""The binding's own streaming sends answer as the SDK's dispatchers do, errors included.

A plain ``SendStreamingMessage`` (JSON-RPC) or ``message:stream`` (HTTP+JSON) is served
by `StreamEndpoints`; the same request with an empty ``configuration`` (or ``metadata``)
is handed to the SDK's own endpoint. Each pair must give the same events and the same
errors, so the fast path cannot drift from the protocol.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from a2a_binding import base_url
from agentkeel.sse import aiter_sse

pytestmark = pytest.mark.anyio

VERSION = {"A2A-Version": "1.0"}
_VARIABLE = {"taskId", "contextId", "id", "timestamp", "messageId"}


def _shape(value: Any) -> Any:
    """`value` without the ids and times that differ from turn to turn."""
    if isinstance(value, dict):
        return {key: "*" if key in _VARIABLE else _shape(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_shape(item) for item in value]
    return value


def _summary(stream: tuple[int, str, list[tuple[str | None, Any]]]) -> tuple[object, ...]:
    """What must match: the status, the first and last events, kinds and the text.

    How many chunks the text comes in depends on timing (frames that arrive together
    leave together), so the chunks themselves are not compared.
    """
    status, kind, frames = stream
    results = [data.get("result", data) for _, data in frames]
    text = "".join(
        part.get("text", "")
        for result in results
        for part in result.get("artifactUpdate", {}).get("artifact", {}).get("parts", [])
    )
    kinds = {name for result in results for name in result}
    return status, kind, _shape(frames[0]), _shape(frames[-1]), sorted(kinds), text


def _message(text: str, message_id: str, **extra: object) -> dict[str, object]:
    return {"role": "ROLE_USER", "messageId": message_id, "parts": [{"text": text}], **extra}


async def _stream(
    http: httpx.AsyncClient, url: str, body: object, headers: dict[str, str] = VERSION
) -> tuple[int, str, list[tuple[str | None, Any]]]:
    """Status, content type and the (event name, JSON data) of each SSE event."""
    async with http.stream("POST", url, json=body, headers=headers) as response:
        if not response.headers["content-type"].startswith("text/event-stream"):
            await response.aread()
            return response.status_code, response.headers["content-type"], [("", response.json())]
        frames = [
            (frame.event, json.loads(frame.data))
            async for frame in aiter_sse(response.aiter_bytes())
        ]
        return response.status_code, "text/event-stream", frames


def _jsonrpc(message: dict[str, object], slow: bool) -> dict[str, object]:
    params: dict[str, object] = {"message": message}
    if slow:
        params["configuration"] = {}
    return {"jsonrpc": "2.0", "id": 5, "method": "SendStreamingMessage", "params": params}


async def test_a_jsonrpc_stream_is_the_sdk_dispatchers_stream(server_url: str) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        fast = await _stream(http, base_url(server_url), _jsonrpc(_message("hello", "f-1"), False))
        slow = await _stream(http, base_url(server_url), _jsonrpc(_message("hello", "s-1"), True))
    assert fast[:2] == (200, "text/event-stream")
    assert _summary(fast) == _summary(slow)
    first, last = fast[2][0][1], fast[2][-1][1]
    assert first["id"] == 5 and first["result"]["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
    assert first["result"]["task"]["history"][0]["parts"] == [{"text": "hello"}]
    assert last["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_a_rest_stream_is_the_sdk_routes_stream(server_url: str) -> None:
    url = base_url(server_url) + "/v1/message:stream"
    async with httpx.AsyncClient(timeout=30) as http:
        fast = await _stream(http, url, {"message": _message("hello", "f-2")})
        slow = await _stream(http, url, {"message": _message("hello", "s-2"), "metadata": {}})
    assert fast[:2] == (200, "text/event-stream")
    assert _summary(fast) == _summary(slow)
    assert fast[2][0][1]["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
    assert fast[2][-1][1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


@pytest.mark.parametrize(
    ("message", "code"),
    [
        ({"role": "ROLE_USER", "parts": [{"text": "no id"}]}, -32602),
        ({"role": "ROLE_AGENT", "messageId": "e-1", "parts": [{"text": "x"}]}, -32602),
        ({"role": "ROLE_USER", "messageId": "e-2", "parts": [{"text": 3}]}, -32602),
        (_message("x", "e-3", taskId="run-000000000000000000000000"), -32001),
    ],
)
async def test_jsonrpc_errors_before_the_stream_are_the_sdks(
    server_url: str, message: dict[str, object], code: int
) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        fast = await _stream(http, base_url(server_url), _jsonrpc(message, False))
        slow = await _stream(http, base_url(server_url), _jsonrpc(message, True))
    assert fast[0] == 200 and fast[1].startswith("application/json")
    error = fast[2][0][1]
    assert error["id"] == 5 and error["error"]["code"] == code
    assert _shape(fast) == _shape(slow)


@pytest.mark.parametrize(
    ("message", "status"),
    [
        ({"role": "ROLE_USER", "parts": [{"text": "no id"}]}, 400),
        (_message("x", "e-4", taskId="run-000000000000000000000000"), 404),
    ],
)
async def test_rest_errors_before_the_stream_are_the_sdks(
    server_url: str, message: dict[str, object], status: int
) -> None:
    url = base_url(server_url) + "/v1/message:stream"
    async with httpx.AsyncClient(timeout=30) as http:
        fast = await _stream(http, url, {"message": message})
        slow = await _stream(http, url, {"message": message, "metadata": {}})
    assert fast[0] == status and fast[1].startswith("application/json")
    assert fast[2][0][1]["error"]["code"] == status
    assert fast == slow


async def test_requests_the_fast_path_does_not_take_get_the_sdks_answer(server_url: str) -> None:
    body = _jsonrpc(_message("x", "v-1"), False)
    rest = base_url(server_url) + "/v1/message:stream"
    async with httpx.AsyncClient(timeout=30) as http:
        old = await _stream(http, base_url(server_url), body, headers={})  # no version: 0.3
        assert old[2][0][1]["error"]["code"] == -32009
        notification = {key: value for key, value in body.items() if key != "id"}
        answered = await _stream(http, base_url(server_url), notification)
        assert answered[0] == 200
        extra = await _stream(http, base_url(server_url), {**body, "extra": 1})
        assert extra[2][0][1]["error"]["code"] == -32600
        bad = await http.post(rest, content=b"{nope", headers=VERSION)
        assert bad.status_code == 400 and bad.json()["error"]["status"] == "INVALID_ARGUMENT"
        old_rest = await _stream(http, rest, {"message": _message("x", "v-2")}, headers={})
        assert old_rest[2][0][1]["error"]["details"][0]["reason"] == "VERSION_NOT_SUPPORTED"
