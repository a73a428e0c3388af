"""Authentication over real HTTP: API keys, HS256 and RS256 JWTs, and per-principal contexts.

Servers are built from framework.json documents (the secrets in the environment), tokens
are signed here with keys generated for the test, and the RS256 keys are served by a
small JWKS server on loopback that counts its fetches.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from agentkeel.errors import ConfigurationError
from agentkeel.framework import load_framework
from agentkeel.server import create_app
from e2e import ServerProcess, reconnect, serve_in_thread, stream_turn, tool_runs, write_framework

pytestmark = pytest.mark.anyio

ALICE_KEY = "alice-SECRET-KEY-5f2c9b7e1d"
BOB_KEY = "bob-SECRET-KEY-81d04a3c6e"
HS_SECRET = "hs256-SECRET-" + "7c1e" * 10
ISSUER = "https://id.example.test/"
AUDIENCE = "agentkeel-tests"
SEND = "/agents/scripted/send"
AGENT = {"scripted": {"factory": "e2e:scripted_agent"}}
API_KEYS = {"alice": {"env": "ALICE_API_KEY"}, "bob": {"env": "BOB_API_KEY"}}
HS256 = {"issuer": ISSUER, "audience": AUDIENCE, "secretEnv": "JWT_SECRET"}

Start = Callable[..., AbstractContextManager[str]]


def alice() -> dict[str, str]:
    return {"Authorization": f"Bearer {ALICE_KEY}"}


def bob() -> dict[str, str]:
    return {"X-API-Key": BOB_KEY}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def document(
    auth: dict[str, object], server: dict[str, object] | None = None, **extra: object
) -> dict[str, object]:
    settings = {"auth": auth, "heartbeatSeconds": 1, "shutdownTimeoutSeconds": 5, **(server or {})}
    return {"agents": AGENT, "server": settings, **extra}


@pytest.fixture
def secrets_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ALICE_API_KEY", ALICE_KEY)
    monkeypatch.setenv("BOB_API_KEY", BOB_KEY)
    monkeypatch.setenv("JWT_SECRET", HS_SECRET)


@pytest.fixture
def start(secrets_env: None, tool_log: Path) -> Start:
    """Serve the scripted agent from a framework.json document with `auth`."""
    del secrets_env, tool_log

    @contextmanager
    def serve(
        auth: dict[str, object], server: dict[str, object] | None = None, **extra: object
    ) -> Iterator[str]:
        with serve_in_thread(create_app(document(auth, server, **extra))) as url:
            yield url

    return serve


def assert_refused(response: httpx.Response, code: str, status: int = 401) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert list(body) == ["error"] and sorted(body["error"]) == ["code", "message"]
    assert body["error"]["code"] == code
    if status == 401:
        assert response.headers["www-authenticate"].startswith('Bearer realm="agentkeel"')


def hs256(**claims: object) -> str:
    now = int(time.time())
    body: dict[str, object] = {"iss": ISSUER, "aud": AUDIENCE, "sub": "carol", "exp": now + 300}
    body.update(claims)
    return jwt.encode({k: v for k, v in body.items() if v is not None}, HS_SECRET, "HS256")


# -- API keys -------------------------------------------------------------------------------


async def test_an_api_key_works_in_either_header_and_names_the_principal(start: Start) -> None:
    with start({"apiKeys": API_KEYS}) as url:
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            body = {"message": "one", "contextId": "ctx-keys"}
            first = await client.post(SEND, json=body, headers=alice())
            same = {"X-API-Key": ALICE_KEY}
            second = await client.post(
                SEND, json={"message": "history", "contextId": "ctx-keys"}, headers=same
            )
            frames = await stream_turn(client, "scripted", {"message": "hi"}, headers=bob())
    assert first.status_code == 200 and first.json()["text"] == "echo: one"
    assert second.json()["text"] == "one|history"  # one principal, whichever header
    assert frames[-1].data["status"] == "completed"


async def test_missing_wrong_or_malformed_credentials_get_401(start: Start) -> None:
    with start({"apiKeys": API_KEYS}) as url:
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            body = {"message": "hi"}
            missing = await client.post(SEND, json=body)
            wrong = await client.post(SEND, json=body, headers=bearer("not-a-key-at-all-xyz"))
            wrong_header = await client.post(SEND, json=body, headers={"X-API-Key": "nope" * 5})
            basic = await client.post(SEND, json=body, headers={"Authorization": "Basic YTpi"})
            empty = await client.post(SEND, json=body, headers={"Authorization": "Bearer"})
            huge = await client.post(SEND, content=b"x" * 2_000_000)  # refused before reading
            endpoints = [
                await client.post("/agents/scripted/stream", json=body),
                await client.get("/agents/scripted/contexts/ctx-a/stream"),
                await client.delete("/agents/scripted/contexts/ctx-a"),
                await client.get("/agents"),
                await client.get("/metrics"),
                await client.get("/agents/nobody/send"),
            ]
            open_ = [await client.get(path) for path in ("/healthz", "/readyz")]
            card = await client.get("/agents/scripted/a2a/.well-known/agent-card.json")
            listed = await client.get("/agents", headers=alice())
            metrics = await client.get("/metrics", headers=bob())
    assert_refused(missing, "unauthorized")
    assert missing.headers["www-authenticate"] == 'Bearer realm="agentkeel"'
    for response in (wrong, wrong_header, basic, empty, huge, *endpoints):
        assert_refused(response, "unauthorized")
    assert [r.status_code for r in open_] == [200, 200]
    assert card.status_code == 200  # agent cards are public (how to authenticate is on them)
    assert listed.status_code == 200 and listed.json()["agents"][0]["name"] == "scripted"
    assert metrics.status_code == 200 and "agentkeel_runs_total" in metrics.text


async def test_a_cors_preflight_needs_no_credentials(start: Start) -> None:
    with start({"apiKeys": API_KEYS}, {"cors": ["http://localhost:5173"]}) as url:
        preflight = httpx.options(
            f"{url}{SEND}",
            headers={
                "Origin": "http://localhost:5173",
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "content-type, x-api-key",
            },
        )
    assert preflight.status_code == 200, preflight.text
    assert "x-api-key" in preflight.headers["access-control-allow-headers"].lower()


# -- one principal's contexts are nobody else's --------------------------------------------------


async def test_another_principals_context_is_not_found_on_every_endpoint(
    start: Start, tool_log: Path
) -> None:
    with start({"apiKeys": API_KEYS}) as url:
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            owned = await stream_turn(
                client,
                "scripted",
                {"message": "delete a.txt", "contextId": "ctx-alice"},
                headers=alice(),
            )
            interrupt = owned[-1].data["interrupt"]
            assert isinstance(interrupt, dict)
            resume = {"interruptId": interrupt["id"], "decision": {"approved": True}}
            taken = {"contextId": "ctx-alice", "resume": resume}
            replay = await client.get("/agents/scripted/contexts/ctx-alice/stream", headers=bob())
            deleted = await client.delete("/agents/scripted/contexts/ctx-alice", headers=bob())
            resumed = await client.post(SEND, json=taken, headers=bob())
            streamed = await client.post("/agents/scripted/stream", json=taken, headers=bob())
            own = await client.post(
                SEND, json={"message": "history", "contextId": "ctx-alice"}, headers=bob()
            )
            resume["interruptId"] = "int-000000000000000000000000"
            nowhere = {"contextId": "ctx-never-existed", "resume": resume}
            unknown = await client.post(SEND, json=nowhere, headers=bob())
            assert tool_runs(tool_log) == []
    assert replay.status_code == 404 and replay.json()["error"]["code"] == "context_not_found"
    assert deleted.status_code == 404 and deleted.json()["error"]["code"] == "context_not_found"
    for response in (resumed, streamed):  # the same answer as for a context never made
        assert response.status_code == 404, response.text
        assert response.json()["error"]["code"] == unknown.json()["error"]["code"]
        assert response.json()["error"]["code"] == "context_not_found"
    assert own.json()["text"] == "history"  # a conversation of bob's own, empty before


async def test_the_owner_still_has_the_context_after_others_tried(
    start: Start, tool_log: Path
) -> None:
    with start({"apiKeys": API_KEYS}) as url:
        async with httpx.AsyncClient(base_url=url, timeout=10, headers=alice()) as client:
            first = await client.post(SEND, json={"message": "delete b.txt", "contextId": "ctx-o"})
            interrupt_id = first.json()["interrupt"]["id"]
            resume = {"interruptId": interrupt_id, "decision": {"approved": True}}
            body = {"contextId": "ctx-o", "resume": resume}
            intruder = await client.post(SEND, json=body, headers=bearer(BOB_KEY))
            replayed = await reconnect(client, "scripted", "ctx-o", None)
            done = await client.post(SEND, json=body)
            history = await client.post(SEND, json={"message": "history", "contextId": "ctx-o"})
            gone = await client.delete("/agents/scripted/contexts/ctx-o")
    assert intruder.status_code == 404
    assert replayed[-1].data["status"] == "suspended"
    assert done.json()["status"] == "completed" and done.json()["toolCalls"] == ["delete_file"]
    assert tool_runs(tool_log) == ["delete_file b.txt"]
    assert history.json()["text"] == "delete b.txt|history"
    assert gone.status_code == 204


async def test_the_same_context_id_under_two_principals_is_two_conversations(
    start: Start, tmp_path: Path
) -> None:
    sessions = tmp_path / "sessions"
    with start({"apiKeys": API_KEYS}, sessionDir=str(sessions)) as url:
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:

            async def say(headers: dict[str, str], message: str) -> str:
                body = {"message": message, "contextId": "ctx-same"}
                response = await client.post(SEND, json=body, headers=headers)
                assert response.status_code == 200, response.text
                return str(response.json()["text"])

            await say(alice(), "from alice")
            await say(bob(), "from bob")
            assert await say(alice(), "history") == "from alice|history"
            assert await say(bob(), "history") == "from bob|history"
            idem = {"Idempotency-Key": "same-key", **alice()}
            body = {"message": "again", "contextId": "ctx-same"}
            by_alice = await client.post(SEND, json=body, headers=idem)
            by_bob = await client.post(
                SEND, json=body, headers={"Idempotency-Key": "same-key", **bob()}
            )
            removed = await client.delete("/agents/scripted/contexts/ctx-same", headers=alice())
            assert await say(bob(), "history") == "from bob|history|again|history"
    assert by_alice.json()["runId"] != by_bob.json()["runId"]  # keys are per principal too
    assert removed.status_code == 204
    assert not (sessions / "alice" / "scripted:ctx-same").exists()
    assert (sessions / "bob" / "scripted:ctx-same" / "messages.jsonl").is_file()
    # .journal is the storage's commit journal (docs/sessions.md), not a principal
    assert sorted(p.name for p in sessions.iterdir() if p.name != ".journal") == ["alice", "bob"]


# -- JWTs -------------------------------------------------------------------------------------


async def test_hs256_tokens_are_checked_for_signature_expiry_issuer_and_audience(
    start: Start,
) -> None:
    now = int(time.time())
    other_secret = "another-secret-of-enough-length-0123456789"
    cases = {
        "expired": (hs256(exp=now - 120), "token_expired"),
        "wrong audience": (hs256(aud="someone-else"), "invalid_token"),
        "wrong issuer": (hs256(iss="https://evil.example.test/"), "invalid_token"),
        "no exp": (hs256(exp=None), "invalid_token"),
        "no sub": (hs256(sub=None), "invalid_token"),
        "not yet valid": (hs256(nbf=now + 3600), "invalid_token"),
        "bad signature": (
            jwt.encode(
                {"iss": ISSUER, "aud": AUDIENCE, "sub": "carol", "exp": now + 60},
                other_secret,
                "HS256",
            ),
            "invalid_token",
        ),
        "alg none": (
            jwt.encode(
                {"iss": ISSUER, "aud": AUDIENCE, "sub": "carol", "exp": now + 60}, "", "none"
            ),
            "invalid_token",
        ),
        "garbage": ("a.b.c", "invalid_token"),
    }
    with start({"apiKeys": API_KEYS, "jwt": HS256}) as url:
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            body = {"message": "one", "contextId": "ctx-jwt"}
            ok = await client.post(SEND, json=body, headers=bearer(hs256()))
            dave = await client.post(
                SEND, json={**body, "message": "history"}, headers=bearer(hs256(sub="dave"))
            )
            carol = await client.post(
                SEND, json={**body, "message": "history"}, headers=bearer(hs256(aud=[AUDIENCE]))
            )
            refused = {
                name: await client.post(SEND, json=body, headers=bearer(token))
                for name, (token, _) in cases.items()
            }
    assert ok.status_code == 200, ok.text
    assert dave.json()["text"] == "history"  # the principal is the token's sub
    assert carol.json()["text"] == "one|history"
    for name, (_, code) in cases.items():
        assert_refused(refused[name], code)
        challenge = refused[name].headers["www-authenticate"]
        assert f'error="invalid_token", error_description="{code}"' in challenge, name


def hmac_token(header: dict[str, object], claims: dict[str, object], key: bytes) -> str:
    """A JWT signed by hand (PyJWT refuses to sign with a public key as an HMAC secret)."""

    def part(value: bytes) -> str:
        return base64.urlsafe_b64encode(value).rstrip(b"=").decode()

    signing_input = ".".join(part(json.dumps(x).encode()) for x in (header, claims))
    signature = hmac.new(key, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{part(signature)}"


@dataclass
class KeyServer:
    """A JWKS endpoint on loopback serving `keys`, counting its fetches."""

    keys: list[dict[str, object]] = field(default_factory=list)
    fetches: int = 0

    def app(self) -> Starlette:
        async def jwks(request: Request) -> JSONResponse:
            del request
            self.fetches += 1
            return JSONResponse({"keys": self.keys})

        return Starlette(routes=[Route("/jwks.json", jwks)])


@dataclass(frozen=True)
class SigningKey:
    kid: str
    private: rsa.RSAPrivateKey = field(
        default_factory=lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048)
    )

    def jwk(self) -> dict[str, object]:
        public = json.loads(RSAAlgorithm.to_jwk(self.private.public_key()))
        return {**public, "kid": self.kid, "use": "sig", "alg": "RS256"}

    def token(self, kid: str | None = "", **claims: object) -> str:
        now = int(time.time())
        body: dict[str, object] = {"iss": ISSUER, "aud": AUDIENCE, "sub": "erin", "exp": now + 300}
        body.update(claims)
        headers = {} if kid is None else {"kid": kid or self.kid}
        return jwt.encode(body, self.private, "RS256", headers=headers)


@pytest.fixture
def jwks() -> Iterator[tuple[KeyServer, str]]:
    server = KeyServer()
    with serve_in_thread(server.app()) as url:
        yield server, f"{url}/jwks.json"


async def test_rs256_tokens_are_verified_with_the_issuers_jwks(
    start: Start, jwks: tuple[KeyServer, str]
) -> None:
    keys, jwks_url = jwks
    first, second, stranger = SigningKey("key-1"), SigningKey("key-2"), SigningKey("key-1")
    keys.keys = [first.jwk()]
    public_pem = first.private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    settings = {"issuer": ISSUER, "audience": AUDIENCE, "jwksUrl": jwks_url}
    with start({"jwt": settings}) as url:
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:

            async def send(token: str, message: str = "hi") -> httpx.Response:
                body = {"message": message, "contextId": "ctx-rs"}
                return await client.post(SEND, json=body, headers=bearer(token))

            assert (await send(first.token(), "one")).status_code == 200
            assert (await send(first.token(kid=None), "two")).status_code == 200
            assert keys.fetches == 1  # cached
            assert_refused(await send(stranger.token()), "invalid_token")  # same kid, other key
            assert_refused(await send(first.token(exp=int(time.time()) - 60)), "token_expired")
            assert_refused(await send(first.token(aud="other")), "invalid_token")
            assert_refused(await send(first.token(iss="https://other/")), "invalid_token")
            claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": "erin", "exp": int(time.time()) + 60}
            confused = hmac_token({"alg": "HS256", "kid": "key-1"}, claims, public_pem)
            assert_refused(await send(confused), "invalid_token")  # alg is fixed by config
            assert keys.fetches == 1
            keys.keys = [first.jwk(), second.jwk()]  # the issuer rotates its keys
            rotated = await send(second.token(), "history")
            assert keys.fetches == 2  # an unknown kid refreshed the set once
            for _ in range(3):
                assert_refused(await send(first.token(kid="made-up")), "invalid_token")
            assert keys.fetches == 2  # no more: forced refreshes are at most one per 10 s
            unclear = await send(first.token(kid=None))  # two keys now: kid is required
    assert rotated.status_code == 200 and rotated.json()["text"] == "one|two|history"
    assert_refused(unclear, "invalid_token")


async def test_an_unreachable_jwks_is_503_until_it_answers(start: Start) -> None:
    settings = {"issuer": ISSUER, "audience": AUDIENCE, "jwksUrl": "http://127.0.0.1:9/jwks"}
    with start({"apiKeys": API_KEYS, "jwt": settings}) as url:
        async with httpx.AsyncClient(base_url=url, timeout=20) as client:
            token = SigningKey("key-1").token()
            response = await client.post(SEND, json={"message": "hi"}, headers=bearer(token))
            by_key = await client.post(SEND, json={"message": "hi"}, headers=alice())
    assert_refused(response, "auth_unavailable", status=503)
    assert "www-authenticate" not in response.headers
    assert by_key.status_code == 200  # API keys do not depend on the issuer


# -- secrets, configuration, binding ------------------------------------------------------


async def test_secrets_never_appear_in_a_response_or_a_log_line(
    start: Start, caplog: pytest.LogCaptureFixture
) -> None:
    token = hs256()
    secrets = [ALICE_KEY, BOB_KEY, HS_SECRET, token, ALICE_KEY[:-1]]
    seen: list[str] = []
    with caplog.at_level(logging.DEBUG):
        with start({"apiKeys": API_KEYS, "jwt": HS256}) as url:
            async with httpx.AsyncClient(base_url=url, timeout=10) as client:
                attempts = [
                    alice(),
                    bob(),
                    bearer(token),
                    bearer(ALICE_KEY[:-1]),
                    {"X-API-Key": ALICE_KEY[:-1]},
                    bearer(hs256(exp=1)),
                    bearer(token[:-2]),
                ]
                for headers in attempts:
                    for path in ("/agents/scripted/send", "/agents/scripted/stream"):
                        body = {"message": "secret", "contextId": "ctx-secrets"}
                        response = await client.post(path, json=body, headers=headers)
                        seen.append(response.text + json.dumps(dict(response.headers)))
                seen.append((await client.get("/agents", headers=alice())).text)
                seen.append((await client.get("/metrics", headers=alice())).text)
    run_lines = [r.getMessage() for r in caplog.records if r.name == "agentkeel.server"]
    assert len(run_lines) == 6 and all("| run ended" in line for line in run_lines)
    assert any("code=<unauthorized>" in r.getMessage() for r in caplog.records)
    everything = caplog.text + "".join(seen)
    for secret in secrets:
        assert secret not in everything


@pytest.mark.parametrize(
    ("auth", "path", "words"),
    [
        ({}, "server.auth", "configure apiKeys, jwt or both"),
        (
            {"apiKeys": {"alice": {"env": "UNSET_KEY_VARIABLE"}}},
            "server.auth.apiKeys.alice.env",
            "UNSET_KEY_VARIABLE is not set",
        ),
        ({"apiKeys": {"alice": {"env": "SHORT_KEY"}}}, "server.auth.apiKeys.alice", "16"),
        (
            {"apiKeys": {"al ice": {"env": "ALICE_API_KEY"}}},
            "server.auth.apiKeys.al ice",
            "must match",
        ),
        (
            {"apiKeys": {"a": {"env": "ALICE_API_KEY"}, "b": {"env": "ALICE_API_KEY"}}},
            "server.auth.apiKeys.b",
            "same key value",
        ),
        (
            {"apiKeys": {"alice": {"variable": "X"}}},
            "server.auth.apiKeys.alice.variable",
            "unknown key",
        ),
        ({"passwords": {}}, "server.auth.passwords", "unknown key"),
        ({"jwt": {"issuer": ISSUER, "audience": AUDIENCE}}, "server.auth.jwt", "either"),
        (
            {"jwt": {**HS256, "jwksUrl": "https://id.example.test/jwks"}},
            "server.auth.jwt",
            "either",
        ),
        ({"jwt": {**HS256, "secretEnv": "SHORT_KEY"}}, "server.auth.jwt.secretEnv", "32 bytes"),
        (
            {"jwt": {"issuer": ISSUER, "audience": AUDIENCE, "jwksUrl": "http://id.example/j"}},
            "server.auth.jwt.jwksUrl",
            "https",
        ),
        (
            {"jwt": {"issuer": ISSUER, "secretEnv": "JWT_SECRET"}},
            "server.auth.jwt.audience",
            "required key is missing",
        ),
    ],
)
def test_configuration_mistakes_stop_the_server_naming_the_key(
    secrets_env: None,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    auth: dict[str, object],
    path: str,
    words: str,
) -> None:
    monkeypatch.setenv("SHORT_KEY", "short-SECRET")
    file = write_framework(tmp_path, document(auth))
    with pytest.raises(ConfigurationError) as caught:
        load_framework(file)
    message = caught.value.message
    assert f"{file}: {path}: " in message, message
    assert words in message
    for secret in (ALICE_KEY, HS_SECRET, "short-SECRET"):
        assert secret not in message


def test_binding_beyond_loopback_warns_only_without_auth(secrets_env: None, tmp_path: Path) -> None:
    del secrets_env
    framework = write_framework(tmp_path, document({"apiKeys": API_KEYS}))
    server = ServerProcess(framework)
    try:
        url = server.start("--host", "0.0.0.0")
        port = url.rsplit(":", 1)[1]
        local = f"http://127.0.0.1:{port}"
        refused = httpx.post(f"{local}{SEND}", json={"message": "hi"})
        accepted = httpx.post(f"{local}{SEND}", json={"message": "hi"}, headers=alice())
    finally:
        server.stop()
    assert "warning" not in server.stderr.read_text()
    assert refused.status_code == 401
    assert accepted.status_code == 200 and accepted.json()["text"] == "echo: hi"


async def test_every_bad_token_gets_the_same_refusal_that_names_no_check(
    start: Start, jwks: tuple[KeyServer, str]
) -> None:
    """A forger learns nothing from a refusal: one status, one body, one challenge.

    Which check a crafted token failed (algorithm, kid, signature, issuer, audience,
    a claim, nbf) would tell the forger what they got past; the reason is logged only.
    """
    keys, jwks_url = jwks
    real = SigningKey("key-1")
    keys.keys = [real.jwk()]
    public_pem = real.private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": "erin", "exp": now + 60}
    tokens = {
        "alg none": jwt.encode(claims, "", "none"),
        "alg none, kid of the issuer": jwt.encode(claims, "", "none", headers={"kid": "key-1"}),
        "hs256 with the rs256 public key": hmac_token(
            {"alg": "HS256", "kid": "key-1", "typ": "JWT"}, claims, public_pem
        ),
        "wrong kid": real.token(kid="made-up"),
        "other key, same kid": SigningKey("key-1").token(),
        "not yet valid": real.token(nbf=now + 3600),
        "wrong issuer": real.token(iss="https://evil.example.test/"),
        "wrong audience": real.token(aud="someone-else"),
        "no sub": real.token(sub=None),
        "garbage": "a.b.c",
    }
    settings = {"issuer": ISSUER, "audience": AUDIENCE, "jwksUrl": jwks_url}
    with start({"jwt": settings}) as url:
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            refused = {
                name: await client.post(SEND, json={"message": "hi"}, headers=bearer(token))
                for name, token in tokens.items()
            }
            expired = await client.post(
                SEND, json={"message": "hi"}, headers=bearer(real.token(exp=now - 120))
            )
    answers = {(r.status_code, r.content, r.headers["www-authenticate"]) for r in refused.values()}
    assert len(answers) == 1, {name: r.text for name, r in refused.items()}
    status, body, _ = answers.pop()
    assert status == 401
    assert json.loads(body) == {
        "error": {"code": "invalid_token", "message": "the token is not valid"}
    }
    # an expired token has its own code, but only a token whose signature checked out
    # gets that far (the signature is verified before exp), so it tells a forger nothing
    assert_refused(expired, "token_expired")
