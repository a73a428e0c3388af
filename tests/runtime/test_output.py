"""Structured output in the run loop: validated answers, retries, the final-answer tool."""

from __future__ import annotations

import dataclasses
import json
from typing import Literal

import pytest
from pydantic import BaseModel
from typing_extensions import TypedDict

from agentkeel import Agent, InMemoryStorage, ScriptedModel, ScriptedToolCall, SessionManager
from agentkeel.errors import ConfigurationError
from agentkeel.events import TokenEvent
from agentkeel.messages import JSONObject, open_tool_calls
from agentkeel.models import FINAL_ANSWER_TOOL, ModelRequest
from agentkeel.models.scripted import ScriptedTurn
from agentkeel.output import OutputType
from agentkeel.tools import tool

pytestmark = pytest.mark.anyio


class Weather(BaseModel):
    city: str
    celsius: float


@dataclasses.dataclass
class Alert:
    level: Literal["low", "high"]
    message: str


class Point(TypedDict):
    x: int
    y: int


@tool
def lookup(city: str) -> str:
    """Look a city up."""
    return f"{city}: 4 degrees"


async def test_a_pydantic_answer_is_validated_and_the_request_carries_the_schema() -> None:
    model = ScriptedModel(['{"city": "Oslo", "celsius": 4}'])
    result = await Agent(model, output_type=Weather).invoke_async("weather?")
    assert result.status == "completed"
    assert result.output == Weather(city="Oslo", celsius=4)
    assert result.output_as(Weather).city == "Oslo"
    assert result.text == '{"city": "Oslo", "celsius": 4}'
    output = model.requests[0].output
    assert output is not None and output.name == "Weather"
    assert output.schema["required"] == ["city", "celsius"]
    assert output.strict_schema is not None
    assert output.strict_schema["additionalProperties"] is False


@pytest.mark.parametrize(
    ("output_type", "answer", "expected"),
    [
        (Alert, '{"level": "high", "message": "storm"}', Alert(level="high", message="storm")),
        (Point, '{"x": 1, "y": 2}', {"x": 1, "y": 2}),
        (Weather | Alert, '{"result": {"level": "low", "message": "calm"}}', Alert("low", "calm")),
        ([Weather, Point], '{"result": {"x": 3, "y": 4}}', {"x": 3, "y": 4}),
        (list[Point], '{"result": [{"x": 1, "y": 1}]}', [{"x": 1, "y": 1}]),
    ],
)
async def test_dataclasses_typed_dicts_unions_and_lists(
    output_type: object, answer: str, expected: object
) -> None:
    result = await Agent(ScriptedModel([answer]), output_type=output_type).invoke_async("go")
    assert result.status == "completed", result.error
    assert result.output == expected


def test_a_union_is_wrapped_in_an_object_for_the_provider() -> None:
    schema = OutputType.of([Weather, Alert]).schema
    assert schema.schema["type"] == "object"
    assert schema.schema["required"] == ["result"]
    assert "anyOf" in json.dumps(schema.schema)


def test_an_optional_field_has_no_strict_schema() -> None:
    class Forecast(BaseModel):
        city: str
        note: str | None = None

    assert OutputType.of(Forecast).schema.strict_schema is None
    assert OutputType.of(dict[str, int]).schema.strict_schema is None


async def test_an_invalid_answer_goes_back_with_its_errors_then_a_valid_one_wins() -> None:
    model = ScriptedModel(['{"city": "Oslo"}', '```json\n{"city": "Oslo", "celsius": 4}\n```'])
    result = await Agent(model, output_type=Weather).invoke_async("weather?")
    assert result.status == "completed"
    assert result.output == Weather(city="Oslo", celsius=4)
    feedback = model.requests[1].messages[-1]
    assert feedback.role == "user"
    assert "celsius: Field required" in feedback.text
    assert result.usage.input_tokens == 20  # both calls count


async def test_an_answer_that_never_validates_fails_with_output_invalid_and_keeps_it() -> None:
    storage = InMemoryStorage()
    model = ScriptedModel(["not json", '{"city": 1}'])
    agent = Agent(
        model,
        output_type=Weather,
        session_manager=SessionManager("chat:ctx-bad", storage),
    )
    result = await agent.invoke_async("weather?")
    assert result.status == "failed"
    assert result.error is not None and result.error.code == "output_invalid"
    assert "2 attempts" in result.error.message
    assert result.output is None
    assert result.text == '{"city": 1}'
    assert model.remaining == 0  # output_retries=1: one retry, no more
    [record] = await storage.list_runs(agent.session_manager.key)  # type: ignore[union-attr]
    assert record.status == "failed" and record.text == '{"city": 1}'
    assert not open_tool_calls(agent.messages)


async def test_output_retries_zero_fails_on_the_first_bad_answer() -> None:
    model = ScriptedModel(["{}", '{"city": "Oslo", "celsius": 4}'])
    result = await Agent(model, output_type=Weather, output_retries=0).invoke_async("w")
    assert result.error is not None and result.error.code == "output_invalid"
    assert model.remaining == 1


def _answer(arguments: JSONObject | None = None, raw: str | None = None) -> ScriptedTurn:
    call = ScriptedToolCall(FINAL_ANSWER_TOOL, arguments or {}, raw_arguments=raw)
    return ScriptedTurn(tool_calls=[call])


async def test_the_final_answer_tool_ends_the_run_after_real_tools() -> None:
    model = ScriptedModel(
        [
            ScriptedTurn(tool_calls=[ScriptedToolCall("lookup", {"city": "Oslo"})]),
            _answer(raw='{"city": "Oslo", "celsius": 4'),  # invalid JSON first
            _answer({"city": "Oslo", "celsius": 4}),
        ]
    )
    agent = Agent(model, tools=[lookup], output_type=Weather)
    events: list[object] = []
    result = await agent.invoke_async("weather?", on_event=events.append)
    assert result.status == "completed"
    assert result.output == Weather(city="Oslo", celsius=4)
    assert result.tool_names == ["lookup"]  # the answer is not a tool that ran
    retry = model.requests[2].messages[-1]
    [part] = retry.tool_results
    assert part.status == "error" and "not valid JSON" in str(part.content)
    assert not open_tool_calls(agent.messages)  # the final answer got its result too
    tokens = "".join(e.text for e in events if isinstance(e, TokenEvent))
    assert '{"city": "Oslo", "celsius": 4}' in tokens  # the answer's JSON streamed


async def test_calls_beside_a_final_answer_are_not_run() -> None:
    turn = ScriptedTurn(
        tool_calls=[
            ScriptedToolCall("lookup", {"city": "Oslo"}),
            ScriptedToolCall(FINAL_ANSWER_TOOL, {"city": "Oslo", "celsius": 4}),
        ]
    )
    agent = Agent(ScriptedModel([turn]), tools=[lookup], output_type=Weather)
    result = await agent.invoke_async("weather?")
    assert result.status == "completed" and result.tool_names == []
    results = agent.messages[-1].tool_results
    assert [r.status for r in results] == ["error", "success"]


async def test_json_tokens_stream_as_tokens_in_text_mode() -> None:
    events: list[object] = []
    answer = '{"city": "Oslo", "celsius": 4}'
    await Agent(ScriptedModel([answer]), output_type=Weather).invoke_async(
        "w", on_event=events.append
    )
    assert "".join(e.text for e in events if isinstance(e, TokenEvent)) == answer


def test_a_tool_named_like_the_final_answer_is_refused() -> None:
    @tool(name=FINAL_ANSWER_TOOL)
    def clash() -> str:
        """Clash."""
        return ""

    with pytest.raises(ConfigurationError, match="final_answer"):
        Agent(ScriptedModel([]), tools=[clash], output_type=Weather)


def test_a_type_without_a_schema_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="output_type"):
        Agent(ScriptedModel([]), output_type=object())


async def test_an_agent_without_output_type_sends_none() -> None:
    model = ScriptedModel(["hi"])
    result = await Agent(model).invoke_async("x")
    assert result.output is None
    request: ModelRequest = model.requests[0]
    assert request.output is None
