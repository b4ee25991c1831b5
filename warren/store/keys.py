"""Sealing signing secrets at rest: Fernet, several keys at once (MultiFernet) so the key itself can rotate.

The first key encrypts; every key decrypts. To rotate: put a new key first, keep the old one after it, run
``warren store rekey`` (every secret re-sealed with the new key), then drop the old key.
"""

from __future__ import annotations

from collections.abc import Sequence

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from warren.core.errors import WarrenError
from warren.topology.secrets import SecretError, resolve_secret_text

__all__ = ["Sealer", "StoreKeyError", "generate_key", "sealer_from"]


class StoreKeyError(WarrenError):
    """The store's keys are missing or malformed, or a sealed secret opens with none of them."""


def generate_key() -> str:
    """A fresh Fernet key (32 random bytes, url-safe base64): the value of ``WARREN_STORE_KEY``."""
    return Fernet.generate_key().decode()


class Sealer:
    """Encrypts and decrypts secret text with the configured keys; never shows a key or a secret."""

    __slots__ = ("_fernet",)

    def __init__(self, fernet: MultiFernet) -> None:
        self._fernet = fernet

    def seal(self, text: str) -> str:
        return self._fernet.encrypt(text.encode()).decode()

    def open(self, token: str) -> str:
        try:
            return self._fernet.decrypt(token.encode()).decode()
        except InvalidToken:
            raise StoreKeyError(
                "a stored secret opens with none of store.keys: was the key that sealed it removed?"
            ) from None

    def reseal(self, token: str) -> str:
        """``token`` sealed again with the first key (after a key rotation)."""
        try:
            return self._fernet.rotate(token.encode()).decode()
        except InvalidToken:
            raise StoreKeyError("a stored secret opens with none of store.keys") from None

    def __repr__(self) -> str:
        return "Sealer(<keys hidden>)"


def sealer_from(references: Sequence[str]) -> Sealer:
    """The keys of ``store.keys`` (literal or ``env:NAME``), resolved now, as a Sealer."""
    keys = []
    for number, reference in enumerate(references, 1):
        try:
            text = resolve_secret_text(reference)
        except SecretError as exc:
            hint = " (create one with `warren store generate-key`)" if reference.startswith("env:") else ""
            raise StoreKeyError(f"store.keys[{number - 1}]: {exc}{hint}") from None
        try:
            keys.append(Fernet(text.encode()))
        except (ValueError, TypeError):
            raise StoreKeyError(
                f"store.keys[{number - 1}] is not a Fernet key (32 bytes, url-safe base64; "
                "`warren store generate-key` makes one)"
            ) from None
    if not keys:
        raise StoreKeyError("store.keys is empty: give at least one Fernet key")
    return Sealer(MultiFernet(keys))
