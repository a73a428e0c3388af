"""AnthropicModel against the fake Messages API server, over real loopback HTTP."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence

import pytest

from agentkeel.errors import (
    ConfigurationError,
    ContextOverflowError,
    ModelAuthError,
    ModelBadRequestError,
    ModelError,
    ModelRateLimitError,
    ModelUnavailableError,
)
from agentkeel.messages import Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from agentkeel.models import (
    Finish,
    ModelChunk,
    ModelRequest,
    ModelSettings,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolSpec,
)
from agentkeel.models.anthropic import AnthropicModel
from agentkeel.result import Usage
from fakes import AnthropicStream, FakeAnthropic, anthropic_error

API_KEY = "sk-ant-test-0123456789-secret"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def running() -> Iterator[FakeAnthropic]:
    fake = FakeAnthropic(api_key=API_KEY)
    with fake.serve():
        yield fake


@pytest.fixture
def fake(running: FakeAnthropic) -> Iterator[FakeAnthropic]:
    running.reset()
    yield running
    assert running.script.pending == 0, "a scripted reply was not used"


def make_model(
    fake: FakeAnthropic,
    *,
    max_retries: int = 2,
    thinking_budget: int | None = None,
    max_tokens: int = 4096,
) -> AnthropicModel:
    return AnthropicModel(
        "claude-test",
        base_url=fake.base_url,
        api_key=API_KEY,
        max_tokens=max_tokens,
        thinking_budget=thinking_budget,
        timeout=5.0,
        max_retries=max_retries,
        backoff_base=0.001,
    )


def ask(text: str = "Hi") -> ModelRequest:
    return ModelRequest(messages=(Message.user(text),))


async def collect(model: AnthropicModel, request: ModelRequest | None = None) -> list[ModelChunk]:
    return [chunk async for chunk in model.stream(request or ask())]


def assemble(chunks: Sequence[ModelChunk]) -> dict[int, tuple[str, str, str]]:
    """index -> (id, name, arguments), concatenating fragments as the run loop does."""
    calls: dict[int, list[str]] = {}
    for chunk in chunks:
        if isinstance(chunk, ToolCallDelta):
            call = calls.setdefault(chunk.index, ["", "", ""])
            call[0] += chunk.id or ""
            call[1] += chunk.name or ""
            call[2] += chunk.arguments
    return {index: (c[0], c[1], c[2]) for index, c in calls.items()}


def text_of(chunks: Sequence[ModelChunk]) -> str:
    return "".join(chunk.text for chunk in chunks if isinstance(chunk, TextDelta))


# --- streaming ------------------------------------------------------------------------


@pytest.mark.anyio
async def test_streams_text_with_pings_split_across_network_chunks(fake: FakeAnthropic) -> None:
    stream = AnthropicStream(input_tokens=25).ping().text("Det er ", "4 °C ", "i Oslo ❄").ping()
    fake.enqueue(stream.stop("end_turn", output_tokens=15).reply(chunk_size=4))

    chunks = await collect(make_model(fake))

    assert chunks == [
        TextDelta(text="Det er "),
        TextDelta(text="4 °C "),
        TextDelta(text="i Oslo ❄"),
        Finish(stop_reason="end_turn", usage=Usage(input_tokens=25, output_tokens=15)),
    ]


@pytest.mark.anyio
async def test_thinking_signature_and_tool_calls(fake: FakeAnthropic) -> None:
    stream = (
        AnthropicStream()
        .thinking("Two cities, ", "two calls.", signature="EqQBCgIYAh...")
        .text("Checking both.")
        .tool_use(id="toolu_1", name="get_weather", arguments=['{"ci', 'ty": "Os', 'lo"}'])
        .tool_use(id="toolu_2", name="get_weather", arguments=["", '{"city": ', '"Bergen"}'])
        .stop("tool_use", output_tokens=40)
    )
    fake.enqueue(stream.reply(chunk_size=13))

    chunks = await collect(make_model(fake))

    thinking = [c for c in chunks if isinstance(c, ThinkingDelta)]
    assert "".join(c.text for c in thinking) == "Two cities, two calls."
    assert [c.signature for c in thinking if c.signature] == ["EqQBCgIYAh..."]
    assert text_of(chunks) == "Checking both."
    calls = assemble(chunks)
    assert calls.keys() == {2, 3}  # the content block indexes
    assert calls[2][:2] == ("toolu_1", "get_weather")
    assert json.loads(calls[2][2]) == {"city": "Oslo"}
    assert calls[3][:2] == ("toolu_2", "get_weather")
    assert json.loads(calls[3][2]) == {"city": "Bergen"}
    assert chunks[-1] == Finish(
        stop_reason="tool_use", usage=Usage(input_tokens=10, output_tokens=40)
    )


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ("end_turn", "end_turn"),
        ("max_tokens", "max_tokens"),
        ("stop_sequence", "stop_sequence"),
        ("refusal", "content_filter"),
    ],
)
async def test_stop_reasons(fake: FakeAnthropic, reason: str, expected: str) -> None:
    fake.enqueue(AnthropicStream().text("x").stop(reason).reply())
    chunks = await collect(make_model(fake))
    assert isinstance(chunks[-1], Finish)
    assert chunks[-1].stop_reason == expected


# --- request mapping --------------------------------------------------------------------

TOOL = ToolSpec(
    name="get_weather",
    description="Current weather for a city.",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
)


@pytest.mark.anyio
async def test_request_maps_history_tools_and_system_prompt(fake: FakeAnthropic) -> None:
    history = (
        Message.user("Weather in Oslo and Bergen?"),
        Message(
            role="assistant",
            parts=(
                ThinkingPart(text="Two calls.", signature="sig-1"),
                TextPart(text=""),
                ToolCallPart(id="toolu_1", name="get_weather", input={"city": "Oslo"}),
            ),
        ),
        Message(
            role="assistant",  # a second assistant message: must merge into the first
            parts=(ToolCallPart(id="toolu_2", name="get_weather", input={"city": "Bergen"}),),
        ),
        Message(
            role="user",
            parts=(
                TextPart(text="Here you go."),
                ToolResultPart(call_id="toolu_1", name="get_weather", content={"temp_c": 4}),
                ToolResultPart(
                    call_id="toolu_2", name="get_weather", content="timeout", status="error"
                ),
            ),
        ),
    )
    fake.enqueue(AnthropicStream().text("Oslo 4 °C.").stop().reply())
    request = ModelRequest(
        messages=history,
        system_prompt="You are concise.",
        tools=(TOOL,),
        settings=ModelSettings(max_tokens=512, temperature=0.3),
    )

    await collect(make_model(fake), request)

    (recorded,) = fake.requests  # the fake accepted it: roles alternate, results first
    assert recorded.path == "/v1/messages"
    assert recorded.headers["x-api-key"] == API_KEY
    assert recorded.headers["anthropic-version"] == "2023-06-01"
    body = recorded.json
    assert body["model"] == "claude-test"
    assert body["stream"] is True
    assert body["max_tokens"] == 512
    assert body["temperature"] == 0.3
    assert body["system"] == "You are concise."
    assert body["tools"] == [
        {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
        }
    ]
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Weather in Oslo and Bergen?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Two calls.", "signature": "sig-1"},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "get_weather",
                    "input": {"city": "Oslo"},
                },
                {
                    "type": "tool_use",
                    "id": "toolu_2",
                    "name": "get_weather",
                    "input": {"city": "Bergen"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": '{"temp_c": 4}'},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": "timeout",
                    "is_error": True,
                },
                {"type": "text", "text": "Here you go."},
            ],
        },
    ]


@pytest.mark.anyio
async def test_unsigned_thinking_is_dropped_and_neighbours_merged(fake: FakeAnthropic) -> None:
    history = (
        Message.user("one"),
        Message(role="assistant", parts=(ThinkingPart(text="no signature"),)),
        Message.user("two"),
    )
    fake.enqueue(AnthropicStream().text("ok").stop().reply())

    await collect(make_model(fake), ModelRequest(messages=history))

    assert fake.requests[0].json["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}],
        }
    ]
    assert "system" not in fake.requests[0].json
    assert fake.requests[0].json["max_tokens"] == 4096


@pytest.mark.anyio
async def test_thinking_budget_enables_thinking_without_temperature(fake: FakeAnthropic) -> None:
    fake.enqueue(AnthropicStream().thinking("hm").text("ok").stop().reply())
    request = ModelRequest(messages=(Message.user("x"),), settings=ModelSettings(temperature=0.5))

    await collect(make_model(fake, thinking_budget=2048, max_tokens=8192), request)

    body = fake.requests[0].json
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert "temperature" not in body


def test_thinking_budget_must_fit_below_max_tokens() -> None:
    with pytest.raises(ConfigurationError, match="thinking_budget"):
        AnthropicModel("claude-test", max_tokens=1024, thinking_budget=1024)
    assert AnthropicModel("claude-test").name == "anthropic:claude-test"


@pytest.mark.anyio
async def test_no_key_header_without_a_key() -> None:
    keyless = FakeAnthropic()
    keyless.enqueue(AnthropicStream().text("proxied").stop().reply())
    with keyless.serve() as base_url:
        chunks = await collect(AnthropicModel("claude-test", base_url=base_url))
    assert text_of(chunks) == "proxied"
    assert "x-api-key" not in keyless.requests[0].headers


# --- errors -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_wrong_key_is_an_auth_error_without_the_key(
    fake: FakeAnthropic, caplog: pytest.LogCaptureFixture
) -> None:
    wrong = "sk-ant-wrong-key-that-must-not-leak"
    model = AnthropicModel("claude-test", base_url=fake.base_url, api_key=wrong)

    with pytest.raises(ModelAuthError) as caught:
        await collect(model)

    assert caught.value.status_code == 401
    assert str(caught.value).startswith("anthropic answered HTTP 401")
    assert "check the API key" in str(caught.value)  # our advice, not the provider's body
    assert "invalid x-api-key" not in str(caught.value)
    assert "invalid x-api-key" in caplog.text  # the body is in the log...
    assert wrong not in str(caught.value) and wrong not in caplog.text  # ...without the key
    assert len(fake.requests) == 1


@pytest.mark.anyio
async def test_prompt_too_long_is_context_overflow(fake: FakeAnthropic) -> None:
    message = "prompt is too long: 215000 tokens > 200000 maximum"
    fake.enqueue(anthropic_error(400, "invalid_request_error", message))
    with pytest.raises(ContextOverflowError, match="context window") as caught:
        await collect(make_model(fake))
    assert "215000" not in str(caught.value)
    assert len(fake.requests) == 1


@pytest.mark.anyio
async def test_other_invalid_request_is_bad_request(
    fake: FakeAnthropic, caplog: pytest.LogCaptureFixture
) -> None:
    fake.enqueue(anthropic_error(400, "invalid_request_error", "tools.0.name: String too long"))
    with pytest.raises(ModelBadRequestError) as caught:
        await collect(make_model(fake))
    assert not isinstance(caught.value, ContextOverflowError)
    assert "String too long" not in str(caught.value) and "String too long" in caplog.text
    assert "will not help" in str(caught.value)


@pytest.mark.anyio
async def test_rate_limit_honours_retry_after_then_succeeds(fake: FakeAnthropic) -> None:
    fake.enqueue(
        anthropic_error(429, "rate_limit_error", "slow down", headers={"retry-after": "1"}),
        AnthropicStream().text("finally").stop().reply(),
    )
    started = time.monotonic()
    chunks = await collect(make_model(fake))
    assert text_of(chunks) == "finally"
    assert len(fake.requests) == 2
    assert time.monotonic() - started >= 0.95


@pytest.mark.anyio
async def test_rate_limit_exhausting_retries(fake: FakeAnthropic) -> None:
    limited = anthropic_error(429, "rate_limit_error", "slow down")
    fake.enqueue(limited, limited)
    with pytest.raises(ModelRateLimitError):
        await collect(make_model(fake, max_retries=1))
    assert len(fake.requests) == 2


@pytest.mark.anyio
async def test_overloaded_exhausts_retries(fake: FakeAnthropic) -> None:
    overloaded = anthropic_error(529, "overloaded_error", "Overloaded")
    fake.enqueue(overloaded, overloaded, overloaded)
    with pytest.raises(ModelUnavailableError) as caught:
        await collect(make_model(fake, max_retries=2))
    assert caught.value.status_code == 529
    assert len(fake.requests) == 3


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("error_type", "expected"),
    [
        ("overloaded_error", ModelUnavailableError),
        ("api_error", ModelUnavailableError),
        ("rate_limit_error", ModelRateLimitError),
        ("invalid_request_error", ModelBadRequestError),
    ],
)
async def test_error_event_mid_stream(
    fake: FakeAnthropic,
    error_type: str,
    expected: type[ModelError],
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake.enqueue(AnthropicStream().text("Hel").error(error_type, "busy at db-7:5432").reply())
    seen: list[ModelChunk] = []
    with pytest.raises(expected, match="anthropic reported an error") as caught:
        async for chunk in make_model(fake).stream(ask()):
            seen.append(chunk)
    assert "db-7" not in str(caught.value) and "busy at db-7:5432" in caplog.text
    assert seen == [TextDelta(text="Hel")]
    assert len(fake.requests) == 1


@pytest.mark.anyio
async def test_stream_cut_midway_is_unavailable(fake: FakeAnthropic) -> None:
    stream = AnthropicStream().text("partial", " answer", " lost").stop()
    fake.enqueue(stream.reply(cut_after=4))  # message_start, block start, two deltas
    seen: list[ModelChunk] = []
    with pytest.raises(ModelUnavailableError, match="while streaming"):
        async for chunk in make_model(fake).stream(ask()):
            seen.append(chunk)
    assert text_of(seen) == "partial answer"
    assert len(fake.requests) == 1


@pytest.mark.anyio
async def test_stream_ending_without_message_stop_is_unavailable(fake: FakeAnthropic) -> None:
    fake.enqueue(AnthropicStream().text("half").reply())  # a clean body, but no stop
    with pytest.raises(ModelUnavailableError, match="message_stop"):
        await collect(make_model(fake))


@pytest.mark.anyio
async def test_malformed_event_is_unavailable(fake: FakeAnthropic) -> None:
    fake.enqueue(AnthropicStream().raw("content_block_delta", "{oops").reply())
    with pytest.raises(ModelUnavailableError, match="malformed"):
        await collect(make_model(fake))
