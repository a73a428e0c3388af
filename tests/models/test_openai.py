"""OpenAIModel against the fake Chat Completions server, over real loopback HTTP."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator, Sequence
from contextlib import aclosing

import anyio
import httpx
import pytest

from agentkeel.errors import (
    ContextOverflowError,
    ModelAuthError,
    ModelBadRequestError,
    ModelError,
    ModelRateLimitError,
    ModelUnavailableError,
)
from agentkeel.messages import (
    JSONObject,
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
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
from agentkeel.models._http import (
    RetryPolicy,
    error_for_kind,
    error_for_status,
    parse_retry_after,
    redact,
)
from agentkeel.models.openai import OpenAIModel
from agentkeel.result import Usage
from fakes import FakeOpenAI, OpenAIStream, openai_error

API_KEY = "sk-test-0123456789-secret"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def running() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI(api_key=API_KEY)
    with fake.serve():
        yield fake


@pytest.fixture
def fake(running: FakeOpenAI) -> Iterator[FakeOpenAI]:
    running.reset()
    yield running
    assert running.script.pending == 0, "a scripted reply was not used"


def make_model(fake: FakeOpenAI, **kwargs: float) -> OpenAIModel:
    options: dict[str, float] = {"max_retries": 2, "backoff_base": 0.001, "timeout": 5.0}
    options.update(kwargs)
    return OpenAIModel(
        "gpt-test",
        base_url=fake.base_url,
        api_key=API_KEY,
        timeout=options["timeout"],
        max_retries=int(options["max_retries"]),
        backoff_base=options["backoff_base"],
    )


def ask(text: str = "Hi") -> ModelRequest:
    return ModelRequest(messages=(Message.user(text),))


async def collect(model: OpenAIModel, request: ModelRequest | None = None) -> list[ModelChunk]:
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


def thinking_of(chunks: Sequence[ModelChunk]) -> str:
    return "".join(chunk.text for chunk in chunks if isinstance(chunk, ThinkingDelta))


# --- streaming ------------------------------------------------------------------------


@pytest.mark.anyio
async def test_streams_text_split_across_network_chunks(fake: FakeOpenAI) -> None:
    stream = OpenAIStream().text("Il fait ", "4 °C ", "à Oslo 🌧").finish("stop").usage(21, 7)
    fake.enqueue(stream.reply(chunk_size=3))  # cuts lines, frames and UTF-8 characters

    chunks = await collect(make_model(fake))

    assert text_of(chunks) == "Il fait 4 °C à Oslo 🌧"
    assert [c for c in chunks if isinstance(c, TextDelta)] == [
        TextDelta(text="Il fait "),
        TextDelta(text="4 °C "),
        TextDelta(text="à Oslo 🌧"),
    ]
    assert chunks[-1] == Finish(
        stop_reason="end_turn", usage=Usage(input_tokens=21, output_tokens=7)
    )
    assert sum(isinstance(c, Finish) for c in chunks) == 1


@pytest.mark.anyio
async def test_tool_call_fragments_assemble_into_valid_json(fake: FakeOpenAI) -> None:
    stream = (
        OpenAIStream()
        .tool_call(0, id="call_a", name="get_weather", arguments=['{"ci', 'ty": "Os', 'lo"}'])
        .tool_call(
            1, id="call_b", name="get_time", arguments=['{"tz":', ' "Europe/Oslo", ', '"h": 2}']
        )
        .finish("tool_calls")
        .usage(30, 12)
    )
    fake.enqueue(stream.reply(chunk_size=11))

    chunks = await collect(make_model(fake))

    calls = assemble(chunks)
    assert calls.keys() == {0, 1}
    assert calls[0][:2] == ("call_a", "get_weather")
    assert json.loads(calls[0][2]) == {"city": "Oslo"}
    assert calls[1][:2] == ("call_b", "get_time")
    assert json.loads(calls[1][2]) == {"tz": "Europe/Oslo", "h": 2}
    assert chunks[-1] == Finish(
        stop_reason="tool_use", usage=Usage(input_tokens=30, output_tokens=12)
    )


@pytest.mark.anyio
@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_reasoning_deltas_become_thinking(fake: FakeOpenAI, field: str) -> None:
    stream = OpenAIStream().reasoning("The user ", "greets.", field=field).text("Hello!")
    fake.enqueue(stream.finish("stop").usage(5, 9).reply())

    chunks = await collect(make_model(fake))

    assert thinking_of(chunks) == "The user greets."
    assert text_of(chunks) == "Hello!"
    first_text = next(i for i, c in enumerate(chunks) if isinstance(c, TextDelta))
    assert all(isinstance(c, ThinkingDelta) for c in chunks[:first_text])


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("reason", "expected"),
    [("stop", "end_turn"), ("length", "max_tokens"), ("content_filter", "content_filter")],
)
async def test_finish_reasons_are_normalized(fake: FakeOpenAI, reason: str, expected: str) -> None:
    fake.enqueue(OpenAIStream().text("x").finish(reason).usage(1, 1).reply())
    chunks = await collect(make_model(fake))
    assert chunks[-1] == Finish(stop_reason=expected, usage=Usage(input_tokens=1, output_tokens=1))


@pytest.mark.anyio
async def test_local_server_quirks(fake: FakeOpenAI) -> None:
    # No `index`, id and name repeated on every fragment, and "stop" after a tool call.
    stream = OpenAIStream()
    for fragment in ['{"q": ', '"x"}']:
        call: JSONObject = {
            "id": "c1",
            "type": "function",
            "function": {"name": "search", "arguments": fragment},
        }
        stream.delta({"tool_calls": [call]})
    stream.delta(
        {"tool_calls": [{"id": "c2", "function": {"name": "search", "arguments": '{"q": "y"}'}}]}
    )
    fake.enqueue(stream.finish("stop").reply())  # and no usage chunk

    chunks = await collect(make_model(fake))

    assert assemble(chunks) == {
        0: ("c1", "search", '{"q": "x"}'),
        1: ("c2", "search", '{"q": "y"}'),
    }
    assert chunks[-1] == Finish(stop_reason="tool_use", usage=Usage())


# --- request mapping --------------------------------------------------------------------

HISTORY = (
    Message.user("Weather in Oslo and Bergen?"),
    Message(
        role="assistant",
        parts=(
            ThinkingPart(text="I should call the tool twice.", signature="sig"),
            TextPart(text="Checking."),
            ToolCallPart(id="call_1", name="get_weather", input={"city": "Oslo"}),
            ToolCallPart(id="call_2", name="get_weather", input={"city": "Bergen"}),
        ),
    ),
    Message(
        role="user",
        parts=(
            ToolResultPart(call_id="call_1", name="get_weather", content={"temp_c": 4}),
            ToolResultPart(
                call_id="call_2", name="get_weather", content="service down", status="error"
            ),
        ),
    ),
    Message(role="assistant", parts=(ToolCallPart(id="call_3", name="noop"),)),
    Message(
        role="user",
        parts=(
            TextPart(text="Also, thanks!"),
            ToolResultPart(call_id="call_3", name="noop", content="ok"),
        ),
    ),
)
TOOL = ToolSpec(
    name="get_weather",
    description="Current weather for a city.",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
)


@pytest.mark.anyio
async def test_request_maps_history_tools_and_settings(fake: FakeOpenAI) -> None:
    fake.enqueue(OpenAIStream().text("Done.").finish("stop").usage(1, 1).reply())
    request = ModelRequest(
        messages=HISTORY,
        system_prompt="You are concise.",
        tools=(TOOL,),
        settings=ModelSettings(max_tokens=256, temperature=0.2),
    )

    await collect(make_model(fake), request)

    (recorded,) = fake.requests
    assert recorded.path == "/v1/chat/completions"
    assert recorded.headers["authorization"] == f"Bearer {API_KEY}"
    body = recorded.json
    assert body["model"] == "gpt-test"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 256  # not the official host: the widely supported name
    assert body["temperature"] == 0.2
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather for a city.",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    ]
    assert body["messages"] == [
        {"role": "system", "content": "You are concise."},
        {"role": "user", "content": "Weather in Oslo and Bergen?"},
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Bergen"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"temp_c": 4}'},
        {"role": "tool", "tool_call_id": "call_2", "content": "Error: service down"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_3",
                    "type": "function",
                    "function": {"name": "noop", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_3", "content": "ok"},
        {"role": "user", "content": "Also, thanks!"},
    ]


@pytest.mark.anyio
async def test_model_settings_are_defaults_a_request_overrides(fake: FakeOpenAI) -> None:
    fake.enqueue(
        OpenAIStream().text("a").finish().reply(), OpenAIStream().text("b").finish().reply()
    )
    model = OpenAIModel(
        "m",
        base_url=fake.base_url,
        api_key=API_KEY,
        settings=ModelSettings(max_tokens=100, temperature=0.7),
    )
    await collect(model, ask())
    await collect(
        model, ModelRequest(messages=(Message.user("x"),), settings=ModelSettings(max_tokens=5))
    )
    first, second = (r.json for r in fake.requests)
    assert (first["max_tokens"], first["temperature"]) == (100, 0.7)
    assert (second["max_tokens"], second["temperature"]) == (5, 0.7)
    assert "tools" not in first


@pytest.mark.anyio
async def test_no_authorization_header_without_a_key() -> None:
    keyless = FakeOpenAI()  # a local server: no key expected
    keyless.enqueue(OpenAIStream().text("local").finish("stop").reply())
    with keyless.serve() as base_url:
        chunks = await collect(OpenAIModel("llama3.2", base_url=base_url))
    assert text_of(chunks) == "local"
    assert "authorization" not in keyless.requests[0].headers
    assert OpenAIModel("llama3.2", base_url=base_url).name == "openai:llama3.2"


@pytest.mark.anyio
async def test_caller_owned_client_is_used_and_left_open(fake: FakeOpenAI) -> None:
    fake.enqueue(OpenAIStream().text("pooled").finish("stop").reply())
    async with httpx.AsyncClient(headers={"x-trace": "t-1"}) as client:
        model = OpenAIModel("m", base_url=fake.base_url, api_key=API_KEY, http_client=client)
        assert text_of(await collect(model)) == "pooled"
        assert not client.is_closed
    assert fake.requests[0].headers["x-trace"] == "t-1"


@pytest.mark.anyio
async def test_a_consumer_may_stop_early_and_close(fake: FakeOpenAI) -> None:
    fake.enqueue(
        OpenAIStream().text("one ", "two ", "three").finish("stop").reply(delay=0.05),
        OpenAIStream().text("next").finish("stop").reply(),
    )
    model = make_model(fake)
    async with aclosing(model.stream(ask())) as chunks:
        async for chunk in chunks:
            assert chunk == TextDelta(text="one ")
            break
    assert text_of(await collect(model)) == "next"  # nothing left half-open in between


# --- errors -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_wrong_key_is_an_auth_error_without_the_key(
    fake: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    wrong = "sk-wrong-key-that-must-not-leak"
    model = OpenAIModel("m", base_url=fake.base_url, api_key=wrong, backoff_base=0.001)

    with pytest.raises(ModelAuthError) as caught:
        await collect(model)

    assert caught.value.status_code == 401
    assert "Incorrect API key" not in str(caught.value)  # the server's reason is logged...
    assert "Incorrect API key" in caplog.text
    assert wrong not in caplog.text  # ...but the key it echoed is not
    assert wrong not in str(caught.value) and wrong not in repr(caught.value)
    assert len(fake.requests) == 1  # auth errors are not retried


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("message", "code"),
    [
        ("This model's maximum context length is 8192 tokens.", "context_length_exceeded"),
        ("This model's maximum context length is 4096 tokens. However, you requested 5000.", None),
        ("the request exceeds the available context size, try increasing it", None),
    ],
)
async def test_context_overflow(fake: FakeOpenAI, message: str, code: str | None) -> None:
    fake.enqueue(openai_error(400, message, code=code))
    with pytest.raises(ContextOverflowError) as caught:
        await collect(make_model(fake))
    assert caught.value.code == "context_overflow"
    assert len(fake.requests) == 1


@pytest.mark.anyio
@pytest.mark.parametrize("status", [400, 404, 422])
async def test_other_client_errors_are_bad_requests(fake: FakeOpenAI, status: int) -> None:
    fake.enqueue(openai_error(status, "Invalid value for 'tools[0].type'."))
    with pytest.raises(ModelBadRequestError) as caught:
        await collect(make_model(fake))
    assert not isinstance(caught.value, ContextOverflowError)
    assert caught.value.status_code == status
    assert str(caught.value) == (
        f"openai answered HTTP {status}: it rejected the request; "
        "retrying it unchanged will not help"
    )
    assert len(fake.requests) == 1


@pytest.mark.anyio
async def test_rate_limit_honours_retry_after_then_succeeds(fake: FakeOpenAI) -> None:
    fake.enqueue(
        openai_error(
            429, "Rate limit reached", code="rate_limit_exceeded", headers={"Retry-After": "1"}
        ),
        OpenAIStream().text("finally").finish("stop").usage(3, 1).reply(),
    )
    started = time.monotonic()
    chunks = await collect(make_model(fake, backoff_base=0.001))
    elapsed = time.monotonic() - started

    assert text_of(chunks) == "finally"
    assert len(fake.requests) == 2
    assert elapsed >= 0.95  # the server's wait, not the 1 ms backoff


@pytest.mark.anyio
async def test_rate_limit_exhausting_retries(fake: FakeOpenAI) -> None:
    limited = openai_error(429, "Rate limit reached", code="rate_limit_exceeded")
    fake.enqueue(limited, limited, limited)
    with pytest.raises(ModelRateLimitError):
        await collect(make_model(fake, max_retries=2))
    assert len(fake.requests) == 3


@pytest.mark.anyio
async def test_insufficient_quota_is_not_retried(fake: FakeOpenAI) -> None:
    fake.enqueue(openai_error(429, "You exceeded your current quota.", code="insufficient_quota"))
    with pytest.raises(ModelRateLimitError):
        await collect(make_model(fake, max_retries=3))
    assert len(fake.requests) == 1


@pytest.mark.anyio
async def test_server_errors_exhaust_retries(fake: FakeOpenAI) -> None:
    failure = openai_error(500, "The server had an error.", type="server_error")
    fake.enqueue(failure, openai_error(503, "Overloaded", type="server_error"), failure, failure)
    with pytest.raises(ModelUnavailableError) as caught:
        await collect(make_model(fake, max_retries=3))
    assert caught.value.status_code == 500
    assert len(fake.requests) == 4


@pytest.mark.anyio
async def test_server_error_then_success(fake: FakeOpenAI) -> None:
    fake.enqueue(
        openai_error(502, "Bad gateway", type="server_error"),
        OpenAIStream().text("recovered").finish("stop").reply(),
    )
    assert text_of(await collect(make_model(fake))) == "recovered"
    assert len(fake.requests) == 2


@pytest.mark.anyio
async def test_stream_cut_midway_is_unavailable_and_not_retried(fake: FakeOpenAI) -> None:
    stream = OpenAIStream().text("partial ", "answer ", "never ", "finished").finish("stop")
    fake.enqueue(stream.reply(cut_after=3))
    seen: list[ModelChunk] = []

    with pytest.raises(ModelUnavailableError, match="while streaming"):
        async for chunk in make_model(fake).stream(ask()):
            seen.append(chunk)

    assert text_of(seen) == "partial answer never "  # the three frames sent
    assert len(fake.requests) == 1  # chunks reached the caller: a retry would repeat them


@pytest.mark.anyio
async def test_stream_cut_before_any_frame_is_retried(fake: FakeOpenAI) -> None:
    fake.enqueue(
        OpenAIStream().text("lost").reply(cut_after=0),
        OpenAIStream().text("second try").finish("stop").reply(),
    )
    assert text_of(await collect(make_model(fake))) == "second try"
    assert len(fake.requests) == 2


@pytest.mark.anyio
async def test_stream_ending_without_done_or_finish_is_unavailable(fake: FakeOpenAI) -> None:
    fake.enqueue(OpenAIStream().text("half").reply(done=False))
    with pytest.raises(ModelUnavailableError, match="before the answer was complete"):
        await collect(make_model(fake))


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("kind", "code", "error_type"),
    [
        ("server_error", None, ModelUnavailableError),
        ("invalid_request_error", "context_length_exceeded", ContextOverflowError),
        ("rate_limit_error", None, ModelRateLimitError),
    ],
)
async def test_error_object_inside_the_stream(
    fake: FakeOpenAI, kind: str, code: str | None, error_type: type[ModelError]
) -> None:
    fake.enqueue(OpenAIStream().text("start").error("it broke", type=kind, code=code).reply())
    with pytest.raises(error_type, match="openai reported an error") as caught:
        await collect(make_model(fake))
    assert "it broke" not in str(caught.value)
    assert len(fake.requests) == 1


@pytest.mark.anyio
async def test_malformed_chunk_is_unavailable(fake: FakeOpenAI) -> None:
    fake.enqueue(OpenAIStream().text("ok").raw("{not json").reply())
    with pytest.raises(ModelUnavailableError, match="malformed"):
        await collect(make_model(fake))


@pytest.mark.anyio
async def test_read_timeout_is_unavailable(fake: FakeOpenAI) -> None:
    fake.enqueue(OpenAIStream().text("slow").finish("stop").reply(delay=2.0))
    with pytest.raises(ModelUnavailableError, match="ReadTimeout"):
        await collect(make_model(fake, timeout=0.2, max_retries=0))


@pytest.mark.anyio
async def test_connection_refused_is_retried_then_unavailable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again at once: nothing listens there
    model = OpenAIModel(
        "m", base_url=f"http://127.0.0.1:{port}/v1", api_key=API_KEY, backoff_base=0.001
    )
    with pytest.raises(ModelUnavailableError, match="before an answer arrived") as caught:
        await collect(model)
    assert API_KEY not in str(caught.value)


@pytest.mark.anyio
async def test_server_echoing_the_key_in_a_5xx_body_does_not_leak_it(
    fake: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    fake.enqueue(openai_error(500, f"upstream rejected key {API_KEY}", type="server_error"))
    with pytest.raises(ModelUnavailableError) as caught:
        await collect(make_model(fake, max_retries=0))
    assert API_KEY not in str(caught.value) and API_KEY not in caplog.text
    assert "upstream rejected key [redacted]" in caplog.text


@pytest.mark.anyio
async def test_a_provider_error_body_stays_in_the_log(
    fake: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    fake.enqueue(
        openai_error(
            500,
            "internal failure at db-7.internal:5432",
            type="server_error",
            headers={"Retry-After": "2"},
        )
    )
    with pytest.raises(ModelUnavailableError) as caught:
        await collect(make_model(fake, max_retries=0))
    assert caught.value.message == (
        "openai answered HTTP 500: it failed on its side; try again in 2 s"
    )
    assert "db-7.internal:5432" in caplog.text  # the operator still sees the cause
    assert all(r.name == "agentkeel.models._http" for r in caplog.records if "db-7" in r.message)


@pytest.mark.anyio
async def test_a_connection_failure_names_no_address(caplog: pytest.LogCaptureFixture) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    model = OpenAIModel("m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=0)
    with pytest.raises(ModelUnavailableError) as caught:
        await collect(model)
    assert caught.value.message == (
        "openai connection failed before an answer arrived (ConnectError); try again later"
    )
    assert "ConnectError" in caught.value.message and "connection failed" in caplog.text


# --- the shared HTTP plumbing (models/_http.py) ----------------------------------------


def test_parse_retry_after_forms() -> None:
    now = 1_700_000_000.0
    date = "Tue, 14 Nov 2023 22:13:30 GMT"  # 10 s after `now`
    assert parse_retry_after(httpx.Headers({"Retry-After": "3"})) == 3.0
    assert parse_retry_after(httpx.Headers({"retry-after": date}), now=now) == 10.0
    assert parse_retry_after(httpx.Headers({"Retry-After": date}), now=now + 60) == 0.0
    assert parse_retry_after(httpx.Headers({"retry-after-ms": "250", "Retry-After": "9"})) == 0.25
    assert parse_retry_after(httpx.Headers({"Retry-After": "soon"})) is None
    assert parse_retry_after(httpx.Headers({})) is None


def test_backoff_grows_with_jitter_and_is_capped() -> None:
    policy = RetryPolicy(backoff_base=1.0, backoff_max=5.0)
    for attempt, (low, high) in enumerate([(0.5, 1.0), (1.0, 2.0), (2.0, 4.0), (2.5, 5.0)]):
        delays = {policy.backoff(attempt) for _ in range(50)}
        assert all(low <= delay <= high for delay in delays)
        assert len(delays) > 1  # jittered


@pytest.mark.anyio
async def test_a_retry_after_beyond_the_cap_is_not_waited_for(fake: FakeOpenAI) -> None:
    fake.enqueue(openai_error(429, "slow down", headers={"Retry-After": "3600"}))
    started = anyio.current_time()
    with pytest.raises(ModelRateLimitError):
        await collect(make_model(fake))
    assert anyio.current_time() - started < 5
    assert len(fake.requests) == 1


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (401, "{}", ModelAuthError),
        (403, "forbidden", ModelAuthError),
        (
            400,
            '{"error": {"message": "bad", "code": "context_length_exceeded"}}',
            ContextOverflowError,
        ),
        (
            413,
            '{"type": "error", "error": {"type": "request_too_large", "message": "big"}}',
            ModelBadRequestError,
        ),
        (422, "not json at all", ModelBadRequestError),
        (408, "", ModelUnavailableError),
        (429, "", ModelRateLimitError),
        (
            529,
            '{"type": "error", "error": {"type": "overloaded_error", "message": "x"}}',
            ModelUnavailableError,
        ),
        (302, "", ModelError),
    ],
)
def test_error_for_status(status: int, body: str, expected: type[ModelError]) -> None:
    error = error_for_status(status, body, provider="p")
    assert type(error) is expected
    assert error.status_code == status
    assert f"HTTP {status}" in error.message


def test_error_for_kind_and_redaction() -> None:
    assert type(error_for_kind("overloaded_error", "busy", provider="p")) is ModelUnavailableError
    assert type(error_for_kind("authentication_error", "no", provider="p")) is ModelAuthError
    assert type(error_for_kind("weird", "prompt is too long", provider="p")) is ContextOverflowError
    assert type(error_for_kind("", "unknown", provider="p")) is ModelError
    assert redact("key sk-1 and sk-1 again", ["sk-1", ""]) == "key [redacted] and [redacted] again"
