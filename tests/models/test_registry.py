"""model_from_config: lazy provider resolution and option checking."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

import pytest

from agentkeel.errors import ConfigurationError
from agentkeel.messages import Message
from agentkeel.models import Model, ModelRequest, TextDelta
from agentkeel.models.anthropic import AnthropicModel
from agentkeel.models.openai import OpenAIModel
from agentkeel.models.registry import KNOWN_PROVIDERS, model_from_config
from fakes import AnthropicStream, FakeAnthropic, FakeOpenAI, OpenAIStream


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def text_of(model: Model) -> str:
    request = ModelRequest(messages=(Message.user("hi"),))
    return "".join([c.text async for c in model.stream(request) if isinstance(c, TextDelta)])


@pytest.mark.anyio
async def test_openai_from_config_talks_to_the_configured_server() -> None:
    fake = FakeOpenAI(api_key="sk-config")
    fake.enqueue(OpenAIStream().text("configured").finish("stop").reply())
    with fake.serve() as base_url:
        model = model_from_config(
            "openai",
            model="llama3.2",
            base_url=base_url,
            api_key="sk-config",
            timeout=5,
            max_retries=0,
            max_tokens=64,
            temperature=0,
        )
        assert isinstance(model, OpenAIModel)
        assert model.name == "openai:llama3.2"
        assert await text_of(model) == "configured"
    body = fake.requests[0].json
    assert (body["model"], body["max_tokens"], body["temperature"]) == ("llama3.2", 64, 0.0)


@pytest.mark.anyio
async def test_anthropic_from_config_talks_to_the_configured_server() -> None:
    fake = FakeAnthropic(api_key="sk-ant-config")
    fake.enqueue(AnthropicStream().text("configured").stop().reply())
    with fake.serve() as base_url:
        model = model_from_config(
            "anthropic",
            model="claude-test",
            base_url=base_url,
            api_key="sk-ant-config",
            max_tokens=2048,
            thinking_budget=1024,
            backoff_base=0.01,
        )
        assert isinstance(model, AnthropicModel)
        assert await text_of(model) == "configured"
    body = fake.requests[0].json
    assert body["max_tokens"] == 2048
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 1024}


def test_default_base_urls_are_the_vendors() -> None:
    openai = model_from_config("openai", model="gpt-4o-mini")
    anthropic = model_from_config("anthropic", model="claude-test")
    assert isinstance(openai, OpenAIModel)
    assert isinstance(anthropic, AnthropicModel)
    assert openai.base_url == "https://api.openai.com/v1"
    assert anthropic.name == "anthropic:claude-test"


def test_unknown_provider_lists_the_known_ones() -> None:
    with pytest.raises(ConfigurationError) as caught:
        model_from_config("gemini", model="x")
    for name in KNOWN_PROVIDERS:
        assert name in caught.value.message
    assert "'gemini'" in caught.value.message
    assert caught.value.code == "invalid_config"


def test_scripted_is_not_configurable() -> None:
    with pytest.raises(ConfigurationError, match="test double"):
        model_from_config("scripted")


def test_a_model_name_is_required() -> None:
    with pytest.raises(ConfigurationError, match="needs a model name"):
        model_from_config("openai")
    with pytest.raises(ConfigurationError, match="needs a model name"):
        model_from_config("anthropic", model="")


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: model_from_config("openai", model="m", max_retry=3), "option 'max_retry'"),
        (lambda: model_from_config("openai", model="m", thinking_budget=1), "'thinking_budget'"),
        (lambda: model_from_config("anthropic", model="m", temperature=0.5), "'temperature'"),
        (lambda: model_from_config("openai", model="m", timeout="60"), "must be a number"),
        (lambda: model_from_config("openai", model="m", max_retries=True), "must be a number"),
        (lambda: model_from_config("anthropic", model="m", max_tokens=10.5), "an integer"),
        (lambda: model_from_config("openai", model="m", timeout=-1), "must not be negative"),
        (lambda: model_from_config("demo", timeout=1), "'timeout'.*known: token_delay"),
    ],
)
def test_options_are_checked_by_name_and_type(build: Callable[[], Model], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        build()


def test_provider_errors_surface_as_configuration_errors() -> None:
    with pytest.raises(ConfigurationError, match="thinking_budget"):
        model_from_config("anthropic", model="m", max_tokens=1000, thinking_budget=2000)


def test_providers_are_imported_only_when_asked() -> None:
    code = (
        "import sys\n"
        "from agentkeel.models.registry import model_from_config\n"
        "assert 'agentkeel.models.openai' not in sys.modules\n"
        "assert 'agentkeel.models.anthropic' not in sys.modules\n"
        "model_from_config('anthropic', model='m')\n"
        "assert 'agentkeel.models.anthropic' in sys.modules\n"
        "assert 'agentkeel.models.openai' not in sys.modules\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr


def test_a_provider_module_that_cannot_be_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "agentkeel.models.demo", None)  # import now fails
    with pytest.raises(ConfigurationError, match="'demo' could not be loaded"):
        model_from_config("demo")


def test_demo_needs_no_key_and_ignores_model_and_key() -> None:
    model = model_from_config("demo", model="anything", api_key="unused", token_delay=0)
    assert isinstance(model, Model)
    assert model.name == "demo"
