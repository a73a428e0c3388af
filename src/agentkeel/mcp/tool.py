"""An MCP server's tool as an agentkeel `Tool`, and a call's result as a tool result.

The model sees the server's own description and JSON schema; the server validates the
arguments. What the model gets back:

- a result of text only is that text (so ``echo`` answers ``"Echo: hi"``);
- otherwise a JSON object: ``structuredContent`` when the server sent it, ``text`` (the
  text parts, joined; left out when it is only the JSON of the structured content), and
  ``parts`` naming each image, audio clip and resource
  (``{"type": "image", "name": "image 1", "mimeType": "image/png", "bytes": 170}``).
  Binary data is not put in the history (the providers' tool results are text, and the
  history is stored); a text resource keeps its text.

A result the server marks ``isError`` is an error result with its text.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import mcp_types as types
import pydantic

from agentkeel.context import RunContext
from agentkeel.messages import JSONObject, JSONValue
from agentkeel.tools.decorator import Tool

if TYPE_CHECKING:
    from agentkeel.mcp.server import MCPServer

__all__ = ["MCPTool", "convert_result", "tool_name"]

_INVALID = re.compile(r"[^A-Za-z0-9_-]")


class _AnyArguments(pydantic.BaseModel):
    """The server validates an MCP tool's arguments, not agentkeel."""

    model_config = pydantic.ConfigDict(extra="allow")


def _not_callable(**kwargs: object) -> object:
    del kwargs
    raise TypeError("an MCP tool runs through its server: use invoke()")


@dataclass(frozen=True, slots=True, kw_only=True)
class MCPTool(Tool):
    """A tool of an MCP server; `invoke` calls the server."""

    server: MCPServer
    remote_name: str
    """The tool's name on the server (the agent's name may carry a prefix)."""

    def validate(self, arguments: JSONObject) -> dict[str, object]:
        """Pass the arguments through; the server checks them against its schema."""
        return dict(arguments)

    async def invoke(self, arguments: JSONObject, context: RunContext) -> JSONValue:
        """Call the tool on the server (see `MCPServer.call`)."""
        return await self.server.call(self.remote_name, arguments, context)


def tool_name(prefix: str, remote: str) -> str:
    """The agent-side name: the prefix, then the MCP name, as a model accepts it.

    Characters models refuse (dots, slashes, spaces) become ``_``; cut to 64 characters.
    """
    name = _INVALID.sub("_", f"{prefix}{remote}")
    if not name or not (name[0].isalpha() or name[0] == "_"):
        name = f"_{name}"
    return name[:64]


def build_tool(server: MCPServer, listed: types.Tool) -> MCPTool:
    """The agent's view of one listed tool."""
    schema = cast(JSONObject, dict(listed.input_schema))
    schema.pop("$schema", None)
    schema.setdefault("type", "object")
    return MCPTool(
        name=tool_name(server.options.prefix, listed.name),
        description=listed.description or listed.title or listed.name,
        input_schema=schema,
        function=_not_callable,
        timeout=server.options.timeout,
        server=server,
        remote_name=listed.name,
        _validator=_AnyArguments,
    )


def convert_result(result: types.CallToolResult) -> tuple[JSONValue, bool]:
    """The tool result the model sees, and whether the server marked it an error."""
    texts: list[str] = []
    parts: list[JSONValue] = []
    counts: dict[str, int] = {}
    for block in result.content:
        if isinstance(block, types.TextContent):
            texts.append(block.text)
            continue
        kind = block.type
        counts[kind] = counts.get(kind, 0) + 1
        parts.append(_describe_block(block, f"{kind} {counts[kind]}"))
    text = "\n".join(texts)
    structured = result.structured_content
    if not parts and structured is None:
        return text, bool(result.is_error)
    content: JSONObject = {}
    if structured is not None:
        content["structuredContent"] = cast(JSONValue, json.loads(json.dumps(structured)))
    if text and not _same_json(text, structured):
        content["text"] = text
    if parts:
        content["parts"] = parts
    return content, bool(result.is_error)


def _same_json(text: str, structured: object) -> bool:
    """Whether `text` is only the JSON of `structured` (servers send both, as MCP asks)."""
    try:
        return bool(json.loads(text) == structured)
    except ValueError:
        return False


def _describe_block(block: object, fallback: str) -> JSONObject:
    if isinstance(block, types.ImageContent | types.AudioContent):
        return {
            "type": block.type,
            "name": fallback,
            "mimeType": block.mime_type,
            "bytes": _size(block.data),
        }
    if isinstance(block, types.ResourceLink):
        return {"type": "resource_link", "name": block.name, "uri": str(block.uri)}
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        described: JSONObject = {"type": "resource", "name": fallback, "uri": str(resource.uri)}
        if resource.mime_type:
            described["mimeType"] = resource.mime_type
        if isinstance(resource, types.TextResourceContents):
            described["text"] = resource.text
        else:
            described["bytes"] = _size(getattr(resource, "blob", ""))
        return described
    return {"type": str(getattr(block, "type", "unknown")), "name": fallback}


def _size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except ValueError:
        return len(data)
