"""Typed answers, usage, costs, budgets and token metrics on the wire."""

from __future__ import annotations

import calendar
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from google.protobuf.json_format import MessageToDict

from a2a_binding import a2a_client, send, user_message
from agentkeel.client import AsyncAgentClient
from agentkeel.result import Usage
from agentkeel.server import create_app
from agentkeel.storage import LocalFileStorage, SessionKey
from agentkeel.storage.usage import utc_day
from e2e import ServerProcess, serve_in_thread, stream_turn, write_framework
from e2e.typed import WEATHER_JSON
from fakes import FakeOpenAI, OpenAIStream, RecordedRequest, Reply

pytestmark = pytest.mark.anyio
SCRIPTED = {"factory": "e2e:scripted_agent"}  # every model call: 10 input, 5 output tokens


def weather_reply(recorded: RecordedRequest) -> Reply:
    del recorded
    return OpenAIStream().text(WEATHER_JSON[:12], WEATHER_JSON[12:]).finish().usage(30, 12).reply()


@pytest.fixture(scope="module")
def openai() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI(responder=weather_reply)
    with fake.serve():
        yield fake


def weather_framework(base_url: str) -> dict[str, object]:
    return {
        "agents": {
            "weather": {
                "model": {"provider": "openai", "model": "gpt-test", "baseUrl": base_url},
                "output": "e2e.typed:Weather",
                "outputRetries": 2,
            },
            "scripted": SCRIPTED,
        },
        "prices": {"gpt-test": {"input": 2.5, "output": 10}},
    }


async def test_a_declared_output_type_streams_json_and_ends_with_output_usage_and_cost(
    openai: FakeOpenAI,
) -> None:
    with serve_in_thread(create_app(weather_framework(openai.base_url))) as url:
        async with httpx.AsyncClient(base_url=url, timeout=20) as client:
            frames = await stream_turn(client, "weather", {"message": "Oslo?"})
            sent = (await client.post("/agents/weather/send", json={"message": "Oslo?"})).json()
            plain = (await client.post("/agents/scripted/send", json={"message": "hi"})).json()
            metrics = (await client.get("/metrics")).text
    tokens = "".join(str(f.event["text"]) for f in frames[:-1] if f.event["type"] == "token")
    assert tokens == WEATHER_JSON  # the JSON streams as tokens; a page may hide them
    done = frames[-1].data
    assert done["status"] == "completed"
    assert done["output"] == {"city": "Oslo", "celsius": 4.0}
    assert done["text"] == WEATHER_JSON
    cost = (30 * 2.5 + 12 * 10) / 1_000_000
    assert done["usage"] == {"inputTokens": 30, "outputTokens": 12, "cost": cost}
    assert sent["output"] == done["output"] and sent["usage"] == done["usage"]
    assert "output" not in plain  # no output type, no output
    assert plain["usage"] == {"inputTokens": 10, "outputTokens": 5}  # no price, no cost
    assert 'agentkeel_tokens_total{agent="weather",kind="input"} 60' in metrics
    assert 'agentkeel_tokens_total{agent="weather",kind="output"} 24' in metrics
    assert 'agentkeel_tokens_total{agent="scripted",kind="output"} 5' in metrics
    response_format = openai.requests[0].json["response_format"]
    assert isinstance(response_format, dict) and response_format["type"] == "json_schema"


async def test_the_python_client_reads_output_usage_and_cost(openai: FakeOpenAI) -> None:
    with serve_in_thread(create_app(weather_framework(openai.base_url))) as url:
        async with AsyncAgentClient(url, agent="weather") as client:
            result = await client.send("Oslo?")
    assert result.output == {"city": "Oslo", "celsius": 4.0}
    assert result.usage == Usage(input_tokens=30, output_tokens=12)
    assert result.cost == pytest.approx((30 * 2.5 + 12 * 10) / 1_000_000)


def test_a_missing_output_type_names_the_key(tmp_path: Path) -> None:
    from agentkeel.errors import ConfigurationError
    from agentkeel.framework import load_framework

    document = weather_framework("http://127.0.0.1:9/v1")
    agents: Any = document["agents"]
    agents["weather"]["output"] = "e2e.typed:Nothing"
    with pytest.raises(ConfigurationError, match=r"agents\.weather\.output"):
        load_framework(document)


async def test_a2a_gets_the_output_as_a_data_artifact() -> None:
    document = {"agents": {"scripted": {"factory": "e2e.typed:weather_agent"}}}
    with serve_in_thread(create_app(document)) as url:
        async with a2a_client(url) as (client, _):
            task = await send(client, user_message("Oslo?"))
    [artifact] = [a for a in task.artifacts if a.artifact_id == "output"]
    [part] = artifact.parts
    assert part.WhichOneof("content") == "data"
    assert MessageToDict(part.data) == {"city": "Oslo", "celsius": 4.0}
    assert any(a.artifact_id == "response" for a in task.artifacts)  # the text stays


async def test_a_run_over_its_budget_fails_with_a_valid_history() -> None:
    document = {"agents": {"scripted": SCRIPTED}, "budgets": {"tokensPerRun": 10}}
    with serve_in_thread(create_app(document)) as url:
        async with httpx.AsyncClient(base_url=url, timeout=20) as client:
            frames = await stream_turn(client, "scripted", {"message": "pause 0"})
            done = frames[-1].data
            again = await client.post(
                "/agents/scripted/send",
                json={"message": "history", "contextId": done["contextId"]},
            )
    assert done["status"] == "failed"
    assert done["error"] == {
        "code": "budget_exceeded",
        "message": "the run used its budget of 10 tokens",
    }
    assert done["usage"] == {"inputTokens": 10, "outputTokens": 5}
    assert done["toolCalls"] == ["pause"]  # the tool ran; the second model call did not
    assert [f.event["type"] for f in frames[:-1]][-1] == "error"
    assert again.status_code == 200 and again.json()["text"] == "pause 0|history"


async def test_a_principal_over_its_daily_budget_gets_429_until_midnight() -> None:
    document = {"agents": {"scripted": SCRIPTED}, "budgets": {"tokensPerPrincipalPerDay": 30}}
    with serve_in_thread(create_app(document)) as url:
        async with httpx.AsyncClient(base_url=url, timeout=20) as client:
            for _ in range(2):
                ok = await client.post("/agents/scripted/send", json={"message": "hi"})
                assert ok.status_code == 200 and ok.json()["status"] == "completed"
            refused = await client.post("/agents/scripted/send", json={"message": "hi"})
            streamed = await client.post("/agents/scripted/stream", json={"message": "hi"})
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "budget_exceeded"
    now = time.time()
    day = time.gmtime(now)
    midnight = calendar.timegm((day.tm_year, day.tm_mon, day.tm_mday, 0, 0, 0)) + 86_400
    assert abs(int(refused.headers["retry-after"]) - (midnight - now)) <= 5
    assert streamed.status_code == 429 and "retry-after" in streamed.headers


def restart_framework(tmp_path: Path) -> Path:
    document = {
        "agents": {"scripted": SCRIPTED},
        "sessionDir": "./sessions",
        "budgets": {"tokensPerContext": 45},
        "server": {"heartbeatSeconds": 1, "shutdownTimeoutSeconds": 10},
    }
    return write_framework(tmp_path, document)


async def post(url: str, body: dict[str, object]) -> httpx.Response:
    async with httpx.AsyncClient(base_url=url, timeout=20) as client:
        return await client.post("/agents/scripted/send", json=body)


async def test_totals_survive_a_restart_and_keep_enforcing_the_budget(
    tmp_path: Path, tool_log: Path
) -> None:
    del tool_log
    server = ServerProcess(restart_framework(tmp_path))
    try:
        url = server.start()
        first = await post(url, {"message": "pause 0", "contextId": "ctx-usage"})  # 2 calls
        assert first.json()["usage"] == {"inputTokens": 20, "outputTokens": 10}
        server.stop()
        url = server.start()
        second = await post(url, {"message": "hi", "contextId": "ctx-usage"})
        assert second.json()["status"] == "completed"  # 30 < 45 before this call
        third = await post(url, {"message": "hi", "contextId": "ctx-usage"})
        other = await post(url, {"message": "hi", "contextId": "ctx-other"})
    finally:
        server.stop()
    assert third.json()["status"] == "failed"
    assert third.json()["error"]["code"] == "budget_exceeded"
    assert other.json()["status"] == "completed"  # another context has its own total
    storage = LocalFileStorage(tmp_path / "sessions")
    key = SessionKey(definition="scripted", context_id="ctx-usage")
    total = await storage.context_usage(key)
    assert (total.input_tokens, total.output_tokens) == (30, 15)
    today = await storage.principal_usage(None, utc_day())
    assert (today.input_tokens, today.output_tokens) == (40, 20)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"budgets": {"tokensPerRun": 0}}, "budgets.tokensPerRun: Input should be greater"),
        ({"budgets": {"tokensPerDay": 5}}, "budgets.tokensPerDay: unknown key"),
        ({"prices": {"m": {"input": 1}}}, "prices.m.output: required key is missing"),
        ({"prices": {"m": {"input": -1, "output": 1}}}, "prices.m.input: Input should be"),
    ],
)
def test_budgets_and_prices_are_validated_with_the_key_named(
    extra: dict[str, object], message: str
) -> None:
    from agentkeel.errors import ConfigurationError
    from agentkeel.framework import load_framework

    with pytest.raises(ConfigurationError, match=message):
        load_framework({"agents": {"scripted": SCRIPTED}, **extra})
