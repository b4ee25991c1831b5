"""Webhook signing secrets (``whsec_<base64>``) that never show themselves in logs, errors or ``repr``."""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import hmac
import os
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from typing import Any

from pydantic import SecretStr

from warren.core.errors import WarrenError

__all__ = [
    "API_TOKENS",
    "INBOUND_SECRETS",
    "SIGNING_SECRETS",
    "SecretError",
    "SigningSecrets",
    "UnresolvedSecrets",
    "UnresolvedText",
    "WebhookSecret",
    "deferrable",
    "deferring",
    "resolve_or_defer",
    "resolve_secret_text",
    "revealed",
]

PREFIX = "whsec_"
ENV_REFERENCE = "env:"

# The kinds of secret a command may load without (``load_config``): each is needed by one command only, and an
# ``env:NAME`` of a kind the command does not use is kept unresolved instead of failing the load (a worker's host
# need not hold the API's tokens, nor the API's host the endpoints' signing secrets).
SIGNING_SECRETS = "endpoint signing secrets"  # warren worker
API_TOKENS = "API tokens"  # warren api
INBOUND_SECRETS = "inbound secrets"  # warren receive
_DEFERRABLE: ContextVar[frozenset[str]] = ContextVar("warren_deferrable_secrets", default=frozenset())


@contextlib.contextmanager
def deferring(kinds: Iterable[str]) -> Iterator[None]:
    """While loading a configuration: ``env:NAME`` secrets of these kinds may stay unresolved."""
    token = _DEFERRABLE.set(frozenset(kinds))
    try:
        yield
    finally:
        _DEFERRABLE.reset(token)


def deferrable(kind: str) -> bool:
    return kind in _DEFERRABLE.get()


class SecretError(WarrenError, ValueError):
    """A secret is malformed or its environment variable is missing (the message never holds the secret)."""


class WebhookSecret:
    """One Standard Webhooks secret: the key bytes behind ``whsec_<base64>``.

    ``expires_at`` (epoch seconds) is set on a secret a rotation replaced: it signs until then, and the worker
    stops signing with it at that moment by itself (``SigningSecrets.signing``), whatever else runs.
    """

    __slots__ = ("_key", "_keyed", "expires_at")
    _keyed: Any  # the key's HMAC-SHA256 (OpenSSL's, or hmac.HMAC), keyed on the first signature and copied for each

    def __init__(self, text: str, expires_at: float | None = None) -> None:
        if not text.startswith(PREFIX):
            raise SecretError(f"a secret must start with {PREFIX!r} (Standard Webhooks form)")
        try:
            key = base64.b64decode(text[len(PREFIX) :], validate=True)
        except (binascii.Error, ValueError) as exc:
            raise SecretError("the part after 'whsec_' is not valid base64") from exc
        if len(key) < 16:
            raise SecretError("a secret needs at least 16 bytes of key material (24 base64 characters)")
        self._key = key
        self.expires_at = expires_at

    @property
    def key(self) -> bytes:
        return self._key

    def hmac_sha256(self, *parts: bytes) -> bytes:
        """HMAC-SHA256 of the concatenated ``parts`` under this key: the standard library's HMAC, keyed once and
        copied per signature (a copy carries the key's inner and outer states; ``hmac.new`` derives them from the
        key again on every call), the parts hashed without being joined."""
        try:
            keyed = self._keyed
        except AttributeError:
            made = hmac.new(self._key, digestmod=hashlib.sha256)
            # OpenSSL's HMAC under the standard library's wrapper, when it has one: copied, fed and read without a
            # Python call around each step (the same object, keyed the same way; ``hmac`` falls back to its own).
            keyed = self._keyed = getattr(made, "_hmac", None) or made
        mac = keyed.copy()
        for part in parts:
            mac.update(part)
        digest: bytes = mac.digest()
        return digest

    def reveal(self) -> str:
        """The ``whsec_`` text, for handing to a receiver; never log it."""
        return PREFIX + base64.b64encode(self._key).decode()

    def __repr__(self) -> str:
        return "WebhookSecret('whsec_***')"

    __str__ = __repr__

    def signs_at(self, now: float) -> bool:
        """Whether this secret still signs at ``now`` (epoch seconds): it has no end, or its end is later."""
        return self.expires_at is None or now < self.expires_at

    def __eq__(self, other: object) -> bool:
        # The same type: an HMAC secret and an Ed25519 key (warren/topology/signing_keys.py) of equal bytes differ.
        return type(other) is type(self) and other._key == self._key and other.expires_at == self.expires_at

    def __hash__(self) -> int:
        return hash((self._key, self.expires_at))


class SigningSecrets:
    """The secrets an endpoint signs with: one, or several during a key rotation (every one signs until it ends)."""

    __slots__ = ("_ends", "_secrets")

    def __init__(self, secrets: tuple[WebhookSecret, ...]) -> None:
        if not secrets:
            raise SecretError("at least one secret is needed")
        self._secrets = secrets
        # The first moment a secret stops signing: before it, every secret signs and nothing is filtered.
        self._ends = min((s.expires_at for s in secrets if s.expires_at is not None), default=None)

    def __iter__(self) -> Iterator[WebhookSecret]:
        return iter(self._secrets)

    def signing(self, now: float) -> tuple[WebhookSecret, ...]:
        """The secrets that sign at ``now`` (epoch seconds): the rotated-out ones only until their end.

        Never empty: should every secret have ended (a rotation always leaves one without an end, so only a
        hand-made list can do this), the newest still signs rather than sending a request nobody can verify.
        """
        if self._ends is None or now < self._ends:
            return self._secrets
        return tuple(s for s in self._secrets if s.signs_at(now)) or self._secrets[:1]

    def __len__(self) -> int:
        return len(self._secrets)

    def __repr__(self) -> str:
        return f"SigningSecrets(<{len(self._secrets)} hidden>)"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SigningSecrets) and other._secrets == self._secrets

    def __hash__(self) -> int:
        return hash(self._secrets)


class UnresolvedSecrets(SigningSecrets):
    """An endpoint's ``env:NAME`` secrets that could not be resolved when a command that signs nothing
    (``status``, ``dlq``, ``endpoint``, ...) loaded the configuration.

    Signing with them raises the SecretError that resolving them raised; they dump back to their references.
    """

    __slots__ = ("_problem", "references")

    def __init__(self, references: tuple[str, ...], problem: str) -> None:  # no super().__init__(): no keys
        self.references = references
        self._problem = problem

    def __iter__(self) -> Iterator[WebhookSecret]:
        raise SecretError(self._problem)

    def __len__(self) -> int:
        return len(self.references)

    def __repr__(self) -> str:
        return f"UnresolvedSecrets({', '.join(self.references)})"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UnresolvedSecrets) and other.references == self.references

    def __hash__(self) -> int:
        return hash(self.references)


class UnresolvedText(SecretStr):
    """An API token or inbound secret given as ``env:NAME`` whose variable is not set, loaded by a command that
    does not use it. Using it raises the SecretError that resolving it raised; it dumps back to its reference."""

    def __init__(self, reference: str, problem: str) -> None:
        super().__init__("")
        self.reference = reference
        self.problem = problem

    def get_secret_value(self) -> str:
        raise SecretError(self.problem)

    def __repr__(self) -> str:
        return f"UnresolvedText({self.reference})"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UnresolvedText) and other.reference == self.reference

    def __hash__(self) -> int:
        return hash(self.reference)


def revealed(text: SecretStr) -> str:
    """A token's or inbound secret's text for a dump: an unresolved one gives back its ``env:NAME``."""
    return text.reference if isinstance(text, UnresolvedText) else text.get_secret_value()


def resolve_or_defer(text: str, kind: str) -> str | UnresolvedText:
    """``resolve_secret_text``; when that fails for a secret of a ``kind`` the loading command does not use, its
    ``UnresolvedText``. Otherwise the problem is raised as a ValueError (a validation error naming the field)."""
    try:
        return resolve_secret_text(text)
    except SecretError as exc:
        if deferrable(kind):
            return UnresolvedText(text, str(exc))
        raise ValueError(str(exc)) from None


def resolve_secret_text(text: str, environ: os._Environ[str] | dict[str, str] | None = None) -> str:
    """Follow an ``env:NAME`` reference to the variable's value; other text is returned as it is."""
    if not text.startswith(ENV_REFERENCE):
        return text
    name = text[len(ENV_REFERENCE) :].strip()
    env = os.environ if environ is None else environ
    if not name:
        raise SecretError("'env:' must be followed by the name of an environment variable")
    if name not in env:
        raise SecretError(f"environment variable {name} (named by 'env:{name}') is not set")
    return env[name].strip()
