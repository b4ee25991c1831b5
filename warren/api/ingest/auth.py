"""Bearer-token authentication of producers, compared in constant time against every configured token."""

from __future__ import annotations

import hmac
from collections.abc import Sequence

from pydantic import SecretStr

from warren.api.ingest.errors import UNAUTHORIZED, ApiError

__all__ = ["bearer_token", "challenge", "check_authorization", "encode_tokens", "token_matches"]

_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="warren"'}


def bearer_token(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, or None when there is no such header."""
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def token_matches(given: str, tokens: Sequence[bytes]) -> bool:
    """True when ``given`` equals one of ``tokens``.

    Every token is compared, with ``hmac.compare_digest``, even after a match: the time taken tells an
    attacker neither how much of a token was right nor which token matched.
    """
    # aiohttp decodes header bytes that are not UTF-8 with surrogateescape: encoding back the same way gives
    # the bytes as sent, which simply match no token (a plain encode() would raise: a 500, not a 401).
    candidate = given.encode("utf-8", "surrogateescape")
    found = False
    for token in tokens:
        found |= hmac.compare_digest(candidate, token)
    return found


def encode_tokens(tokens: Sequence[SecretStr]) -> tuple[bytes, ...]:
    """The configured tokens as bytes, computed once at start-up."""
    return tuple(t.get_secret_value().encode() for t in tokens)


def challenge(given: str | None) -> ApiError:
    """The 401 for a request without a bearer token (``given`` None) or with one that is not accepted."""
    if given is None:
        return ApiError(
            401, UNAUTHORIZED, "missing bearer token: send 'Authorization: Bearer <token>'", headers=dict(_CHALLENGE)
        )
    return ApiError(
        401,
        UNAUTHORIZED,
        "invalid bearer token",
        headers={"WWW-Authenticate": 'Bearer realm="warren", error="invalid_token"'},
    )


def check_authorization(header: str | None, tokens: Sequence[bytes]) -> None:
    """Raise a 401 ApiError unless the header carries one of the tokens."""
    given = bearer_token(header)
    if given is None or not token_matches(given, tokens):
        raise challenge(given)
