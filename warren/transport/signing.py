"""Standard Webhooks signing: HMAC-SHA256 over ``id.timestamp.body``, base64, ``v1,`` prefix. Pure.

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

__all__ = ["SIGNATURE_VERSION", "sign", "signature_header", "signed_content"]

SIGNATURE_VERSION = "v1"  # the symmetric (HMAC-SHA256) scheme of the Standard Webhooks specification


def signed_content(msg_id: str, timestamp: int | str, body: bytes) -> bytes:
    """The exact bytes that are signed: ``{id}.{timestamp}.{body}`` with the body as received, not re-encoded."""
    return f"{msg_id}.{timestamp}.".encode() + body


def sign(secret: WebhookSecret, msg_id: str, timestamp: int, body: bytes) -> str:
    """One signature, ``v1,<base64 HMAC-SHA256>``, for one secret."""
    digest = hmac.new(secret.key, signed_content(msg_id, timestamp, body), hashlib.sha256).digest()
    return f"{SIGNATURE_VERSION},{base64.b64encode(digest).decode()}"


def signature_header(secrets: Iterable[WebhookSecret], msg_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` value: every secret given signs (key rotation), space-separated, in their order.

    The worker gives the secrets that sign now (``SigningSecrets.signing``): a rotated-out one ends on time.
    """
    return " ".join(sign(secret, msg_id, timestamp, body) for secret in secrets)
