"""Verifying Standard Webhooks signatures: a pure function over headers, body, secrets and the clock.

What it accepts, following the specification:

- ``webhook-signature`` holds one or more space-separated signatures: ``v1,<base64>`` (HMAC-SHA256, checked
  with ``whsec_`` secrets) and ``v1a,<base64>`` (Ed25519, checked with ``whpk_`` public keys); entries of other
  versions or malformed ones are skipped, not fatal, because a sender may add schemes this receiver does not know.
- Several secrets or public keys may be configured during a key rotation or a migration from HMAC to Ed25519:
  the request is genuine when any signature matches any of them (a ``v1`` one a secret, a ``v1a`` one a key).
- ``webhook-timestamp`` (integer seconds) must lie within ``tolerance`` of now, both ways, which bounds how
  long a captured request can be replayed.

Every HMAC comparison goes through ``hmac.compare_digest``, and every candidate is compared even after a match,
so the time taken does not reveal which signature or secret matched. Ed25519 is checked by `cryptography`
(OpenSSL) with the public key, which is no secret; at most ``MAX_V1A`` ``v1a`` entries are checked, so that a
header full of them costs a bounded amount of work.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import time
from collections.abc import Iterable, Mapping

from warren.core.digits import ascii_int
from warren.receiving.errors import VerificationError
from warren.receiving.headers import header
from warren.topology.secrets import WebhookSecret
from warren.topology.signing_keys import Ed25519Secret, PublicKey
from warren.transport.signing import ASYMMETRIC_VERSION, SIGNATURE_VERSION, signed_content

__all__ = [
    "DEFAULT_TOLERANCE",
    "ID_HEADER",
    "MAX_V1A",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "parse_signatures",
    "verify_standard_webhook",
]

ID_HEADER = "webhook-id"
TIMESTAMP_HEADER = "webhook-timestamp"
SIGNATURE_HEADER = "webhook-signature"
DEFAULT_TOLERANCE = 300.0  # seconds; the specification's suggestion (5 minutes)
MAX_V1A = 16  # v1a signatures checked per request (a sender signs with one key, two during a rotation)


def parse_signatures(value: str, version: str = SIGNATURE_VERSION) -> list[bytes]:
    """The decoded signatures of one ``version`` (``v1`` unless told) of a ``webhook-signature`` value; other or
    broken entries are dropped."""
    found: list[bytes] = []
    for entry in value.split(" "):
        entry_version, sep, encoded = entry.partition(",")
        if not sep or entry_version != version:
            continue
        try:
            found.append(base64.b64decode(encoded, validate=True))
        except (binascii.Error, ValueError):
            continue
    return found


def _timestamp(text: str, tolerance: float, now: float) -> int:
    # ASCII digits only: int() also reads other scripts' digits (Arabic-indic ones), a sign, "_" and Unicode spaces,
    # and the signed content is the header's text, so each of those would be another text for the same moment.
    timestamp = ascii_int(text.strip(" \t"))
    if timestamp is None:
        raise VerificationError("bad_timestamp", f"{TIMESTAMP_HEADER} is not an integer number of seconds")
    if timestamp < now - tolerance:
        raise VerificationError("timestamp_too_old", f"{TIMESTAMP_HEADER} is older than the {tolerance:g}s tolerance")
    if timestamp > now + tolerance:
        raise VerificationError(
            "timestamp_too_new", f"{TIMESTAMP_HEADER} is further in the future than the {tolerance:g}s tolerance"
        )
    return timestamp


def verify_standard_webhook(
    secrets: Iterable[WebhookSecret],
    headers: Mapping[str, str],
    body: bytes,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    now: float | None = None,
) -> str:
    """Check a Standard Webhooks request and return its ``webhook-id``; raise VerificationError otherwise.

    ``body`` must be the raw bytes as received: re-serialised JSON would not match the signature.
    """
    msg_id = header(headers, ID_HEADER)
    timestamp_text = header(headers, TIMESTAMP_HEADER)
    signature_text = header(headers, SIGNATURE_HEADER)
    present = {ID_HEADER: msg_id, TIMESTAMP_HEADER: timestamp_text, SIGNATURE_HEADER: signature_text}
    missing = [name for name, value in present.items() if not value]
    if missing:
        raise VerificationError("missing_headers", "missing header(s): " + ", ".join(missing))
    assert msg_id is not None and timestamp_text is not None and signature_text is not None
    _timestamp(timestamp_text, tolerance, time.time() if now is None else now)
    candidates = parse_signatures(signature_text)
    asymmetric = parse_signatures(signature_text, ASYMMETRIC_VERSION)[:MAX_V1A]
    if not candidates and not asymmetric:
        raise VerificationError("no_v1_signature", f"{SIGNATURE_HEADER} holds no well-formed v1 or v1a signature")
    # The signer signed the header's text, so sign that text, not a re-formatted integer.
    content = signed_content(msg_id, timestamp_text.strip(" \t"), body)
    matched = False
    for secret in secrets:
        if isinstance(secret, PublicKey | Ed25519Secret):
            for signature in asymmetric:
                matched |= secret.verify(signature, content)
            continue
        expected = hmac.new(secret.key, content, hashlib.sha256).digest()
        for candidate in candidates:
            # No early exit: the loop's duration must not tell which secret or signature matched.
            matched |= hmac.compare_digest(expected, candidate)
    if not matched:
        raise VerificationError("no_matching_signature", "no signature matches any configured secret")
    return msg_id
