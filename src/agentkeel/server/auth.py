"""Authentication: API keys and JWT bearer tokens to a principal, as pure ASGI middleware.

A request names its caller with ``Authorization: Bearer <API key or JWT>`` or
``X-API-Key: <API key>``. The middleware turns that into a principal (an API key's
name, or a token's ``sub``) and leaves it in ``scope["state"]["principal"]``, where every
handler of every binding reads it; since every context is keyed by (principal,
definition, contextId), that alone keeps each principal's conversations apart. A request
it cannot authenticate never reaches the app: ``401`` with a JSON error body and a
``WWW-Authenticate: Bearer`` challenge, before its body is read.

JWTs are checked against one issuer and one audience, with an algorithm fixed by the
configuration (HS256 with a shared secret, RS256 with the issuer's JWKS), so a token can
never choose how it is verified. ``exp``, ``iss``, ``aud`` and ``sub`` are required.
Credentials (configured or presented) are never logged or echoed; API keys are compared
by their SHA-256 digest, so a lookup takes the same time whatever the key shares with a
real one. Pure ASGI, not BaseHTTPMiddleware, so streams pass straight through.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio
import httpx
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from agentkeel.auth_settings import PRINCIPAL, AuthSettings, JWTSettings, check_auth
from agentkeel.ids import encode_path_segment
from agentkeel.server.errors import HTTPError, error_response, send_json

if TYPE_CHECKING:
    from jwt import PyJWK

__all__ = [
    "AuthMiddleware",
    "AuthUnavailableError",
    "Authenticator",
    "InvalidTokenError",
    "JWKSCache",
    "TokenExpiredError",
    "UnauthorizedError",
    "is_public",
]

logger = logging.getLogger(__name__)

_CARD = re.compile(r"/agents/[^/]+/a2a/\.well-known/agent-card\.json/?")
_OPEN_PATHS = frozenset({"/healthz", "/readyz", "/"})


# -- errors -------------------------------------------------------------------------------


class UnauthorizedError(HTTPError):
    """No credentials, or credentials that name no principal (``401``)."""

    code = "unauthorized"
    status = 401


class InvalidTokenError(UnauthorizedError):
    """A JWT with a bad signature, issuer, audience or claims, or an unknown signing key."""

    code = "invalid_token"


class TokenExpiredError(UnauthorizedError):
    """A JWT whose ``exp`` has passed (the client should get a new one)."""

    code = "token_expired"


class AuthUnavailableError(HTTPError):
    """The issuer's keys cannot be fetched and none are cached (``503``: not the caller's fault)."""

    code = "auth_unavailable"
    status = 503


# -- verifying ------------------------------------------------------------------------------


class JWKSCache:
    """An issuer's RS256 signing keys, fetched over HTTP and cached.

    Keys are fetched on first use and again once older than `max_age`. A token whose
    ``kid`` is not among them triggers one early refresh (the issuer may have rotated
    its keys), at most once every `refresh_interval` seconds, so made-up key ids cannot
    turn every request into a fetch. When a fetch fails, the keys already cached stay
    in use.

    Args:
        url: The JWKS URL.
        max_age: Seconds a fetched key set is used before it is fetched again.
        refresh_interval: Least seconds between two fetches forced by unknown key ids
            (and between retries while no key set could be fetched at all).
        timeout: Seconds one fetch may take.
        transport: An httpx transport (tests); default a real connection.
    """

    def __init__(
        self,
        url: str,
        *,
        max_age: float = 300.0,
        refresh_interval: float = 10.0,
        timeout: float = 5.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = url
        self.max_age = max_age
        self.refresh_interval = refresh_interval
        self.timeout = timeout
        self.transport = transport
        self.fetches = 0
        """Fetch attempts so far (for tests and debugging)."""
        self._keys: dict[str | None, PyJWK] = {}
        self._fetched_at: float | None = None
        self._tried_at = -float("inf")
        self._forced_at = -float("inf")
        self._lock = anyio.Lock()

    async def key(self, kid: str | None) -> PyJWK:
        """The key a token names by ``kid`` (None: the only key of the set).

        Raises:
            InvalidTokenError: The set has no such key, even after a refresh.
            AuthUnavailableError: No key set could be fetched.
        """
        now = time.monotonic()
        stale = self._fetched_at is None or now - self._fetched_at > self.max_age
        if stale and now - self._tried_at >= self.refresh_interval:
            await self._refresh(self.fetches)
        found = self._find(kid)
        if found is None and self._keys and now - self._forced_at >= self.refresh_interval:
            self._forced_at = now
            await self._refresh(self.fetches)
            found = self._find(kid)
        if found is not None:
            return found
        if not self._keys:
            raise AuthUnavailableError("the token issuer's signing keys cannot be fetched now")
        raise InvalidTokenError("the token's signing key (kid) is not one of the issuer's keys")

    def _find(self, kid: str | None) -> PyJWK | None:
        if kid is None:
            return next(iter(self._keys.values())) if len(self._keys) == 1 else None
        return self._keys.get(kid)

    async def _refresh(self, seen: int) -> None:
        import jwt

        async with self._lock:
            if self.fetches != seen:  # another request fetched while this one waited
                return
            self.fetches += 1
            self._tried_at = time.monotonic()
            try:
                async with httpx.AsyncClient(
                    timeout=self.timeout, transport=self.transport
                ) as client:
                    response = await client.get(self.url, headers={"accept": "application/json"})
                    response.raise_for_status()
                    keyset = jwt.PyJWKSet.from_dict(response.json())
            except (httpx.HTTPError, ValueError, jwt.PyJWTError) as exc:
                logger.warning(
                    "url=<%s>, error=<%s> | cannot fetch the JWKS; keeping %d cached keys",
                    self.url,
                    type(exc).__name__,
                    len(self._keys),
                )
                return
            usable = [
                item
                for item in keyset.keys
                if item.key_type == "RSA"
                and item.public_key_use in (None, "sig")
                and item.algorithm_name == "RS256"
            ]
            self._keys = {item.key_id: item for item in usable}
            self._fetched_at = self._tried_at


class Authenticator:
    """Turns the credentials of a request into its principal.

    Args:
        settings: The API keys and JWT settings.
        source: Where the settings came from, for configuration errors.
        transport: An httpx transport for JWKS fetches (tests).

    Raises:
        ConfigurationError: The settings cannot authenticate safely.
    """

    def __init__(
        self,
        settings: AuthSettings,
        *,
        source: str = "<code>",
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        check_auth(settings, source)
        self._keys = {_digest(value): name for name, value in settings.api_keys.items()}
        self.jwt = settings.jwt
        self.jwks = None
        if self.jwt is not None and self.jwt.jwks_url is not None:
            self.jwks = JWKSCache(self.jwt.jwks_url, transport=transport)

    async def authenticate(self, headers: Headers) -> str:
        """The principal named by `headers` (``Authorization`` first, then ``X-API-Key``).

        Raises:
            UnauthorizedError: No credentials, or invalid ones (subclasses for tokens).
            AuthUnavailableError: The JWKS cannot be fetched.
        """
        authorization = headers.get("authorization")
        if authorization is not None:
            scheme, _, credential = authorization.strip().partition(" ")
            credential = credential.strip()
            if scheme.lower() != "bearer" or not credential:
                raise UnauthorizedError("send 'Authorization: Bearer <API key or token>'")
            principal = self._keys.get(_digest(credential))
            if principal is not None:
                return principal
            if self.jwt is not None and credential.count(".") == 2:
                return await self._verify(self.jwt, credential)
            raise UnauthorizedError("the API key or token is not valid")
        api_key = headers.get("x-api-key")
        if api_key is not None:
            principal = self._keys.get(_digest(api_key.strip()))
            if principal is None:
                raise UnauthorizedError("the API key is not valid")
            return principal
        raise UnauthorizedError("this endpoint needs an API key or a bearer token")

    async def _verify(self, settings: JWTSettings, token: str) -> str:
        """The token's principal, or one refusal whatever the reason.

        Every bad token (malformed, wrong algorithm, unknown ``kid``, bad signature,
        wrong issuer or audience, missing claim, not yet valid) gets the same
        `InvalidTokenError` with the same message: telling them apart would tell a
        forger which check a crafted token got past. The reason goes to the log.
        Only an expired token has a code of its own, and PyJWT checks ``exp`` after
        the signature, so that code reaches only someone who holds a real token.
        """
        try:
            return await self._checked(settings, token)
        except InvalidTokenError as exc:
            logger.info("reason=<%s> | token refused", exc.message)
            raise InvalidTokenError(_REFUSED_TOKEN) from None

    async def _checked(self, settings: JWTSettings, token: str) -> str:
        import jwt

        algorithm = "RS256" if self.jwks is not None else "HS256"
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise InvalidTokenError("the token is not a well-formed JWT") from None
        if header.get("alg") != algorithm:
            raise InvalidTokenError(f"the token is not signed with {algorithm}")
        kid = header.get("kid")
        key: PyJWK | str | None = settings.secret
        if self.jwks is not None:
            key = await self.jwks.key(kid if isinstance(kid, str) else None)
        if key is None:
            raise RuntimeError("internal error: no key to verify a token with")
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=[algorithm],
                audience=settings.audience,
                issuer=settings.issuer,
                leeway=settings.leeway_seconds,
                options={"require": ["exp", "iss", "aud", "sub"]},
            )
        except jwt.ExpiredSignatureError:
            raise TokenExpiredError("the token has expired; get a new one") from None
        except jwt.PyJWTError as exc:
            raise InvalidTokenError(f"{type(exc).__name__}: {exc}") from None
        return _principal(claims.get("sub"))


_REFUSED_TOKEN = "the token is not valid"
"""The one message of every refused token but an expired one (see `Authenticator._verify`)."""


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).digest()


def _principal(sub: object) -> str:
    """A token's ``sub`` as a principal: printable, and short enough to name a folder."""
    if (
        not isinstance(sub, str)
        or not sub
        or not sub.isprintable()
        or len(encode_path_segment(sub)) > 240
    ):
        raise InvalidTokenError("the token's sub claim cannot be used as a principal")
    return sub


# -- the middleware -------------------------------------------------------------------------


def is_public(method: str, path: str) -> bool:
    """Whether a request needs no credentials: health probes, the demo page, agent cards.

    The agent cards are public so that an A2A client can discover how to authenticate;
    everything else (``GET /agents`` and ``/metrics`` included) needs a principal.
    """
    if method not in ("GET", "HEAD"):
        return False
    return path in _OPEN_PATHS or path.startswith("/assets/") or bool(_CARD.fullmatch(path))


class AuthMiddleware:
    """Pure ASGI: authenticate every request that is not public, or answer ``401``.

    Args:
        app: The wrapped ASGI app.
        authenticator: Turns credentials into a principal.
        public: Which (method, path) pairs need no credentials.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        authenticator: Authenticator,
        public: Callable[[str, str], bool] = is_public,
    ) -> None:
        self.app = app
        self.authenticator = authenticator
        self.public = public

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Set ``scope["state"]["principal"]``, then call the app; or refuse the request."""
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        root = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root) :] or "/"
        if scope["type"] == "http" and self.public(scope["method"], path):
            await self.app(scope, receive, send)
            return
        try:
            principal = await self.authenticator.authenticate(Headers(scope=scope))
        except (UnauthorizedError, AuthUnavailableError) as exc:
            client = scope.get("client")
            logger.info(
                "code=<%s>, path=<%s>, client=<%s> | request refused",
                exc.code,
                path,
                client[0] if client else None,
            )
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
                return
            status, body = error_response(exc)
            await send_json(send, status, body, _challenge(exc))
            return
        scope.setdefault("state", {})[PRINCIPAL] = principal
        await self.app(scope, receive, send)


def _challenge(exc: HTTPError) -> list[tuple[bytes, bytes]]:
    """The RFC 6750 ``WWW-Authenticate`` header of a 401 (none for a 503)."""
    if not isinstance(exc, UnauthorizedError):
        return []
    value = 'Bearer realm="agentkeel"'
    if isinstance(exc, InvalidTokenError | TokenExpiredError):
        value += f', error="invalid_token", error_description="{exc.code}"'
    return [(b"www-authenticate", value.encode())]
