"""Session storages by URL: a registry of backends, imported only when one is asked for.

``memory:`` is `InMemoryStorage`; a folder (``./sessions``, ``/var/lib/agentkeel`` or
``file:./sessions``) is `LocalFileStorage`; ``postgresql://…`` and ``redis://…`` name
backends whose drivers are optional extras. A backend's module is imported on first use,
so the drivers of the others never have to be installed, and a missing driver is a
ConfigurationError that says which extra to install.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentkeel.errors import ConfigurationError
from agentkeel.storage.base import SessionStorage

__all__ = ["Backend", "open_storage", "register_backend"]


@dataclass(frozen=True, slots=True)
class Backend:
    """Where a URL scheme's backend lives and how to get its driver.

    Attributes:
        target: ``"module:factory"``; the factory takes the URL and the folder relative
            paths resolve against, and returns the storage.
        extra: The distribution extra holding the driver (``agentkeel[<extra>]``).
    """

    target: str
    extra: str | None = None

    def load(self, what: str) -> Any:
        """The factory `target` names, imported now.

        Raises:
            ConfigurationError: Its module (or its driver) is not installed; the message
                starts with `what` and ends with the ``pip install`` to run.
        """
        module_name, _, attribute = self.target.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            hint = "" if self.extra is None else f"; pip install 'agentkeel[{self.extra}]'"
            raise ConfigurationError(
                f"{what} is not available: it needs {exc.name!r}{hint}"
            ) from exc
        return getattr(module, attribute)


_BACKENDS: dict[str, Backend] = {
    "memory": Backend("agentkeel.storage.registry:_memory"),
    "file": Backend("agentkeel.storage.registry:_file"),
    "postgresql": Backend("agentkeel.storage.postgres:from_url", "postgres"),
    "postgres": Backend("agentkeel.storage.postgres:from_url", "postgres"),
    "redis": Backend("agentkeel.storage.redis:from_url", "redis"),
}


def register_backend(scheme: str, backend: Backend) -> None:
    """Make `scheme` URLs open `backend` (a third-party backend plugs in here)."""
    _BACKENDS[scheme.lower()] = backend


def open_storage(url: str, *, base: Path | None = None) -> SessionStorage:
    """The storage `url` names; relative folders resolve against `base`.

    Raises:
        ConfigurationError: An unknown scheme, an empty folder, or a backend whose
            driver (or module) is not installed, with the ``pip install`` to run.
    """
    if not isinstance(url, str) or not url.strip():
        raise ConfigurationError(
            "storage must be a URL or a folder, e.g. 'memory:' or './sessions'"
        )
    scheme, sep, rest = url.partition(":")
    if not sep or len(scheme) == 1 or "/" in scheme or "\\" in scheme:
        scheme = "file"  # a plain folder path (a Windows drive letter is not a scheme)
    backend = _BACKENDS.get(scheme.lower())
    if backend is None:
        known = ", ".join(sorted(f"'{name}:'" for name in _BACKENDS))
        raise ConfigurationError(
            f"unknown storage scheme {scheme!r}; use a folder or one of {known}"
        )
    module_name, _, attribute = backend.target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        hint = (
            ""
            if backend.extra is None
            else f"; install it with: pip install 'agentkeel[{backend.extra}]'"
        )
        missing = exc.name == module_name
        why = "it is not built yet in this version" if missing else f"it needs {exc.name!r}"
        raise ConfigurationError(
            f"storage backend {scheme!r} is not available: {why}{hint}"
        ) from exc
    factory: Callable[[str, Path | None], SessionStorage] = getattr(module, attribute)
    return factory(url, base)


def _memory(url: str, base: Path | None) -> SessionStorage:
    from agentkeel.storage.memory import InMemoryStorage

    del url, base
    return InMemoryStorage()


def _file(url: str, base: Path | None) -> SessionStorage:
    from agentkeel.storage.file import LocalFileStorage

    folder = url.removeprefix("file:").removeprefix("//") if url.startswith("file:") else url
    if not folder:
        raise ConfigurationError("a file: URL needs a folder, e.g. 'file:./sessions'")
    path = Path(folder).expanduser()
    if base is not None and not path.is_absolute():
        path = base / path
    return LocalFileStorage(path)
