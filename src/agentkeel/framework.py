"""framework.json: the file that declares a server's agents, storage and limits (SPEC 5).

`load_framework` reads and validates the file and turns it into a `Framework`: one
`AgentDefinition` per agent, whose `factory(context_id)` builds a *new* Agent for every
context, plus the storage, the checkpointer and the server settings. Validation is
strict on purpose: a server that starts with a typo in its configuration misbehaves in
production, so every problem (unknown key, wrong type, missing import, unknown model
provider, bad agent name, invalid JSON) raises ConfigurationError naming the file and
the key path, e.g. ``framework.json: agents.assistant.model.provider: ...``.

Relative paths resolve against the file's folder, and that folder is importable while
the file is loaded (so ``"myapp.tools:get_weather"`` finds ``myapp/`` beside the file).
Secrets are never in the file: ``apiKeyEnv`` and ``{"env": "NAME"}`` name environment
variables, read once at load; their values never appear in errors, logs or reprs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from agentkeel.definitions import (
    CATALOG_CONTEXT_ID,
    AgentDefinition,
    AgentFactory,
    Catalog,
    checked_factory,
    describe_factory,
)
from agentkeel.errors import ConfigurationError
from agentkeel.framework_loader import FrameworkLoader, importable
from agentkeel.framework_schema import parse_duration
from agentkeel.framework_types import TASK_INDEX_DEFINITION, Framework
from agentkeel.server_settings import LimitSettings, Retention, ServerSettings

__all__ = [
    "CATALOG_CONTEXT_ID",
    "TASK_INDEX_DEFINITION",
    "AgentDefinition",
    "AgentFactory",
    "Catalog",
    "Framework",
    "LimitSettings",
    "Retention",
    "ServerSettings",
    "checked_factory",
    "describe_factory",
    "load_framework",
    "parse_duration",
]


def load_framework(
    source: str | os.PathLike[str] | Mapping[str, object], *, base_dir: str | None = None
) -> Framework:
    """Read and validate a framework.json (a path) or an already-parsed mapping.

    Args:
        source: The file, or its content as a mapping (then `base_dir` anchors relative
            paths; it defaults to the current folder).
        base_dir: Where relative paths of a mapping resolve.

    Raises:
        ConfigurationError: For anything wrong, naming the key path and the file.
    """
    if isinstance(source, Mapping):
        base = Path(base_dir or os.getcwd()).resolve()
        loader = FrameworkLoader("<framework>", base)
        data: object = dict(source)
    else:
        path = Path(source).expanduser().resolve()
        loader = FrameworkLoader(str(path), path.parent)
        try:
            raw = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigurationError(f"{path}: cannot read the file: {exc}") from None
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ConfigurationError(
                f"{path}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
            ) from None
    if not isinstance(data, dict):
        raise ConfigurationError(f"{loader.source}: (top level): must be a JSON object")
    with importable(loader.base):
        return loader.load(data)
