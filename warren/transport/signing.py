"""Standard Webhooks signing over ``id.timestamp.body``, base64: HMAC-SHA256 (``v1,``) with a ``whsec_`` secret,
Ed25519 (``v1a,``) with a ``whsk_`` key (warren/topology/signing_keys.py). Pure.

The worker signs every outgoing request with :func:`signature_header`; the receiving toolkit checks it with
``warren.receiving.signatures``. Both build the signed content with :func:`signed_content`, so the two
sides cannot drift apart.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable

from warren.topology.secrets import WebhookSecret
from warren.topology.signing_keys import Ed25519Secret

__all__ = ["ASYMMETRIC_VERSION", "SIGNATURE_VERSION", "sign", "signature_header", "signed_content"]

SIGNATURE_VERSION = "v1"  # the symmetric (HMAC-SHA256) scheme of the Standard Webhooks specification
ASYMMETRIC_VERSION = "v1a"  # the asymmetric (Ed25519) scheme


def signed_content(msg_id: str, timestamp: int | str, body: bytes) -> bytes:
    """The exact bytes that are signed: ``{id}.{timestamp}.{body}`` with the body as received, not re-encoded."""
    return f"{msg_id}.{timestamp}.".encode() + body


def sign(secret: WebhookSecret, msg_id: str, timestamp: int, body: bytes) -> str:
    """One signature for one secret: ``v1,<base64 HMAC-SHA256>``, or ``v1a,<base64 Ed25519>`` for a ``whsk_`` key."""
    if isinstance(secret, Ed25519Secret):
        content = signed_content(msg_id, timestamp, body)
        return f"{ASYMMETRIC_VERSION},{base64.b64encode(secret.sign(content)).decode()}"
    # The same bytes as signed_content, hashed in two parts from the key's precomputed state (the body not copied).
    digest = secret.hmac_sha256(f"{msg_id}.{timestamp}.".encode(), body)
    return f"{SIGNATURE_VERSION},{binascii.b2a_base64(digest, newline=False).decode()}"


def signature_header(secrets: Iterable[WebhookSecret], msg_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` value: every secret given signs (key rotation, or HMAC beside Ed25519 during a
    migration), space-separated, in their order.

    The worker gives the secrets that sign now (``signing_now``): a rotated-out one ends on time.
    """
    if isinstance(secrets, tuple) and len(secrets) == 1:  # the worker's usual case: no generator, no join
        return sign(secrets[0], msg_id, timestamp, body)
    return " ".join(sign(secret, msg_id, timestamp, body) for secret in secrets)
