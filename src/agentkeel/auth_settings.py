"""Authentication settings: the ``server.auth`` section of framework.json, validated.

Kept apart from the middleware (`agentkeel.server.auth`) so that loading a framework
needs neither Starlette nor the server package. Every problem is a ConfigurationError
naming the key and the file; secret values are read from the environment and never
appear in a message, a log line or a repr.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib.util import find_spec
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from agentkeel.errors import ConfigurationError
from agentkeel.ids import CONTEXT_ID_PATTERN

__all__ = [
    "PRINCIPAL",
    "MIN_API_KEY_LENGTH",
    "MIN_HS256_SECRET_BYTES",
    "AuthSettings",
    "JWTSettings",
    "check_auth",
    "load_auth",
]

PRINCIPAL = "principal"
"""Key of the authenticated principal in the ASGI ``scope["state"]``: the authentication
middleware sets it, every binding reads it (None or absent while authentication is off)."""

MIN_API_KEY_LENGTH = 16
MIN_HS256_SECRET_BYTES = 32
_SECRET_PATH = "server.auth.jwt.secretEnv"
_PATTERN_TEXT = "^[A-Za-z0-9][A-Za-z0-9._@:-]{0,127}$"


# -- settings -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class JWTSettings:
    """``server.auth.jwt``: bearer tokens of one issuer for one audience.

    Exactly one of `jwks_url` (RS256) and `secret` (HS256) is set; it fixes the
    algorithm, so a token's own ``alg`` header cannot pick a weaker check.
    """

    issuer: str
    """The required ``iss`` claim."""
    audience: str
    """The required ``aud`` claim (or one of its entries)."""
    jwks_url: str | None = None
    """RS256: where the issuer publishes its public keys (https, or http on loopback)."""
    secret: str | None = field(default=None, repr=False)
    """HS256: the shared secret, at least 32 bytes; never logged."""
    leeway_seconds: float = 30.0
    """Clock skew tolerated on ``exp``, ``nbf`` and ``iat``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AuthSettings:
    """``server.auth``: who may call the server; each caller becomes a principal."""

    api_keys: Mapping[str, str] = field(default_factory=dict, repr=False)
    """Principal name to key value (in framework.json, read from the environment)."""
    jwt: JWTSettings | None = None


class _Schema(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        alias_generator=to_camel,
        strict=True,
        frozen=True,
        hide_input_in_errors=True,
    )


class _EnvRef(_Schema):
    env: str = Field(min_length=1)


class _JWTFile(_Schema):
    issuer: str = Field(min_length=1)
    audience: str = Field(min_length=1)
    jwks_url: str | None = Field(default=None, min_length=1)
    secret_env: str | None = Field(default=None, min_length=1)
    leeway_seconds: float = Field(default=30.0, ge=0, le=300)


class _AuthFile(_Schema):
    api_keys: dict[str, _EnvRef] = {}
    jwt: _JWTFile | None = None


def load_auth(raw: Mapping[str, object], source: str) -> AuthSettings:
    """The ``server.auth`` object of a framework.json as AuthSettings, secrets read now.

    Raises:
        ConfigurationError: Naming the file and the key (never a secret's value).
    """
    try:
        parsed = _AuthFile.model_validate(raw)
    except ValidationError as exc:
        lines = []
        for error in exc.errors(include_url=False, include_input=False):
            path = ".".join(str(part) for part in ("server", "auth", *error["loc"]))
            message = error["msg"].removeprefix("Value error, ")
            message = {"extra_forbidden": "unknown key", "missing": "required key is missing"}.get(
                error["type"], message
            )
            lines.append(f"{source}: {path}: {message}")
        raise ConfigurationError("\n".join(lines)) from None

    def secret(path: str, variable: str) -> str:
        value = os.environ.get(variable)
        if not value:
            raise ConfigurationError(
                f"{source}: {path}: the environment variable {variable} is not set"
            )
        return value

    keys = {
        name: secret(f"server.auth.apiKeys.{name}.env", ref.env)
        for name, ref in parsed.api_keys.items()
    }
    jwt = None
    if (spec := parsed.jwt) is not None:
        jwt = JWTSettings(
            issuer=spec.issuer,
            audience=spec.audience,
            jwks_url=spec.jwks_url,
            secret=None if spec.secret_env is None else secret(_SECRET_PATH, spec.secret_env),
            leeway_seconds=spec.leeway_seconds,
        )
    settings = AuthSettings(api_keys=keys, jwt=jwt)
    check_auth(settings, source)
    return settings


def check_auth(settings: AuthSettings, source: str) -> None:
    """Refuse settings that cannot authenticate safely (naming `source` and the key).

    Raises:
        ConfigurationError: What is wrong, and where.
    """

    def fail(path: str, message: str) -> ConfigurationError:
        return ConfigurationError(f"{source}: {path}: {message}")

    if not settings.api_keys and settings.jwt is None:
        raise fail("server.auth", "configure apiKeys, jwt or both")
    owners: dict[str, str] = {}
    for name, value in settings.api_keys.items():
        path = f"server.auth.apiKeys.{name}"
        if not CONTEXT_ID_PATTERN.fullmatch(name):
            raise fail(path, "a key's name is its principal; it must match " + _PATTERN_TEXT)
        if len(value) < MIN_API_KEY_LENGTH:
            raise fail(path, f"the key must be at least {MIN_API_KEY_LENGTH} characters long")
        if value in owners:
            raise fail(path, f"the same key value is configured for {owners[value]!r}")
        owners[value] = name
    if settings.jwt is not None:
        _check_jwt(settings.jwt, fail)


def _check_jwt(jwt: JWTSettings, fail: Callable[[str, str], ConfigurationError]) -> None:
    if (jwt.jwks_url is None) == (jwt.secret is None):
        raise fail("server.auth.jwt", "set either jwksUrl (RS256) or secretEnv (HS256)")
    needed = ["jwt"] + (["cryptography"] if jwt.jwks_url else [])
    if any(find_spec(name) is None for name in needed):
        raise fail("server.auth.jwt", "JWT support needs PyJWT: pip install 'pyjwt[crypto]'")
    if jwt.secret is not None and len(jwt.secret.encode()) < MIN_HS256_SECRET_BYTES:
        raise fail(_SECRET_PATH, f"an HS256 secret needs {MIN_HS256_SECRET_BYTES} bytes or more")
    if jwt.jwks_url is not None:
        url = urlsplit(jwt.jwks_url)
        if url.scheme != "https" and not (url.scheme == "http" and _loopback(url.hostname)):
            raise fail(
                "server.auth.jwt.jwksUrl", "must be an https URL (http only on a loopback address)"
            )


def _loopback(host: str | None) -> bool:
    if host == "localhost":
        return True
    try:
        return host is not None and ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
