"""``server.a2a`` in framework.json: validated, with errors naming the key and the file."""

from __future__ import annotations

import pytest

from agentkeel.errors import ConfigurationError
from agentkeel.framework import load_framework
from agentkeel.server import create_app
from agentkeel.server_settings import A2ASettings

DEMO = {"model": {"provider": "demo"}}


def test_the_a2a_settings_are_read() -> None:
    framework = load_framework(
        {
            "agents": {"demo": DEMO},
            "server": {"a2a": {"grpcPort": 50051, "allowPrivateWebhooks": True}},
        }
    )
    assert framework.server.a2a == A2ASettings(grpc_port=50051, allow_private_webhooks=True)
    assert load_framework({"agents": {"demo": DEMO}}).server.a2a == A2ASettings()


def test_message_deduplication_is_on_unless_turned_off() -> None:
    off = {"agents": {"demo": DEMO}, "server": {"a2a": {"deduplicateMessages": False}}}
    assert load_framework(off).server.a2a == A2ASettings(deduplicate_messages=False)
    assert A2ASettings().deduplicate_messages is True


@pytest.mark.parametrize(
    ("a2a", "message"),
    [
        ({"grpcPort": 8000}, "server.a2a.grpcPort: 8000 is server.port already"),
        ({"grpcPort": 70000}, "server.a2a.grpcPort: Input should be less than or equal to 65535"),
        ({"grpcPort": "50051"}, "server.a2a.grpcPort: Input should be a valid integer"),
        ({"allowPrivateWebhooks": "yes"}, "server.a2a.allowPrivateWebhooks: Input should be"),
        ({"pushRetries": 3}, "server.a2a.pushRetries: unknown key"),
    ],
)
def test_bad_a2a_settings_name_the_key(a2a: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        load_framework({"agents": {"demo": DEMO}, "server": {"port": 8000, "a2a": a2a}})


@pytest.mark.parametrize("name", ["a2a-task-index", "a2a-push-index"])
def test_the_index_names_are_reserved(name: str) -> None:
    with pytest.raises(ConfigurationError, match=f"agents.{name}: this name is reserved"):
        create_app({"agents": {name: DEMO}})
