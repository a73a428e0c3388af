"""``server.limits`` over real HTTP: streams, turn rates, message size, per principal.

Servers are built from framework.json documents (so the keys are validated as users
write them) and served by uvicorn on loopback; API keys give two principals.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import anyio
import httpx
import pytest

from agentkeel.errors import ConfigurationError
from agentkeel.framework import load_framework
from agentkeel.json_decode import decode_json
from agentkeel.server import create_app
from e2e import serve_in_thread, stream_turn

pytestmark = pytest.mark.anyio

ALICE = {"X-API-Key": "alice-key-limits-3b9f0c"}
BOB = {"X-API-Key": "bob-key-limits-77d1ae"}
AGENT = {"scripted": {"factory": "e2e:scripted_agent"}}
SEND = "/agents/scripted/send"
STREAM = "/agents/scripted/stream"
Start = Callable[..., AbstractContextManager[str]]


def document(limits: dict[str, object], *, auth: bool = False) -> dict[str, object]:
    server: dict[str, object] = {"heartbeatSeconds": 1, "shutdownTimeoutSeconds": 5}
    server["limits"] = limits
    if auth:
        keys = {"alice": {"env": "LIMITS_ALICE_KEY"}, "bob": {"env": "LIMITS_BOB_KEY"}}
        server["auth"] = {"apiKeys": keys}
    return {"agents": AGENT, "server": server}


@pytest.fixture
def start(tool_log: Path, monkeypatch: pytest.MonkeyPatch) -> Start:
    del tool_log
    monkeypatch.setenv("LIMITS_ALICE_KEY", ALICE["X-API-Key"])
    monkeypatch.setenv("LIMITS_BOB_KEY", BOB["X-API-Key"])

    @contextmanager
    def serve(limits: dict[str, object], *, auth: bool = False) -> Iterator[str]:
        with serve_in_thread(create_app(document(limits, auth=auth))) as url:
            yield url

    return serve


def assert_limited(response: httpx.Response, most: int = 60) -> None:
    assert response.status_code == 429, response.text
    assert response.json()["error"]["code"] == "rate_limited"
    assert 1 <= int(response.headers["retry-after"]) <= most


async def refusals(client: httpx.AsyncClient, reason: str) -> float:
    wanted = f'agentkeel_limit_refusals_total{{reason="{reason}"}} '
    scraped = await client.get("/metrics", headers=ALICE)
    assert scraped.status_code == 200
    for line in scraped.text.splitlines():
        if line.startswith(wanted):
            return float(line.split()[1])
    return 0.0


async def test_turns_per_minute_per_principal_are_refused_with_retry_after(start: Start) -> None:
    with start({"turnsPerMinutePerPrincipal": 3}, auth=True) as url:
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            for index in range(3):
                body = {"message": f"m{index}", "contextId": f"c{index}"}
                answered = await client.post(SEND, json=body, headers=ALICE)
                assert answered.status_code == 200, answered.text
            refused = await client.post(SEND, json={"message": "one more"}, headers=ALICE)
            assert_limited(refused)
            streamed = await client.post(STREAM, json={"message": "and a stream"}, headers=ALICE)
            assert_limited(streamed)
            other = await client.post(SEND, json={"message": "bob's first"}, headers=BOB)
            assert other.status_code == 200, "another principal has a count of its own"
            assert await refusals(client, "principal_turns") == 2


async def test_turns_per_minute_per_context(start: Start) -> None:
    with start({"turnsPerMinutePerContext": 2}) as url:
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            for index in range(2):
                body = {"message": f"m{index}", "contextId": "busy"}
                assert (await client.post(SEND, json=body)).status_code == 200
            assert_limited(await client.post(SEND, json={"message": "x", "contextId": "busy"}))
            other = await client.post(SEND, json={"message": "x", "contextId": "quiet"})
            assert other.status_code == 200
            history = await client.post(SEND, json={"message": "history", "contextId": "quiet"})
            assert history.json()["text"] == "x|history"
            assert await refusals(client, "context_turns") == 1


async def test_concurrent_streams_per_principal(start: Start) -> None:
    with start({"streamsPerPrincipal": 2}, auth=True) as url:
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            release = anyio.Event()
            opened = 0

            async def hold(context_id: str) -> None:
                nonlocal opened
                body = {"message": "slow 60", "contextId": context_id}
                async with client.stream("POST", STREAM, json=body, headers=ALICE) as response:
                    assert response.status_code == 200
                    opened += 1
                    await release.wait()

            async with anyio.create_task_group() as group:
                group.start_soon(hold, "s1")
                group.start_soon(hold, "s2")
                with anyio.fail_after(10):
                    while opened < 2:
                        await anyio.sleep(0.01)
                third = await client.post(STREAM, json={"message": "hi"}, headers=ALICE)
                assert_limited(third)
                replay = await client.get("/agents/scripted/contexts/s1/stream", headers=ALICE)
                assert_limited(replay)  # a reconnect holds a stream too
                bobs = await stream_turn(client, "scripted", {"message": "hi"}, headers=BOB)
                assert bobs[-1].done
                release.set()
                group.cancel_scope.cancel()  # the readers go; their runs go on
            with anyio.fail_after(10):
                while True:  # the slots come back as the streams end
                    again = await client.post(STREAM, json={"message": "hi"}, headers=ALICE)
                    if again.status_code == 200:
                        break
                    assert_limited(again)
                    await anyio.sleep(0.05)
            assert await refusals(client, "streams") >= 2


async def test_the_largest_message(start: Start) -> None:
    with start({"maxMessageBytes": 12}) as url:
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            fits = await client.post(SEND, json={"message": "x" * 12})
            assert fits.status_code == 200
            too_big = await client.post(SEND, json={"message": "é" * 7})  # 14 bytes in UTF-8
            assert too_big.status_code == 413
            assert too_big.json()["error"]["code"] == "message_too_large"
            parts = {"role": "user", "parts": [{"kind": "text", "text": "x" * 8}] * 2}
            as_parts = await client.post(STREAM, json={"message": parts})
            assert as_parts.status_code == 413
            assert await refusals(client, "message_size") == 2


@pytest.mark.parametrize(
    ("limits", "where"),
    [
        ({"streamsPerPrincipal": 0}, "server.limits.streamsPerPrincipal"),
        ({"turnsPerMinutePerPrincipal": -1}, "server.limits.turnsPerMinutePerPrincipal"),
        ({"maxMessageBytes": "big"}, "server.limits.maxMessageBytes"),
        ({"bodyTimeoutSeconds": 0}, "server.limits.bodyTimeoutSeconds"),
        ({"turnsPerHour": 5}, "server.limits.turnsPerHour"),
    ],
)
def test_limits_are_validated(limits: dict[str, object], where: str) -> None:
    with pytest.raises(ConfigurationError, match=where.replace(".", r"\.")):
        load_framework(document(limits))


def test_limits_are_loaded() -> None:
    loaded = load_framework(
        document(
            {"streamsPerPrincipal": 4, "turnsPerMinutePerContext": 10, "bodyTimeoutSeconds": 2}
        )
    ).server.limits
    assert loaded.streams_per_principal == 4
    assert loaded.turns_per_minute_per_context == 10
    assert loaded.turns_per_minute_per_principal is None
    assert loaded.body_timeout_seconds == 2.0


async def test_the_openai_binding_answers_limits_in_its_own_shape(start: Start) -> None:
    with start({"turnsPerMinutePerPrincipal": 1}) as url:
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            body = {"model": "scripted", "messages": [{"role": "user", "content": "hi"}]}
            first = await client.post("/v1/chat/completions", json=body)
            assert first.status_code == 200, first.text
            refused = await client.post("/v1/chat/completions", json=body)
            assert refused.status_code == 429, refused.text
            assert refused.json()["error"]["code"] == "rate_limited"
            assert refused.json()["error"]["type"] == "rate_limit_error"
            assert 1 <= int(refused.headers["retry-after"]) <= 60


def test_bodies_decode_as_json_decodes_them() -> None:
    """The fast decoder accepts and refuses exactly what ``json`` does (NaN refused)."""
    accepted = [b'{"a": 1, "a": 2}', b"\xef\xbb\xbf{}", b'"\\ud800"', b"[" * 300 + b"]" * 300]
    accepted += [b"1e400", b'{"n": 123456789012345678901234567890}', b' {"x": [1.5, null]} ']
    for body in accepted:
        assert decode_json(body) == json.loads(body), body
    for body in [b"NaN", b'{"a": Infinity}', b'{"a":1,}', b'"a\x01b"', b'{"a":1}x', b'"\xff"']:
        with pytest.raises(ValueError):
            decode_json(body)
