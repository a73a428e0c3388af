"""The memory endpoints' query strings over real HTTP: every bad parameter is a typed
``400 invalid_memory_key`` naming it, the checks are the OpenAPI document's, and good
ones still page, search and delete."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agentkeel.server import create_app
from e2e import serve_in_thread

TELL = "Remember for next time that my favourite colour is blue"

TOOLS = ["agentkeel.tools:remember", "agentkeel.tools:recall"]
BAD_LISTS = [
    ("limit=0", "limit"),
    ("limit=201", "limit"),
    ("limit=ten", "limit"),
    ("limit=-3", "limit"),
    ("limit=1&limit=2", "given more than once"),
    ("q=", "q"),
    ("q=blue&limit=51", "with q"),
    ("cursor=", "cursor"),
    ("cursor=" + "a" * 2049, "cursor"),
]


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    document = {
        "agents": {"assistant": {"model": {"provider": "demo"}, "tools": TOOLS}},
        "sessionDir": str(tmp_path / "sessions"),
        "memory": {"store": "file", "embeddings": "offline"},
        "server": {"shutdownTimeoutSeconds": 5},
    }
    with serve_in_thread(create_app(document)) as served:
        yield served


def assert_refused(response: httpx.Response, naming: str) -> None:
    assert response.status_code == 400, response.text
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert error["code"] == "invalid_memory_key"
    assert naming in error["message"]
    assert "Traceback" not in response.text and "pydantic" not in response.text


@pytest.mark.parametrize(("query", "naming"), BAD_LISTS)
def test_a_bad_list_parameter_is_refused(url: str, query: str, naming: str) -> None:
    assert_refused(httpx.get(f"{url}/agents/assistant/memory?{query}"), naming)


@pytest.mark.parametrize("namespace", ["", "Upper", "a/b", "-x", "x" * 65])
def test_a_bad_namespace_is_refused(url: str, namespace: str) -> None:
    response = httpx.delete(f"{url}/agents/assistant/memory/k", params={"namespace": namespace})
    assert_refused(response, "namespace")


def test_good_parameters_page_search_and_delete(url: str) -> None:
    told = httpx.post(f"{url}/agents/assistant/send", json={"message": TELL}, timeout=60)
    assert told.status_code == 200 and told.json()["toolCalls"] == ["remember"], told.text
    memory = f"{url}/agents/assistant/memory"
    page = httpx.get(memory, params={"limit": "1", "utm_source": "ignored"})
    assert page.status_code == 200, page.text
    (item,) = page.json()["items"]
    found = httpx.get(memory, params={"q": "favourite colour", "limit": "50"})
    assert found.status_code == 200 and found.json()["items"][0]["key"] == item["key"]
    elsewhere = httpx.delete(f"{memory}/{item['key']}", params={"namespace": "other"})
    assert elsewhere.status_code == 404
    assert elsewhere.json()["error"]["code"] == "memory_not_found"
    gone = httpx.delete(f"{memory}/{item['key']}", params={"namespace": item["namespace"]})
    assert gone.status_code == 204


def test_an_unknown_agent_is_named_before_its_parameters(url: str) -> None:
    response = httpx.get(f"{url}/agents/nobody/memory?limit=0")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "agent_not_found"


def test_the_document_carries_the_models_checks(url: str) -> None:
    paths = httpx.get(f"{url}/openapi.json").json()["paths"]
    listed = {p["name"]: p["schema"] for p in paths["/agents/{name}/memory"]["get"]["parameters"]}
    assert listed["limit"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 200,
        "description": listed["limit"]["description"],
    }
    assert listed["q"]["minLength"] == 1 and listed["cursor"]["maxLength"] == 2048
    one = paths["/agents/{name}/memory/{key}"]["delete"]["parameters"]
    (namespace,) = [p for p in one if p["name"] == "namespace"]
    assert namespace["schema"]["pattern"].startswith("^[a-z0-9]")
