"""A receiver's side of Ed25519 (``v1a``) signatures, with PyNaCl (libsodium): independent of Warren's code."""

from __future__ import annotations

import base64
from collections.abc import Mapping

import nacl.exceptions
import nacl.signing

__all__ = ["public_bytes", "v1a_verified", "versions"]


def public_bytes(key: str) -> bytes:
    """The 32-byte public key of a ``whpk_`` text, or the one libsodium derives from a ``whsk_`` seed."""
    if key.startswith("whpk_"):
        return base64.b64decode(key.removeprefix("whpk_"))
    return bytes(nacl.signing.SigningKey(base64.b64decode(key.removeprefix("whsk_"))).verify_key)


def v1a_verified(key: str | bytes, headers: Mapping[str, str], body: bytes) -> bool:
    """Whether any ``v1a`` entry of ``webhook-signature`` verifies ``id.timestamp.body`` with the public key."""
    verify_key = nacl.signing.VerifyKey(key if isinstance(key, bytes) else public_bytes(key))
    content = f"{headers.get('webhook-id')}.{headers.get('webhook-timestamp')}.".encode() + body
    for entry in (headers.get("webhook-signature") or "").split(" "):
        version, _, encoded = entry.partition(",")
        if version != "v1a":
            continue
        try:
            verify_key.verify(content, base64.b64decode(encoded))
            return True
        except nacl.exceptions.BadSignatureError:
            continue
    return False


def versions(headers: Mapping[str, str]) -> list[str]:
    """The signature versions of ``webhook-signature``, in order (``["v1", "v1a"]`` during a migration)."""
    return [entry.split(",")[0] for entry in (headers.get("webhook-signature") or "").split(" ") if entry]
