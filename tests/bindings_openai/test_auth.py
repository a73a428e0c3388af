"""Both SPEC 10 bindings authenticate as the native wire does, and keep principals apart."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
from openai import OpenAI

from agentkeel.server import create_app
from e2e import TOOL_LOG, serve_in_thread

ALICE_KEY = "alice-SECRET-KEY-0b8f2e"
BOB_KEY = "bob-SECRET-KEY-7d41c9"


@pytest.fixture
def url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv(TOOL_LOG, str(tmp_path / "tools.log"))
    monkeypatch.setenv("ALICE_API_KEY", ALICE_KEY)
    monkeypatch.setenv("BOB_API_KEY", BOB_KEY)
    keys = {"alice": {"env": "ALICE_API_KEY"}, "bob": {"env": "BOB_API_KEY"}}
    document = {
        "agents": {"scripted": {"factory": "e2e:scripted_agent"}},
        "server": {"auth": {"apiKeys": keys}, "heartbeatSeconds": 1},
    }
    with serve_in_thread(create_app(document)) as served:
        yield served


def test_chat_completions_need_the_api_key(url: str) -> None:
    with OpenAI(base_url=f"{url}/v1", api_key="wrong", max_retries=0) as stranger:
        with pytest.raises(openai.AuthenticationError):
            stranger.models.list()
    headers = {"X-Conversation-Id": "shared-name"}
    with (
        OpenAI(base_url=f"{url}/v1", api_key=ALICE_KEY, default_headers=headers) as alice,
        OpenAI(base_url=f"{url}/v1", api_key=BOB_KEY, default_headers=headers) as bob,
    ):
        assert [m.id for m in alice.models.list().data] == ["scripted"]
        for client, said in ((alice, "from alice"), (bob, "from bob")):
            client.chat.completions.create(
                model="scripted", messages=[{"role": "user", "content": said}]
            )
        # the same conversation id under two principals is two conversations
        history = alice.chat.completions.create(
            model="scripted", messages=[{"role": "user", "content": "history"}]
        )
        assert history.choices[0].message.content == "from alice|history"


def test_ag_ui_needs_the_api_key(url: str) -> None:
    body = {"threadId": "t-auth", "runId": "r1", "messages": []}
    refused = httpx.post(f"{url}/agents/scripted/ag-ui", json=body, timeout=10)
    assert refused.status_code == 401
    allowed = httpx.post(
        f"{url}/agents/scripted/ag-ui",
        json=body,
        headers={"Authorization": f"Bearer {ALICE_KEY}"},
        timeout=10,
    )
    assert allowed.status_code == 200 and '"RUN_FINISHED"' in allowed.text
