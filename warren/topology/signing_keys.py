"""Standard Webhooks' asymmetric keys (Ed25519, ``v1a`` signatures) beside the HMAC secrets of secrets.py.

The specification serialises them as base64 with a prefix: ``whsk_`` for the secret (signing) key and ``whpk_`` for
the public (verifying) key. Warren writes the raw 32-byte key (the secret key's seed) and also reads a 64-byte
secret key (the seed followed by its public key, the form Go's and libsodium's secret keys take), checking that
the two halves belong together.

Both are WebhookSecret subclasses, so an endpoint's ``secret`` list (and a receiver's) holds either kind and
every path that carries, seals, rotates and ends secrets carries these too. The key state (the private key
object) is built once, when the secret is read, not per signature. The keys are `cryptography`'s (OpenSSL).
"""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Literal

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from pydantic import Field

from warren.topology.secrets import PREFIX, SecretError, SigningSecrets, UnresolvedSecrets, WebhookSecret

__all__ = [
    "ED25519",
    "HMAC",
    "PUBLIC_PREFIX",
    "SCHEMES",
    "SECRET_KEY_PREFIX",
    "Ed25519Secret",
    "PublicKey",
    "Scheme",
    "Signing",
    "check_signing",
    "new_ed25519_secret",
    "scheme_of",
    "signing_now",
    "signing_secret",
    "verifying_key",
]

SECRET_KEY_PREFIX = "whsk_"
PUBLIC_PREFIX = "whpk_"
Scheme = Literal["hmac", "ed25519"]
Signing = Annotated[
    tuple[Scheme, ...] | None,
    Field(description="schemes that sign: 'hmac' (v1), 'ed25519' (v1a); default: each it holds a key for"),
]  # an endpoint's ``signing``
HMAC: Scheme = "hmac"  # v1: HMAC-SHA256 with a whsec_ secret
ED25519: Scheme = "ed25519"  # v1a: Ed25519 with a whsk_ secret key, verified with its whpk_ public key
SCHEMES: tuple[Scheme, ...] = (HMAC, ED25519)


def _decoded(text: str, prefix: str) -> bytes:
    try:
        return base64.b64decode(text[len(prefix) :], validate=True)
    except (binascii.Error, ValueError) as exc:
        raise SecretError(f"the part after {prefix!r} is not valid base64") from exc


def _raw_public(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(Encoding.Raw, PublicFormat.Raw)


class Ed25519Secret(WebhookSecret):
    """An Ed25519 secret key, ``whsk_<base64>``: signs ``v1a``; its public key (``whpk_``) is for receivers."""

    __slots__ = ("_private", "_public")
    scheme: Scheme = ED25519

    def __init__(self, text: str, expires_at: float | None = None) -> None:  # no super().__init__(): not whsec_
        if not text.startswith(SECRET_KEY_PREFIX):
            raise SecretError(f"an Ed25519 secret key must start with {SECRET_KEY_PREFIX!r}")
        raw = _decoded(text, SECRET_KEY_PREFIX)
        if len(raw) not in (32, 64):
            raise SecretError("an Ed25519 secret key is 32 bytes (or 64: the 32 and its public key), in base64")
        self._private = Ed25519PrivateKey.from_private_bytes(raw[:32])
        self._public = self._private.public_key()
        if len(raw) == 64 and raw[32:] != _raw_public(self._public):
            raise SecretError("the 64-byte Ed25519 secret key's second half is not its public key")
        self._key = raw[:32]
        self.expires_at = expires_at

    def reveal(self) -> str:
        """The ``whsk_`` text (the 32-byte seed): for sealing and for the one time it is shown; never log it."""
        return SECRET_KEY_PREFIX + base64.b64encode(self._key).decode()

    def public_key(self) -> str:
        """The ``whpk_`` text a receiver verifies with; safe to publish."""
        return PUBLIC_PREFIX + base64.b64encode(_raw_public(self._public)).decode()

    def sign(self, content: bytes) -> bytes:
        return self._private.sign(content)

    def verify(self, signature: bytes, content: bytes) -> bool:
        return _verified(self._public, signature, content)

    def __repr__(self) -> str:
        return "Ed25519Secret('whsk_***')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Ed25519Secret) and other._key == self._key and other.expires_at == self.expires_at

    def __hash__(self) -> int:
        return hash((ED25519, self._key, self.expires_at))


class PublicKey(WebhookSecret):
    """An Ed25519 public key, ``whpk_<base64>``, as a receiver holds it: verifies ``v1a``, signs nothing.

    A WebhookSecret only so that a receiver's key list holds HMAC secrets and public keys side by side (a sender
    migrating from one to the other signs with both); nothing about it is secret."""

    __slots__ = ("_public",)
    scheme: Scheme = ED25519

    def __init__(self, text: str, expires_at: float | None = None) -> None:  # no super().__init__(): not whsec_
        if not text.startswith(PUBLIC_PREFIX):
            raise SecretError(f"an Ed25519 public key must start with {PUBLIC_PREFIX!r}")
        raw = _decoded(text, PUBLIC_PREFIX)
        if len(raw) != 32:
            raise SecretError("an Ed25519 public key is 32 bytes, in base64")
        try:
            self._public = Ed25519PublicKey.from_public_bytes(raw)
        except ValueError as exc:
            raise SecretError("not an Ed25519 public key") from exc
        self._key = raw
        self.expires_at = expires_at

    def reveal(self) -> str:
        return PUBLIC_PREFIX + base64.b64encode(self._key).decode()

    public_key = reveal

    def verify(self, signature: bytes, content: bytes) -> bool:
        return _verified(self._public, signature, content)

    def __repr__(self) -> str:
        return f"PublicKey({self.reveal()!r})"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PublicKey) and other._key == self._key and other.expires_at == self.expires_at

    def __hash__(self) -> int:
        return hash((PUBLIC_PREFIX, self._key, self.expires_at))


def _verified(key: Ed25519PublicKey, signature: bytes, content: bytes) -> bool:
    try:
        key.verify(signature, content)
    except InvalidSignature:
        return False
    return True


def new_ed25519_secret() -> str:
    """A fresh Ed25519 secret key, ``whsk_`` and the base64 of its 32-byte seed."""
    raw = Ed25519PrivateKey.generate().private_bytes_raw()
    return SECRET_KEY_PREFIX + base64.b64encode(raw).decode()


def scheme_of(secret: WebhookSecret) -> Scheme:
    """``ed25519`` for an Ed25519 key (secret or public), ``hmac`` for a ``whsec_`` secret."""
    return ED25519 if isinstance(secret, Ed25519Secret | PublicKey) else HMAC


def signing_secret(text: str, expires_at: float | None = None) -> WebhookSecret:
    """A sender's key from its text: ``whsec_`` (HMAC, ``v1``) or ``whsk_`` (Ed25519, ``v1a``)."""
    if text.startswith(SECRET_KEY_PREFIX):
        return Ed25519Secret(text, expires_at)
    if text.startswith(PUBLIC_PREFIX):
        raise SecretError(f"a {PUBLIC_PREFIX!r} public key cannot sign: give the {SECRET_KEY_PREFIX!r} key")
    if not text.startswith(PREFIX):
        raise SecretError(f"a secret must start with {PREFIX!r} (HMAC) or {SECRET_KEY_PREFIX!r} (Ed25519)")
    return WebhookSecret(text, expires_at)


def verifying_key(text: str) -> WebhookSecret:
    """A receiver's key from its text: ``whsec_`` (HMAC, ``v1``) or ``whpk_`` (Ed25519 public key, ``v1a``)."""
    if text.startswith(PUBLIC_PREFIX):
        return PublicKey(text)
    if text.startswith(SECRET_KEY_PREFIX):
        raise SecretError(f"a receiver verifies with the {PUBLIC_PREFIX!r} key, not the {SECRET_KEY_PREFIX!r} one")
    if not text.startswith(PREFIX):
        raise SecretError(f"a secret must start with {PREFIX!r} (HMAC) or {PUBLIC_PREFIX!r} (Ed25519 public key)")
    return WebhookSecret(text)


def check_signing(signing: tuple[Scheme, ...] | None, secrets: SigningSecrets) -> None:
    """An endpoint's ``signing`` names each scheme once and has a key for each (ValueError otherwise). Secrets
    not resolved here (``env:NAME`` of a command that signs nothing, a record's sealed layout) are not checked."""
    if signing is None:
        return
    if not signing or len(set(signing)) != len(signing):
        raise ValueError("signing names 'hmac' and/or 'ed25519', each once")
    if isinstance(secrets, UnresolvedSecrets):
        return
    held = {scheme_of(s) for s in secrets}
    for scheme in signing:
        if scheme not in held:
            kind = "'whsec_' secret" if scheme == HMAC else "'whsk_' key"
            raise ValueError(f"signing names {scheme!r} but secret holds no {kind} for it")


def signing_now(secrets: SigningSecrets, signing: tuple[Scheme, ...] | None, now: float) -> tuple[WebhookSecret, ...]:
    """The keys that sign a request sent at ``now``: those in force (``SigningSecrets.signing``) of the schemes in
    ``signing`` (every scheme when it is None). Never empty: should no key of those schemes be in force (only a
    hand-made list can do that), every key in force signs rather than sending a request nobody can verify."""
    keys = secrets.signing(now)
    if signing is None or len(signing) == len(SCHEMES):
        return keys
    return tuple(k for k in keys if scheme_of(k) in signing) or keys
