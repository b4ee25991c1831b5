"""Pluggable checks of inbound webhooks, one kind per way providers prove a request is theirs.

- ``standard-webhooks``: ``webhook-id``/``-timestamp``/``-signature`` (Warren itself, Svix, and others).
- ``hmac-sha256``: an HMAC-SHA256 of the raw body in one header, hex or base64, with an optional prefix:
  GitHub ``X-Hub-Signature-256: sha256=<hex>``, Shopify ``X-Shopify-Hmac-Sha256: <base64>``, WooCommerce
  ``X-WC-Webhook-Signature: <base64>``. The key is the secret's UTF-8 text, as those providers use it.
- ``token``: a shared secret echoed in a header, e.g. Telegram's ``X-Telegram-Bot-Api-Secret-Token``.
- ``none``: accepts everything; it exists so that an unsigned source is a visible, explicit choice.

Every kind accepts several secrets (rotation) and compares in constant time.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

from warren.receiving.errors import VerificationError
from warren.receiving.headers import header
from warren.receiving.signatures import DEFAULT_TOLERANCE, verify_standard_webhook
from warren.topology.config import InboundSource
from warren.topology.secrets import SigningSecrets

__all__ = [
    "HmacSha256Verifier",
    "NoVerifier",
    "StandardWebhooksVerifier",
    "TokenVerifier",
    "Verifier",
    "verifier_for",
]


class Verifier(Protocol):
    """Checks one request; raises VerificationError when it is not genuine."""

    @property
    def kind(self) -> str: ...

    def verify(self, headers: Mapping[str, str], body: bytes) -> None: ...

    @property
    def secret_headers(self) -> tuple[str, ...]:
        """Headers that carry a secret itself, never to be stored or forwarded."""
        ...


@dataclass(frozen=True)
class StandardWebhooksVerifier:
    secrets: SigningSecrets = field(repr=False)
    tolerance: float = DEFAULT_TOLERANCE
    clock: Callable[[], float] = time.time
    kind: str = "standard-webhooks"

    def verify(self, headers: Mapping[str, str], body: bytes) -> None:
        verify_standard_webhook(self.secrets, headers, body, tolerance=self.tolerance, now=self.clock())

    @property
    def secret_headers(self) -> tuple[str, ...]:
        return ()


def _decode(text: str, encoding: Literal["hex", "base64"]) -> bytes:
    if encoding == "hex":
        return bytes.fromhex(text)
    return base64.b64decode(text, validate=True)


@dataclass(frozen=True)
class HmacSha256Verifier:
    keys: tuple[bytes, ...] = field(repr=False)
    header: str
    encoding: Literal["hex", "base64"] = "hex"
    prefix: str = ""
    kind: str = "hmac-sha256"

    def verify(self, headers: Mapping[str, str], body: bytes) -> None:
        value = header(headers, self.header)
        if not value:
            raise VerificationError("missing_signature", f"missing header {self.header}")
        value = value.strip()
        if not value.startswith(self.prefix):
            raise VerificationError("malformed_signature", f"{self.header} does not start with {self.prefix!r}")
        try:
            given = _decode(value[len(self.prefix) :], self.encoding)
        except (binascii.Error, ValueError):
            raise VerificationError("malformed_signature", f"{self.header} is not {self.encoding}") from None
        matched = False
        for key in self.keys:
            # No early exit: the time taken must not tell which key matched.
            matched |= hmac.compare_digest(hmac.new(key, body, hashlib.sha256).digest(), given)
        if not matched:
            raise VerificationError("no_matching_signature", f"{self.header} matches no configured secret")

    @property
    def secret_headers(self) -> tuple[str, ...]:
        return ()


@dataclass(frozen=True)
class TokenVerifier:
    tokens: tuple[bytes, ...] = field(repr=False)
    header: str
    kind: str = "token"

    def verify(self, headers: Mapping[str, str], body: bytes) -> None:
        value = header(headers, self.header)
        if not value:
            raise VerificationError("missing_token", f"missing header {self.header}")
        # Comparing digests, not the texts, keeps even the token's length out of the timing.
        given = hashlib.sha256(value.encode()).digest()
        matched = False
        for token in self.tokens:
            matched |= hmac.compare_digest(hashlib.sha256(token).digest(), given)
        if not matched:
            raise VerificationError("invalid_token", f"{self.header} matches no configured token")

    @property
    def secret_headers(self) -> tuple[str, ...]:
        return (self.header,)


@dataclass(frozen=True)
class NoVerifier:
    kind: str = "none"

    def verify(self, headers: Mapping[str, str], body: bytes) -> None:
        return None

    @property
    def secret_headers(self) -> tuple[str, ...]:
        return ()


def verifier_for(source: InboundSource, *, clock: Callable[[], float] = time.time) -> Verifier:
    """The verifier a configured source asks for."""
    plain = tuple(s.get_secret_value().encode() for s in source.secret or ())
    if source.verifier == "standard-webhooks":
        return StandardWebhooksVerifier(source.signing_secrets(), source.tolerance, clock)
    if source.verifier == "hmac-sha256":
        assert source.header is not None  # the configuration model insists on it
        return HmacSha256Verifier(plain, source.header, source.encoding, source.signature_prefix)
    if source.verifier == "token":
        assert source.header is not None
        return TokenVerifier(plain, source.header)
    return NoVerifier()
