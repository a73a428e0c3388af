"""``server.limits.counters`` over real HTTP: two servers counting in one Redis database
refuse a principal's turns over their shared limit, and the key is validated at load."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from agentkeel.errors import ConfigurationError
from agentkeel.framework import load_framework
from agentkeel.server import create_app
from e2e import TOOL_LOG, serve_in_thread

SEND = "/agents/scripted/send"


def document(counters: object) -> dict[str, object]:
    limits = {"turnsPerMinutePerPrincipal": 3, "counters": counters}
    return {
        "agents": {"scripted": {"factory": "e2e:scripted_agent"}},
        "server": {"shutdownTimeoutSeconds": 5, "limits": limits},
    }


def test_two_servers_share_a_principals_turns_through_redis(
    redis_db_url: str, redis_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOOL_LOG, str(tmp_path / "tools.log"))
    monkeypatch.setenv("LIMITS_REDIS", f"{redis_db_url}?prefix={redis_prefix}")
    config = document({"env": "LIMITS_REDIS"})
    with serve_in_thread(create_app(config)) as one, serve_in_thread(create_app(config)) as two:
        codes = []
        for index in range(4):
            url = (one, two)[index % 2]
            body = {"message": f"m{index}", "contextId": f"c{index}"}
            answered = httpx.post(url + SEND, json=body, timeout=30)
            codes.append(answered.status_code)
        assert codes == [200, 200, 200, 429], "the fourth turn is over the shared limit"
        assert answered.json()["error"]["code"] == "rate_limited"
        assert 1 <= int(answered.headers["retry-after"]) <= 60


def test_the_counters_key_is_checked_at_load(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_SUCH_COUNTERS", raising=False)
    with pytest.raises(ConfigurationError, match=r"server\.limits\.counters\.env"):
        load_framework(document({"env": "NO_SUCH_COUNTERS"}))
    with pytest.raises(ConfigurationError, match="unknown counters scheme 'etcd'"):
        load_framework(document("etcd://somewhere"))
    framework = load_framework(document("memory:"))
    assert framework.server.limits.counters == "memory:"
    assert "memory:" not in repr(framework.server.limits), "a URL may hold a password"
