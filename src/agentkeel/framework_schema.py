"""The schema of framework.json: what the file may hold, validated strictly (SPEC 5).

Pydantic models with camelCase aliases that forbid unknown keys, so that a typo fails
at load instead of misbehaving in production; `agentkeel.framework_loader` turns a
validated file into runtime objects.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
)
from pydantic.alias_generators import to_camel

from agentkeel.memory.config import MemorySection
from agentkeel.usage import BudgetsConfig, PriceConfig

__all__ = [
    "A2AConfig",
    "AgentConfig",
    "CheckpointerConfig",
    "DeclaredAgent",
    "EnvSecret",
    "FactoryAgent",
    "FrameworkFile",
    "InlineMember",
    "ModelConfig",
    "RetentionConfig",
    "ServerConfig",
    "SwarmAgent",
    "SwarmSpec",
    "parse_duration",
]

_DURATION = re.compile(r"^(\d+)(ms|s|m|h|d|w)$")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str | None) -> float | None:
    """Seconds in ``"30d"``, ``"1h"``, ``"15m"``, ``"10s"`` or ``"500ms"``; None stays None.

    Raises:
        ValueError: For any other shape.
    """
    if text is None:
        return None
    match = _DURATION.fullmatch(text)
    if match is None:
        raise ValueError(f"{text!r} is not a duration like '30d', '1h', '15m', '10s' or '500ms'")
    return int(match.group(1)) * _UNITS[match.group(2)]


class StrictConfig(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        alias_generator=to_camel,
        strict=True,
        frozen=True,
        hide_input_in_errors=True,
    )


class EnvSecret(StrictConfig):
    """A secret named by its environment variable, never written in the file."""

    env: str = Field(min_length=1)


class ModelConfig(StrictConfig):
    """An agent's ``model`` object: the provider, its model and its options."""

    provider: str
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = Field(default=None, min_length=1)
    api_key: EnvSecret | None = None
    timeout: float | None = Field(default=None, gt=0)
    max_retries: int | None = Field(default=None, ge=0)
    backoff_base: float | None = Field(default=None, ge=0)
    max_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0)
    thinking_budget: int | None = Field(default=None, ge=0)
    structured_output: Literal["json_schema", "tool"] | None = None


class DeclaredAgent(StrictConfig):
    """An agent declared in the file: model, prompt, tools, limits."""

    description: str = ""
    model: ModelConfig
    system_prompt: str | None = None
    tools: list[str] = []
    approve: list[str] = []
    expose: list[str] = []
    mcp: dict[str, object] = {}
    max_steps: int | None = Field(default=None, ge=1)
    tool_timeout: float | None = Field(default=None, gt=0)
    output: str | None = Field(default=None, min_length=1)
    output_retries: int | None = Field(default=None, ge=0)


class FactoryAgent(StrictConfig):
    """An agent built by a function the file names (``"module:function"``)."""

    factory: str
    description: str = ""


class InlineMember(DeclaredAgent):
    """A swarm member declared inside its swarm."""

    name: str


class SwarmSpec(StrictConfig):
    """A swarm's members, entry and limits."""

    members: list[str | InlineMember] = Field(min_length=1)
    entry: str | None = None
    max_handoffs: int | None = Field(default=None, ge=0)
    max_iterations: int | None = Field(default=None, ge=1)
    timeout: float | None = Field(default=None, gt=0)


class SwarmAgent(StrictConfig):
    """A swarm declared in the file."""

    swarm: SwarmSpec
    description: str = ""


def _agent_kind(value: object) -> str:
    if isinstance(value, dict) and "factory" in value:
        return "factory"
    return "swarm" if isinstance(value, dict) and "swarm" in value else "declared"


AgentConfig = Annotated[
    Annotated[DeclaredAgent, Tag("declared")]
    | Annotated[FactoryAgent, Tag("factory")]
    | Annotated[SwarmAgent, Tag("swarm")],
    Discriminator(_agent_kind),
]


class CheckpointerConfig(StrictConfig):
    """Where suspended runs are checkpointed."""

    dir: str = Field(min_length=1)


class A2AConfig(StrictConfig):
    """The A2A binding's settings."""

    grpc_port: int | None = Field(default=None, ge=0, le=65535)
    allow_private_webhooks: bool = False
    deduplicate_messages: bool = True


class LimitsConfig(StrictConfig):
    """Per-principal limits and slow-client timeouts (null: no limit)."""

    streams_per_principal: int | None = Field(default=None, ge=1)
    turns_per_minute_per_principal: int | None = Field(default=None, ge=1)
    turns_per_minute_per_context: int | None = Field(default=None, ge=1)
    max_message_bytes: int | None = Field(default=None, ge=1)
    stream_stall_seconds: float = Field(default=30.0, gt=0)
    body_timeout_seconds: float = Field(default=30.0, gt=0)
    counters: str | EnvSecret | None = None


class ServerConfig(StrictConfig):
    """The ``server`` object: address, limits, CORS, auth, A2A."""

    host: str = Field(default="127.0.0.1", min_length=1)
    port: int = Field(default=8000, ge=0, le=65535)
    ui: bool = True
    transcript: bool = True
    max_body_bytes: int = Field(default=1_048_576, ge=1)
    concurrency: Literal["queue", "reject", "interrupt", "rollback"] = "queue"
    cors: list[str] = []
    heartbeat_seconds: float = Field(default=15.0, gt=0)
    shutdown_timeout_seconds: float = Field(default=30.0, ge=0)
    auth: dict[str, object] | None = None
    a2a: A2AConfig = Field(default=A2AConfig(), alias="a2a")
    limits: LimitsConfig = LimitsConfig()


def _duration(value: object) -> object:
    if value is None or isinstance(value, str):
        return parse_duration(value)
    raise ValueError("must be a duration such as '30d' or '1h', or null")


Duration = Annotated[float | None, BeforeValidator(_duration)]


class RetentionConfig(StrictConfig):
    """How long runs, events and idle sessions are kept."""

    runs: Duration = None
    events: Duration = 3600.0
    idle_sessions: Duration = None


class FrameworkFile(StrictConfig):
    """The whole framework.json."""

    schema_url: str | None = Field(default=None, alias="$schema")
    agents: dict[str, AgentConfig] = Field(min_length=1)
    session_dir: str | None = Field(default=None, min_length=1)
    checkpointer: CheckpointerConfig | None = None
    storage: str | EnvSecret | None = None
    coordination: str | EnvSecret | None = None
    max_contexts: int = Field(default=1000, ge=1)
    server: ServerConfig = ServerConfig()
    retention: RetentionConfig = RetentionConfig()
    budgets: BudgetsConfig = BudgetsConfig()
    prices: dict[str, PriceConfig] = {}
    memory: MemorySection | None = None
