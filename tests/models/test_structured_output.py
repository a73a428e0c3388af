"""Typed answers through the real provider wires, against fakes that refuse what the APIs refuse."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, cast

import httpx
import pytest
from pydantic import BaseModel

from agentkeel import Agent
from agentkeel.events import TokenEvent
from agentkeel.messages import JSONObject
from agentkeel.models import FINAL_ANSWER_TOOL
from agentkeel.models.anthropic import AnthropicModel
from agentkeel.models.openai import OpenAIModel
from agentkeel.output import OutputType
from fakes import AnthropicStream, FakeAnthropic, FakeOpenAI, OpenAIStream, Reply
from fakes.server import FakeProviderServer

pytestmark = pytest.mark.anyio


class Weather(BaseModel):
    city: str
    celsius: float


class Forecast(BaseModel):
    """A forecast; `note` is optional, which strict mode cannot express."""

    city: str
    note: str | None = None


@pytest.fixture(scope="module")
def openai() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI()
    with fake.serve():
        yield fake


@pytest.fixture
def fake(openai: FakeOpenAI) -> FakeOpenAI:
    openai.reset()
    return openai


@pytest.fixture(scope="module")
def anthropic() -> Iterator[FakeAnthropic]:
    fake = FakeAnthropic()
    with fake.serve():
        yield fake


@pytest.fixture
def claude(anthropic: FakeAnthropic) -> FakeAnthropic:
    anthropic.reset()
    return anthropic


def sent(server: FakeProviderServer, index: int) -> dict[str, Any]:
    """A recorded request body, loosely typed for reading."""
    return cast(dict[str, Any], server.requests[index].json)


def text_reply(*pieces: str) -> Reply:
    return OpenAIStream().text(*pieces).finish("stop").usage(30, 12).reply()


def response_format(fake: FakeOpenAI, index: int = 0) -> JSONObject:
    value = fake.requests[index].json["response_format"]
    assert isinstance(value, dict)
    return value


async def test_openai_asks_with_a_strict_json_schema_and_parses_the_streamed_json(
    fake: FakeOpenAI,
) -> None:
    fake.enqueue(text_reply('{"city": "Os', 'lo", "celsius": 4.5}'))
    agent = Agent(OpenAIModel("gpt-test", base_url=fake.base_url), output_type=Weather)
    events: list[object] = []
    result = await agent.invoke_async("weather in Oslo?", on_event=events.append)
    assert result.status == "completed", result.error
    assert result.output == Weather(city="Oslo", celsius=4.5)
    sent = response_format(fake)
    assert sent["type"] == "json_schema"
    spec = sent["json_schema"]
    assert isinstance(spec, dict) and spec["strict"] is True and spec["name"] == "Weather"
    tokens = [e.text for e in events if isinstance(e, TokenEvent)]
    assert tokens == ['{"city": "Os', 'lo", "celsius": 4.5}']
    assert result.usage.input_tokens == 30 and result.usage.output_tokens == 12


async def test_the_fake_refuses_what_strict_mode_refuses(fake: FakeOpenAI) -> None:
    """The fake is only worth something if it says no where the API does."""
    plain = OutputType.of(Forecast).schema.schema
    cases: list[tuple[JSONObject, str]] = [
        (plain, "'additionalProperties' is required to be supplied"),
        ({**plain, "additionalProperties": False}, "Missing 'note'"),
    ]
    async with httpx.AsyncClient(base_url=fake.base_url) as client:
        for schema, message in cases:
            body = {
                "model": "gpt-test",
                "messages": [{"role": "user", "content": "x"}],
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "Forecast", "schema": schema, "strict": True},
                },
            }
            response = await client.post("/chat/completions", json=body)
            assert response.status_code == 400
            assert message in response.json()["error"]["message"]


async def test_a_schema_strict_mode_refuses_is_sent_non_strict(fake: FakeOpenAI) -> None:
    fake.enqueue(text_reply('{"city": "Oslo"}'))
    agent = Agent(OpenAIModel("gpt-test", base_url=fake.base_url), output_type=Forecast)
    result = await agent.invoke_async("forecast?")
    assert result.status == "completed", result.error
    assert result.output == Forecast(city="Oslo")
    spec = response_format(fake)["json_schema"]
    assert isinstance(spec, dict) and spec["strict"] is False
    assert str(spec["description"]).startswith("A forecast")


async def test_openai_invalid_json_then_valid_json(fake: FakeOpenAI) -> None:
    fake.enqueue(
        text_reply('{"city": "Oslo", "celsius": "warm"}'),
        text_reply('{"city": "Oslo", "celsius": 4}'),
    )
    agent = Agent(OpenAIModel("gpt-test", base_url=fake.base_url), output_type=Weather)
    result = await agent.invoke_async("weather?")
    assert result.status == "completed"
    assert result.output == Weather(city="Oslo", celsius=4)
    messages = sent(fake, 1)["messages"]
    assert isinstance(messages, list)
    assert messages[-2] == {"role": "assistant", "content": '{"city": "Oslo", "celsius": "warm"}'}
    last = messages[-1]
    assert isinstance(last, dict) and last["role"] == "user"
    assert "celsius" in str(last["content"]) and "valid number" in str(last["content"])
    assert result.usage.input_tokens == 60


async def test_openai_never_right_fails_with_output_invalid(fake: FakeOpenAI) -> None:
    fake.enqueue(text_reply("It is warm."), text_reply('{"city": "Oslo"}'))
    agent = Agent(OpenAIModel("gpt-test", base_url=fake.base_url), output_type=Weather)
    result = await agent.invoke_async("weather?")
    assert result.status == "failed"
    assert result.error is not None and result.error.code == "output_invalid"
    assert result.text == '{"city": "Oslo"}'
    assert len(fake.requests) == 2 and fake.script.pending == 0


async def test_a_server_without_json_schema_refuses_it_and_the_tool_mode_works() -> None:
    fake = FakeOpenAI(json_schema=False)
    with fake.serve() as base_url:
        fake.enqueue(text_reply("{}"))
        native = Agent(OpenAIModel("local", base_url=base_url, max_retries=0), output_type=Weather)
        refused = await native.invoke_async("weather?")
        assert refused.error is not None and refused.error.code == "model_bad_request"

        fake.reset()
        stream = OpenAIStream().tool_call(
            0, id="call_1", name=FINAL_ANSWER_TOOL, arguments=['{"city":"Oslo",', '"celsius":4}']
        )
        fake.enqueue(stream.finish("tool_calls").usage(20, 8).reply())
        model = OpenAIModel("local", base_url=base_url, structured_output="tool")
        events: list[object] = []
        result = await Agent(model, output_type=Weather).invoke_async("w", on_event=events.append)
    assert result.status == "completed", result.error
    assert result.output == Weather(city="Oslo", celsius=4)
    body = sent(fake, 0)
    assert "response_format" not in body and body["tool_choice"] == "required"
    tools = body["tools"]
    assert isinstance(tools, list) and tools[-1]["function"]["name"] == FINAL_ANSWER_TOOL
    tokens = "".join(e.text for e in events if isinstance(e, TokenEvent))
    assert tokens == '{"city":"Oslo","celsius":4}'


def claude_answer(arguments: list[str], *, call_id: str = "toolu_1") -> Reply:
    stream = AnthropicStream(input_tokens=40, cache_read_tokens=25)
    return (
        stream.tool_use(id=call_id, name=FINAL_ANSWER_TOOL, arguments=arguments)
        .stop("tool_use", output_tokens=9)
        .reply()
    )


async def test_anthropic_forces_a_final_answer_tool_and_retries_an_invalid_one(
    claude: FakeAnthropic,
) -> None:
    claude.enqueue(
        claude_answer(['{"city": "Oslo"}']),
        claude_answer(['{"city": "Oslo", ', '"celsius": 4}'], call_id="toolu_2"),
    )
    model = AnthropicModel("claude-test", base_url=claude.base_url)
    agent = Agent(model, output_type=Weather)
    result = await agent.invoke_async("weather?")
    assert result.status == "completed", result.error
    assert result.output == Weather(city="Oslo", celsius=4)
    first = sent(claude, 0)
    assert first["tool_choice"] == {"type": "any"}
    tools = first["tools"]
    assert isinstance(tools, list) and tools[-1]["name"] == FINAL_ANSWER_TOOL
    retry = sent(claude, 1)["messages"]
    assert isinstance(retry, list)
    [block] = retry[-1]["content"]
    assert block["type"] == "tool_result" and block["is_error"] is True
    assert "celsius" in block["content"]
    assert result.usage.cached_tokens == 50  # cache reads reported apart, summed
    assert result.usage.input_tokens == 2 * (40 + 25)


async def test_anthropic_never_right_keeps_a_valid_history(claude: FakeAnthropic) -> None:
    claude.enqueue(claude_answer(["{}"]), claude_answer(['{"city": 3}'], call_id="toolu_2"))
    agent = Agent(AnthropicModel("claude-test", base_url=claude.base_url), output_type=Weather)
    result = await agent.invoke_async("weather?")
    assert result.error is not None and result.error.code == "output_invalid"
    assert json.loads(result.text) == {"city": 3}
    # the next turn's request is accepted: every tool_use has its tool_result
    claude.enqueue(claude_answer(['{"city": "Oslo", "celsius": 1}'], call_id="toolu_3"))
    again = await agent.invoke_async("try again")
    assert again.status == "completed", again.error


async def test_anthropic_with_thinking_cannot_force_the_tool(claude: FakeAnthropic) -> None:
    claude.enqueue(claude_answer(['{"city": "Oslo", "celsius": 4}']))
    model = AnthropicModel(
        "claude-test", base_url=claude.base_url, max_tokens=2048, thinking_budget=1024
    )
    result = await Agent(model, output_type=Weather).invoke_async("weather?")
    assert result.status == "completed", result.error
    assert sent(claude, 0)["tool_choice"] == {"type": "auto"}


async def test_the_anthropic_fake_refuses_a_forced_tool_with_thinking(
    claude: FakeAnthropic,
) -> None:
    body = {
        "model": "claude-test",
        "max_tokens": 2048,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "tools": [{"name": "t", "description": "", "input_schema": {"type": "object"}}],
        "tool_choice": {"type": "any"},
        "messages": [{"role": "user", "content": "x"}],
    }
    headers = {"anthropic-version": "2023-06-01"}
    async with httpx.AsyncClient(base_url=claude.base_url) as client:
        response = await client.post("/v1/messages", json=body, headers=headers)
        assert response.status_code == 400
        assert "tool_choice forces tool use" in response.json()["error"]["message"]
        body = {**body, "thinking": None, "tool_choice": None, "response_format": {}}
        body = {key: value for key, value in body.items() if value is not None}
        response = await client.post("/v1/messages", json=body, headers=headers)
        assert response.status_code == 400
        assert "response_format: Extra inputs" in response.json()["error"]["message"]


async def test_openai_reports_cached_and_reasoning_tokens(fake: FakeOpenAI) -> None:
    stream = OpenAIStream().text("hi").finish("stop")
    fake.enqueue(stream.usage(100, 40, cached_tokens=64, reasoning_tokens=30).reply())
    result = await Agent(OpenAIModel("gpt-test", base_url=fake.base_url)).invoke_async("x")
    assert result.usage.cached_tokens == 64 and result.usage.reasoning_tokens == 30
    assert result.usage.input_tokens == 100 and result.usage.output_tokens == 40
