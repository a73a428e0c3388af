"""Redis fixtures: a database number of the test's own, claimed, and emptied afterwards.

Redis has a handful of numbered databases, shared with whatever else runs on the
machine. A test claims one that is empty by setting a claim key in it (``SET NX``), uses
only keys under its own prefix, and deletes them and its claim when it ends; nothing
ever runs ``FLUSHALL``, and only a test holding a database flushes it (``FLUSHDB``).
Without Redis the tests skip with a reason, or fail under
``AGENTKEEL_REQUIRE_SERVICES=1`` (the root conftest's ``redis_url``).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis

__all__ = ["redis_db_url", "redis_prefix"]

CLAIM = "agentkeel-tests:claim"
_FIRST_DB = 1


def claim_database(server_url: str, token: str) -> str:
    """The URL of an empty Redis database, claimed for `token` for ten minutes."""
    parts = urlsplit(server_url)
    probe = redis.Redis.from_url(urlunsplit(parts._replace(path="/0")))
    try:
        count = int(probe.config_get("databases").get("databases") or 16)
    finally:
        probe.close()
    for number in range(_FIRST_DB, count):
        url = urlunsplit(parts._replace(path=f"/{number}"))
        client = redis.Redis.from_url(url)
        try:
            if client.dbsize() == 0 and client.set(CLAIM, token, nx=True, ex=600):
                return url
        finally:
            client.close()
    pytest.skip("every Redis database number is in use")


def release_database(url: str, token: str, prefix: str) -> None:
    """Delete the test's keys and its claim (only its own)."""
    client = redis.Redis.from_url(url)
    try:
        for name in client.scan_iter(match=f"{prefix}*", count=500):
            client.delete(name)
        if client.get(CLAIM) == token.encode():
            client.delete(CLAIM)
    finally:
        client.close()


@pytest.fixture
def redis_prefix() -> str:
    """A key prefix no other test uses."""
    return f"t{secrets.token_hex(4)}:"


@pytest.fixture
def redis_db_url(redis_url: str, redis_prefix: str) -> Iterator[str]:
    """A ``redis://`` URL of a database number this test holds alone."""
    token = secrets.token_hex(8)
    url = claim_database(redis_url, token)
    yield url
    release_database(url, token, redis_prefix)
