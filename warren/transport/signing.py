"""Standard Webhooks signing over ``id.timestamp.body``, base64: HMAC-SHA256 (``v1,``) with a ``whsec_`` secret,
Ed25519 (``v1a,``) with a ``whsk_`` key (warren/topology/signing_keys.py). Pure.

The worker signs every outgoing request with :func:`signature_header`; the receiving toolkit checks it with
``warren.receiving.signatures``. Both build the signed content with :func:`signed_content`, so the two
sides cannot drift apart.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
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
    content = signed_content(msg_id, timestamp, body)
    if isinstance(secret, Ed25519Secret):
        return f"{ASYMMETRIC_VERSION},{base64.b64encode(secret.sign(content)).decode()}"
    digest = hmac.new(secret.key, content, hashlib.sha256).digest()
    return f"{SIGNATURE_VERSION},{base64.b64encode(digest).decode()}"


def signature_header(secrets: Iterable[WebhookSecret], msg_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` value: every secret given signs (key rotation, or HMAC beside Ed25519 during a
    migration), space-separated, in their order.

    The worker gives the secrets that sign now (``signing_now``): a rotated-out one ends on time.
    """
    return " ".join(sign(secret, msg_id, timestamp, body) for secret in secrets)
