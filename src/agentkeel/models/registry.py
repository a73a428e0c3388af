"""Build a Model from configuration (framework.json), importing its provider only then.

The core never imports a provider module: `model_from_config` imports the one a
configuration names, when it names it. Options are checked here, by name and type, so a
typo in a configuration file fails at start-up with a message naming the option rather
than as a confusing error on the first request.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from agentkeel.errors import ConfigurationError
from agentkeel.models.base import Model, ModelSettings

__all__ = ["KNOWN_PROVIDERS", "model_from_config"]

KNOWN_PROVIDERS = ("anthropic", "demo", "openai")
"""The provider names a configuration may use."""

_COMMON_OPTIONS = {"timeout": float, "max_retries": int, "backoff_base": float, "max_tokens": int}
_OPTIONS: dict[str, dict[str, type]] = {
    "openai": {**_COMMON_OPTIONS, "temperature": float, "structured_output": str},
    "anthropic": {**_COMMON_OPTIONS, "thinking_budget": int},
    "demo": {"token_delay": float},
}


def _import(provider: str, module: str, attribute: str) -> object:
    try:
        return getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as exc:
        raise ConfigurationError(
            f"model provider {provider!r} could not be loaded ({module}:{attribute}): {exc}"
        ) from exc


_CHOICES = {"structured_output": ("json_schema", "tool")}


def _check_options(provider: str, options: Mapping[str, object]) -> dict[str, float | int | str]:
    allowed = _OPTIONS[provider]
    checked: dict[str, float | int | str] = {}
    for key, value in options.items():
        expected = allowed.get(key)
        if expected is None:
            known = ", ".join(sorted(allowed)) or "none"
            raise ConfigurationError(
                f"unknown option {key!r} for model provider {provider!r} (known: {known})"
            )
        if value is None:
            continue
        if expected is str:
            choices = _CHOICES[key]
            if value not in choices:
                raise ConfigurationError(
                    f"model option {key!r} must be one of {', '.join(choices)}, not {value!r}"
                )
            checked[key] = str(value)
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigurationError(f"model option {key!r} must be a number, not {value!r}")
        if expected is int and not isinstance(value, int):
            raise ConfigurationError(f"model option {key!r} must be an integer, not {value!r}")
        if value < 0:
            raise ConfigurationError(f"model option {key!r} must not be negative")
        checked[key] = value
    return checked


def _require_model(provider: str, model: str | None) -> str:
    if not model:
        raise ConfigurationError(f"model provider {provider!r} needs a model name")
    return model


def _openai(
    model: str | None,
    base_url: str | None,
    api_key: str | None,
    options: dict[str, float | int | str],
) -> object:
    cls = _import("openai", "agentkeel.models.openai", "OpenAIModel")
    max_tokens = options.pop("max_tokens", None)
    temperature = options.pop("temperature", None)
    settings = ModelSettings(
        max_tokens=int(max_tokens) if max_tokens is not None else None,
        temperature=float(temperature) if temperature is not None else None,
    )
    extra: dict[str, object] = {"base_url": base_url} if base_url else {}
    if not callable(cls):
        raise ConfigurationError("agentkeel.models.openai:OpenAIModel is not callable")
    return cls(
        _require_model("openai", model), api_key=api_key, settings=settings, **extra, **options
    )


def _anthropic(
    model: str | None,
    base_url: str | None,
    api_key: str | None,
    options: dict[str, float | int | str],
) -> object:
    cls = _import("anthropic", "agentkeel.models.anthropic", "AnthropicModel")
    extra: dict[str, object] = {"base_url": base_url} if base_url else {}
    if not callable(cls):
        raise ConfigurationError("agentkeel.models.anthropic:AnthropicModel is not callable")
    return cls(_require_model("anthropic", model), api_key=api_key, **extra, **options)


def _demo(options: dict[str, float | int | str]) -> object:
    cls = _import("demo", "agentkeel.models.demo", "DemoModel")
    if not callable(cls):
        raise ConfigurationError("agentkeel.models.demo:DemoModel is not callable")
    return cls(**options)


def model_from_config(
    provider: str,
    *,
    model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    **options: object,
) -> Model:
    """The Model a configuration describes.

    Args:
        provider: ``openai`` (any OpenAI-compatible server), ``anthropic`` or ``demo``
            (offline, needs no key; it ignores `model`, `base_url` and `api_key`).
        model: The model name; required except for ``demo``.
        base_url: The API root; None for the provider's default.
        api_key: The credential itself (a configuration names the environment variable
            and its reader passes the value).
        **options: Provider options in snake_case: ``timeout``, ``max_retries``,
            ``backoff_base``, ``max_tokens``, plus ``temperature`` (openai) or
            ``thinking_budget`` (anthropic) or ``structured_output`` (openai:
            ``json_schema`` or ``tool``); ``demo`` takes only ``token_delay``.

    Returns:
        A ready Model.

    Raises:
        ConfigurationError: For an unknown provider (the message lists the known ones),
            an unknown or mistyped option, or a missing model name.
    """
    if provider == "scripted":
        raise ConfigurationError(
            "model provider 'scripted' is a test double and cannot be configured; "
            "build agentkeel.models.scripted.ScriptedModel in code "
            f"(configurable providers: {', '.join(KNOWN_PROVIDERS)})"
        )
    if provider not in _OPTIONS:
        raise ConfigurationError(
            f"unknown model provider {provider!r}; known providers: {', '.join(KNOWN_PROVIDERS)}"
        )
    checked = _check_options(provider, options)
    if provider == "openai":
        built = _openai(model, base_url, api_key, checked)
    elif provider == "anthropic":
        built = _anthropic(model, base_url, api_key, checked)
    else:
        built = _demo(checked)
    if not isinstance(built, Model):
        raise ConfigurationError(f"model provider {provider!r} did not build a Model")
    return built
