"""`@tool`: a typed Python function becomes a tool the model can call.

The name comes from the function, the description from its docstring (the ``Args:``
section of a Google docstring describes each parameter), and the JSON schema from its
signature through pydantic. Parameters annotated `RunContext`, `AgentState` or
`InvocationState` are injected by the run loop and hidden from the model.
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal, TypeAlias, cast, overload

import anyio.to_thread
import pydantic
from pydantic_core import to_jsonable_python

from agentkeel.context import RunContext
from agentkeel.errors import ConfigurationError
from agentkeel.messages import JSONObject, JSONValue
from agentkeel.models.base import ToolSpec
from agentkeel.state import AgentState, InvocationState, SharedState

__all__ = ["Describe", "Tool", "ToolInputError", "tool"]

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
_Injected = Literal["context", "state", "invocation_state", "shared_state"]
_INJECTED_TYPES: dict[object, _Injected] = {
    RunContext: "context",
    AgentState: "state",
    InvocationState: "invocation_state",
    SharedState: "shared_state",
}
ToolFunction: TypeAlias = Callable[..., object]
Describe: TypeAlias = Callable[[JSONObject], str]
"""Says in words what one call will do, from its input (secret inputs already hidden)."""


class ToolInputError(ValueError):
    """The model's arguments do not fit the tool's schema; the message is shown to the model."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Tool:
    """A callable the model may request, with its schema and execution policy."""

    name: str
    description: str
    input_schema: JSONObject
    function: ToolFunction
    requires_approval: bool = False
    """Suspend the run for a human decision before every call of this tool."""
    timeout: float | None = None
    """Seconds one call may take; None means the agent's default."""
    describe: Describe | None = None
    """What an approval prompt says the call will do; None shows the input as JSON."""
    secret: frozenset[str] = frozenset()
    """Inputs never shown to a person: hidden in approval prompts and their frames."""
    expose: bool = False
    """Let the call's input and output cross the wire (tool frames, every binding)."""
    _validator: type[pydantic.BaseModel] = field(repr=False)
    _injected: dict[str, _Injected] = field(repr=False, default_factory=dict)

    @property
    def spec(self) -> ToolSpec:
        """What the model is told about this tool."""
        return ToolSpec(
            name=self.name, description=self.description, input_schema=self.input_schema
        )

    def validate(self, arguments: JSONObject) -> dict[str, object]:
        """Check the model's arguments; raises ToolInputError saying what is wrong."""
        try:
            parsed = self._validator.model_validate(arguments)
        except pydantic.ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in error['loc']) or 'input'}: {error['msg']}"
                for error in exc.errors()
            )
            raise ToolInputError(f"invalid input for tool {self.name!r}: {problems}") from None
        return {name: getattr(parsed, name) for name in type(parsed).model_fields}

    async def invoke(self, arguments: JSONObject, context: RunContext) -> JSONValue:
        """Validate `arguments`, call the function (sync ones in a worker thread), return JSON."""
        kwargs = self.validate(arguments)
        for parameter, kind in self._injected.items():
            if kind == "context":
                kwargs[parameter] = context
            elif kind == "state":
                kwargs[parameter] = context.state
            elif kind == "invocation_state":
                kwargs[parameter] = context.invocation_state
            elif context.shared_state is None:
                raise ToolInputError(f"tool {self.name!r} only works inside a swarm")
            else:
                kwargs[parameter] = context.shared_state
        if inspect.iscoroutinefunction(self.function):
            output = await cast(Callable[..., Awaitable[object]], self.function)(**kwargs)
        else:
            output = await anyio.to_thread.run_sync(lambda: self.function(**kwargs))
        return cast(JSONValue, to_jsonable_python(output, fallback=str))

    async def __call__(self, **kwargs: object) -> object:
        """Call the underlying function directly (for tests and composition)."""
        result = self.function(**kwargs)
        if inspect.isawaitable(result):
            return await result
        return result


def _describe(function: ToolFunction) -> tuple[str, dict[str, str]]:
    """Split a Google docstring into the summary and the per-argument descriptions."""
    doc = inspect.getdoc(function) or ""
    summary_lines: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    for line in doc.splitlines():
        stripped = line.strip()
        if re.fullmatch(r"[A-Z][A-Za-z ]*:", stripped):
            section = stripped[:-1].lower()
            current = None
            continue
        if section is None:
            summary_lines.append(line)
        elif section in ("args", "arguments", "parameters"):
            match = re.match(r"^(\w+)(?:\s*\([^)]*\))?:\s*(.*)$", stripped)
            if match and line.startswith(" " * 4) and not line.startswith(" " * 8):
                current = match.group(1)
                args[current] = match.group(2)
            elif current and stripped:
                args[current] = f"{args[current]} {stripped}".strip()
    return "\n".join(summary_lines).strip(), args


def _build(
    function: ToolFunction,
    *,
    name: str | None,
    description: str | None,
    requires_approval: bool,
    timeout: float | None,
    describe: Describe | None,
    secret: frozenset[str],
    expose: bool,
) -> Tool:
    tool_name = name or function.__name__
    if not _NAME.fullmatch(tool_name):
        raise ConfigurationError(f"tool name {tool_name!r} must match {_NAME.pattern}")
    if describe is not None and not callable(describe):
        raise ConfigurationError(f"tool {tool_name!r}: describe must be a function of the input")
    summary, arg_docs = _describe(function)
    hints = typing.get_type_hints(function)
    fields: dict[str, typing.Any] = {}
    injected: dict[str, _Injected] = {}
    for parameter in inspect.signature(function).parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise ConfigurationError(f"tool {tool_name!r}: *args and **kwargs are not supported")
        annotation = hints.get(parameter.name, typing.Any)
        if annotation in _INJECTED_TYPES:
            injected[parameter.name] = _INJECTED_TYPES[annotation]
            continue
        default = ... if parameter.default is parameter.empty else parameter.default
        fields[parameter.name] = (
            annotation,
            pydantic.Field(default, description=arg_docs.get(parameter.name)),
        )
    unknown = sorted(secret - fields.keys())
    if unknown:
        raise ConfigurationError(
            f"tool {tool_name!r}: secret names {', '.join(unknown)}, which are not its inputs"
        )
    validator = pydantic.create_model(
        f"{tool_name}_input",
        __config__=pydantic.ConfigDict(extra="forbid"),
        **fields,
    )
    schema = cast(JSONObject, validator.model_json_schema())
    schema.pop("title", None)
    properties = schema.get("properties")
    if isinstance(properties, dict):
        for prop in properties.values():
            if isinstance(prop, dict):
                prop.pop("title", None)
    return Tool(
        name=tool_name,
        description=description or summary or tool_name,
        input_schema=schema,
        function=function,
        requires_approval=requires_approval,
        timeout=timeout,
        describe=describe,
        secret=secret,
        expose=expose,
        _validator=validator,
        _injected=injected,
    )


@overload
def tool(function: ToolFunction, /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    requires_approval: bool = False,
    timeout: float | None = None,
    describe: Describe | None = None,
    secret: Iterable[str] = (),
    expose: bool = False,
) -> Callable[[ToolFunction], Tool]: ...


def tool(
    function: ToolFunction | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    requires_approval: bool = False,
    timeout: float | None = None,
    describe: Describe | None = None,
    secret: Iterable[str] = (),
    expose: bool = False,
) -> Tool | Callable[[ToolFunction], Tool]:
    """Turn a typed function (sync or async) into a Tool.

    Use bare (``@tool``) or with options (``@tool(requires_approval=True)``).

    Args:
        function: The function, when used bare.
        name: The tool's name; defaults to the function's.
        description: What the model is told; defaults to the docstring's summary.
        requires_approval: Suspend the run for a human decision before every call.
        timeout: Seconds one call may take, overriding the agent's default.
        describe: Says what a call will do, for the person approving it:
            ``describe=lambda args: f"Delete {args['path']}"``. It gets the call's JSON
            input with the secret inputs hidden; without it the prompt shows the input.
            Used whenever the call needs approval, also through ``Agent(approve=...)``.
        secret: Names of inputs never shown to a person (a password, a token): hidden
            in approval prompts, in `describe`'s view of the input and in the frames.
        expose: Put the call's input on its ``tool_call`` frame and its output on its
            ``tool_result`` frame, and in every binding (SPEC 4, 10), for pages that
            render what a tool returned. Off by default: inputs and outputs stay on the
            server. Secret inputs stay hidden either way.
    """
    if isinstance(secret, str):
        raise ConfigurationError("secret takes a list of input names, not one string")
    hidden = frozenset(secret)
    if not isinstance(expose, bool):
        raise ConfigurationError("expose takes True or False")

    def decorate(fn: ToolFunction) -> Tool:
        return _build(
            fn,
            name=name,
            description=description,
            requires_approval=requires_approval,
            timeout=timeout,
            describe=describe,
            secret=hidden,
            expose=expose,
        )

    if function is not None:
        return decorate(function)
    return decorate
