"""Shared fixtures: the anyio backend, a guard against leaving loopback, service fixtures."""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Iterator

import pytest

REQUIRE_SERVICES = os.environ.get("AGENTKEEL_REQUIRE_SERVICES") == "1"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


_real_connect = socket.socket.connect


def _loopback_only(self: socket.socket, address: object) -> None:
    if isinstance(address, tuple) and address:
        host = str(address[0])
        try:
            allowed = ipaddress.ip_address(host).is_loopback
        except ValueError:
            allowed = host == "localhost"
        if not allowed:
            raise RuntimeError(f"tests may only connect to loopback, not {host}")
    _real_connect(self, address)  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def _network_guard(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No test reaches a real model host: every connection must stay on this machine."""
    monkeypatch.setattr(socket.socket, "connect", _loopback_only)
    yield


def _service_available(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def require_service(name: str, port: int) -> None:
    """Skip with a reason when the service is absent, or fail when CI requires it."""
    if _service_available(port):
        return
    message = f"{name} is not reachable on 127.0.0.1:{port}"
    if REQUIRE_SERVICES:
        pytest.fail(f"{message}, and AGENTKEEL_REQUIRE_SERVICES=1 requires it")
    pytest.skip(message)


@pytest.fixture
def postgres_dsn() -> str:
    require_service("PostgreSQL", 5432)
    return os.environ.get("AGENTKEEL_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


@pytest.fixture
def redis_url() -> str:
    require_service("Redis", 6379)
    return os.environ.get("AGENTKEEL_TEST_REDIS", "redis://127.0.0.1:6379/0")
