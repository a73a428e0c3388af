"""Turning a validated framework.json into runtime objects; every error names key and file.

`FrameworkLoader` builds one `AgentDefinition` per agent (declared, factory or swarm),
the storage and checkpointer, the server settings and the memory, checking what the
schema cannot: reserved names, swarm shapes, imports, model providers.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from pydantic import ValidationError

from agentkeel.agent import Agent
from agentkeel.auth_settings import load_auth
from agentkeel.checkpoint.base import Checkpointer
from agentkeel.definitions import (
    CATALOG_CONTEXT_ID,
    AgentDefinition,
    Catalog,
    checked_factory,
    describe_factory,
)
from agentkeel.errors import ConfigurationError
from agentkeel.framework_schema import (
    DeclaredAgent,
    FactoryAgent,
    FrameworkFile,
    InlineMember,
    ModelConfig,
    ServerConfig,
    SwarmAgent,
)
from agentkeel.framework_types import TASK_INDEX_DEFINITION, Framework
from agentkeel.ids import DEFINITION_NAME_PATTERN
from agentkeel.loop import RunLimits
from agentkeel.memory.config import load_memory
from agentkeel.models.base import Model
from agentkeel.models.registry import KNOWN_PROVIDERS, model_from_config
from agentkeel.multiagent import SwarmLimits
from agentkeel.multiagent.definition import swarm_factory
from agentkeel.multiagent.session import MEMBER_SEPARATOR, SwarmSession
from agentkeel.output import OutputType
from agentkeel.runtime.coordination_registry import coordination_url
from agentkeel.runtime.limits_registry import limit_counters_url
from agentkeel.server_settings import A2ASettings, LimitSettings, Retention, ServerSettings
from agentkeel.storage.base import SessionStorage
from agentkeel.storage.configured import configured_stores
from agentkeel.storage.memory import InMemoryStorage
from agentkeel.tools.decorator import Tool
from agentkeel.tools.exposure import declared_tools
from agentkeel.tools.toolset import Toolset
from agentkeel.usage import UsagePolicy

__all__ = ["FrameworkLoader", "importable"]

_MODEL_FIELDS = {"provider", "model", "base_url", "api_key_env", "api_key"}
"""What is not a provider option in a ``model`` object."""


class FrameworkLoader:
    """Turns the validated file into runtime objects; every error names key and file."""

    def __init__(self, source: str, base: Path) -> None:
        self.source = source
        self.base = base

    def error(self, path: str, message: str) -> ConfigurationError:
        """A ConfigurationError naming the file and the key path."""
        return ConfigurationError(f"{self.source}: {path}: {message}")

    def resolve(self, value: str) -> Path:
        """A path of the file, relative to the file's folder."""
        path = Path(value).expanduser()
        return path if path.is_absolute() else self.base / path

    def load(self, data: object) -> Framework:
        """The Framework the validated file declares."""
        try:
            parsed = FrameworkFile.model_validate(data)
        except ValidationError as exc:
            raise ConfigurationError(self._describe(exc)) from None
        definitions: dict[str, AgentDefinition] = {}
        for name, config in parsed.agents.items():  # swarms last: they use the others
            if not isinstance(config, SwarmAgent):
                definitions[name] = self.definition(name, config)
        for name, config in parsed.agents.items():
            if isinstance(config, SwarmAgent):
                definitions[name] = self.swarm_definition(name, config, definitions)
        self.check_names(parsed)
        storage, checkpointer = self.stores(parsed)
        return Framework(
            definitions=definitions,
            storage=storage,
            checkpointer=checkpointer,
            max_contexts=parsed.max_contexts,
            server=self.server(parsed.server),
            retention=Retention(**parsed.retention.model_dump()),
            usage=UsagePolicy.of(parsed.budgets, parsed.prices),
            memory=None
            if parsed.memory is None
            else load_memory(parsed.memory, self.base, storage, self.source),
            source=self.source,
            coordination=coordination_url(parsed.coordination, storage, self.error),
        )

    def check_names(self, parsed: FrameworkFile) -> None:
        """No agent takes a reserved name or the session definition of a swarm member.

        A swarm's member keeps its memory under ``<swarm>--<member>``; an agent named so
        would share that member's sessions. A ``factory`` may return a Swarm, so every
        ``<definition>--…`` name is refused, not only those of declared swarms.
        """
        names = set(parsed.agents)
        if TASK_INDEX_DEFINITION in names:
            raise self.error(
                f"agents.{TASK_INDEX_DEFINITION}",
                "this name is reserved for the A2A task index; choose another",
            )
        for name in parsed.agents:
            owner, sep, member = name.partition(MEMBER_SEPARATOR)
            if sep and member and owner in names:
                raise self.error(
                    f"agents.{name}",
                    f"this name is the session of member {member!r} of {owner!r} (a swarm's "
                    f"members keep their memory under '<swarm>{MEMBER_SEPARATOR}<member>'); "
                    "choose another",
                )

    def _describe(self, exc: ValidationError) -> str:
        lines = []
        for error in exc.errors(include_url=False, include_input=False):
            parts = [p for i, p in enumerate(error["loc"]) if not _is_union_tag(error["loc"], i)]
            path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts).lstrip(".")
            message = error["msg"].removeprefix("Value error, ")
            if error["type"] == "extra_forbidden":
                message = "unknown key"
            if error["type"] == "missing":
                message = "required key is missing"
            lines.append(f"{self.source}: {path or '(top level)'}: {message}")
        return "\n".join(lines)

    def server(self, config: ServerConfig) -> ServerSettings:
        """The server settings, with auth and A2A checked."""
        auth = None if config.auth is None else load_auth(config.auth, self.source)
        fields = config.model_dump(exclude={"auth", "cors", "a2a", "limits"})
        if (grpc_port := config.a2a.grpc_port) and grpc_port == config.port:
            raise self.error("server.a2a.grpcPort", f"{grpc_port} is server.port already")
        a2a = A2ASettings(**config.a2a.model_dump())
        counters = limit_counters_url(config.limits.counters, self.error)
        limits = LimitSettings(**config.limits.model_dump(exclude={"counters"}), counters=counters)
        return ServerSettings(**fields, cors=tuple(config.cors), auth=auth, a2a=a2a, limits=limits)

    def stores(self, parsed: FrameworkFile) -> tuple[SessionStorage, Checkpointer]:
        """The storage and checkpointer the file configures."""
        return configured_stores(
            storage=parsed.storage,
            session_dir=parsed.session_dir,
            checkpoint_dir=None
            if parsed.checkpointer is None
            else self.resolve(parsed.checkpointer.dir),
            base=self.base,
            refuse=self.error,
        )

    def definition(self, name: str, config: DeclaredAgent | FactoryAgent) -> AgentDefinition:
        """The definition of one declared or factory agent."""
        if not DEFINITION_NAME_PATTERN.fullmatch(name):
            raise self.error(
                f"agents.{name}", "an agent name must match ^[a-z0-9][a-z0-9_-]{0,63}$"
            )
        if isinstance(config, FactoryAgent):
            return self.factory_definition(name, config)
        build, tools = self.declared(f"agents.{name}", name, config)
        catalog = Catalog(
            description=config.description,
            tools={item.name: item.description for item in tools},
        )
        return AgentDefinition(name=name, factory=build, catalog=catalog)

    def declared(
        self, prefix: str, name: str, config: DeclaredAgent
    ) -> tuple[Callable[[str], Agent], list[Tool]]:
        """An Agent factory (and its tools) for one declared agent."""
        tools = [self.tool(f"{prefix}.tools[{i}]", ref) for i, ref in enumerate(config.tools)]
        servers = self.mcp_servers(f"{prefix}.mcp", name, config.mcp)
        tools, unknown = declared_tools(tools, config.approve, config.expose, mcp=bool(servers))
        if unknown is not None:
            where, listed = unknown
            raise self.error(f"{prefix}.{where}", f"{listed!r} is not one of the agent's tools")
        model = self.model(f"{prefix}.model", config.model)
        defaults = RunLimits()
        limits = RunLimits(
            max_steps=config.max_steps or defaults.max_steps,
            tool_timeout=config.tool_timeout or defaults.tool_timeout,
        )

        output = self.output_type(f"{prefix}.output", config.output)

        def build(context_id: str) -> Agent:
            del context_id  # every context gets a fresh Agent; the model is shared
            return Agent(
                model,
                tools=[*tools, *servers],
                system_prompt=config.system_prompt,
                name=name,
                description=config.description,
                approve=config.approve,
                limits=limits,
                output_type=output,  # prepared once, shared by every context
                output_retries=config.output_retries,
            )

        return build, tools

    def swarm_definition(
        self, name: str, config: SwarmAgent, others: Mapping[str, AgentDefinition]
    ) -> AgentDefinition:
        """A swarm of other definitions and inline members, built anew per context."""
        prefix, spec = f"agents.{name}.swarm", config.swarm
        members: list[tuple[str, Callable[[str], object]]] = []
        described = True  # every member is declared: building one calls no user code
        for index, member in enumerate(spec.members):
            path = f"{prefix}.members[{index}]"
            if isinstance(member, InlineMember):
                members.append((member.name, self.declared(path, member.name, member)[0]))
            elif (other := others.get(member)) is None or other.kind != "agent":
                raise self.error(path, f"{member!r} is not an agent definition of this file")
            else:
                members.append((member, other.factory))
                described = described and other.catalog.known
        defaults = SwarmLimits()
        try:
            limits = SwarmLimits(
                max_handoffs=defaults.max_handoffs
                if spec.max_handoffs is None
                else spec.max_handoffs,
                max_iterations=spec.max_iterations or defaults.max_iterations,
                timeout=spec.timeout or defaults.timeout,
            )
            build = swarm_factory(
                name, members, description=config.description, entry=spec.entry, limits=limits
            )
            _check_swarm_shape(name, [member for member, _ in members], spec.entry)
            catalog = Catalog(description=config.description, known=False)
            if described:  # fail at start, not on the first request
                catalog.learn(build(CATALOG_CONTEXT_ID))
        except ConfigurationError as exc:
            raise self.error(prefix, exc.message) from None
        return AgentDefinition(name=name, factory=build, catalog=catalog, kind="swarm")

    def factory_definition(self, name: str, config: FactoryAgent) -> AgentDefinition:
        """A definition whose factory the file names."""
        path = f"agents.{name}.factory"
        target = self.import_ref(path, config.factory)
        if not callable(target):
            raise self.error(path, f"{config.factory!r} is not callable")
        factory = checked_factory(target, name)
        try:
            catalog = describe_factory(factory, config.description)
        except ConfigurationError as exc:
            raise self.error(path, exc.message) from None
        return AgentDefinition(name=name, factory=factory, catalog=catalog)

    def mcp_servers(self, path: str, agent: str, entries: dict[str, object]) -> list[Toolset]:
        """The agent's MCP servers (see agentkeel.mcp.framework); each shared by its contexts."""
        if not entries:
            return []
        try:
            from agentkeel.mcp.framework import mcp_servers
        except ImportError as exc:
            raise self.error(path, str(exc)) from None
        return list(mcp_servers(entries, path=path, agent=agent, base=self.base, error=self.error))

    def tool(self, path: str, ref: str) -> Tool:
        """The Tool an import reference names."""
        target = self.import_ref(path, ref)
        if not isinstance(target, Tool):
            raise self.error(path, f"{ref!r} is not a tool; decorate the function with @tool")
        return target

    def output_type(self, path: str, ref: str | None) -> OutputType | None:
        """The output type an import reference names, prepared."""
        target = None if ref is None else self.import_ref(path, ref)
        try:
            return None if target is None else OutputType.of(target)
        except ConfigurationError as exc:
            raise self.error(path, exc.message) from None

    def import_ref(self, path: str, ref: str) -> object:
        """What a ``"module:attribute"`` reference names."""
        module_name, sep, attribute = ref.partition(":")
        if not sep or not module_name or not attribute:
            raise self.error(path, f"{ref!r} must be an import path like 'package.module:name'")
        try:
            target: object = importlib.import_module(module_name)
            for part in attribute.split("."):
                target = getattr(target, part)
        except Exception as exc:
            raise self.error(path, f"cannot import {ref!r}: {exc}") from None
        return target

    def model(self, path: str, config: ModelConfig) -> Model:
        """The model provider one ``model`` object configures."""
        if config.provider not in KNOWN_PROVIDERS:
            known = ", ".join(KNOWN_PROVIDERS)
            raise self.error(
                f"{path}.provider",
                f"unknown model provider {config.provider!r}; known: {known}",
            )
        if config.api_key_env is not None and config.api_key is not None:
            raise self.error(f"{path}.apiKey", "set either apiKeyEnv or apiKey, not both")
        variable, key_path = config.api_key_env, f"{path}.apiKeyEnv"
        if config.api_key is not None:
            variable, key_path = config.api_key.env, f"{path}.apiKey.env"
        api_key = None
        if variable is not None:
            api_key = os.environ.get(variable)
            if not api_key:
                raise self.error(key_path, f"the environment variable {variable} is not set")
        options = config.model_dump(exclude=_MODEL_FIELDS, exclude_none=True)
        try:
            return model_from_config(
                config.provider,
                model=config.model,
                base_url=config.base_url,
                api_key=api_key,
                **options,
            )
        except ConfigurationError as exc:
            raise self.error(path, exc.message) from None


def _is_union_tag(loc: tuple[int | str, ...], index: int) -> bool:
    """Whether `loc[index]` is the tag pydantic inserts for the agent union."""
    return index == 2 and loc[0] == "agents" and loc[index] in ("declared", "factory", "swarm")


def _check_swarm_shape(name: str, members: list[str], entry: str | None) -> None:
    """What a swarm's construction would refuse, checked without building one."""
    session = SwarmSession(name, "shape-check", InMemoryStorage())
    for index, member in enumerate(members):
        if member in members[:index]:
            raise ConfigurationError(f"two swarm members are named {member!r}")
        session.member_definition(member)
    if entry is not None and entry not in members:
        raise ConfigurationError(f"the entry {entry!r} is not a member of the swarm")


@contextmanager
def importable(folder: Path) -> Iterator[None]:
    """Let modules beside the file be imported while it is loaded."""
    entry = str(folder)
    added = entry not in sys.path
    if added:
        sys.path.insert(0, entry)
    try:
        yield
    finally:
        if added and entry in sys.path:
            sys.path.remove(entry)
