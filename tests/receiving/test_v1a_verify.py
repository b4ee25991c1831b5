"""The receiving toolkit checks ``v1a`` (Ed25519) signatures with ``whpk_`` public keys; signatures here are made
with PyNaCl (libsodium), not with Warren's signer."""

from __future__ import annotations

import base64
import time

import nacl.signing
import pytest

from warren.receiving.errors import VerificationError
from warren.receiving.signatures import MAX_V1A, verify_standard_webhook
from warren.receiving.verifiers import verifier_for
from warren.topology.config import InboundSource
from warren.topology.secrets import WebhookSecret
from warren.topology.signing_keys import PublicKey
from warren.transport.signing import sign

BODY = b'{"type":"order.paid"}'
HMAC_TEXT = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def _pair() -> tuple[nacl.signing.SigningKey, str]:
    key = nacl.signing.SigningKey.generate()
    return key, "whpk_" + base64.b64encode(bytes(key.verify_key)).decode()


def _v1a(key: nacl.signing.SigningKey, msg_id: str, timestamp: int, body: bytes = BODY) -> str:
    return "v1a," + base64.b64encode(key.sign(f"{msg_id}.{timestamp}.".encode() + body).signature).decode()


def _headers(signature: str, timestamp: int, msg_id: str = "msg_1") -> dict[str, str]:
    return {"webhook-id": msg_id, "webhook-timestamp": str(timestamp), "webhook-signature": signature}


def _refusal(keys: list[WebhookSecret], headers: dict[str, str], body: bytes = BODY) -> str:
    with pytest.raises(VerificationError) as caught:
        verify_standard_webhook(keys, headers, body)
    return caught.value.reason


def test_a_v1a_signature_verifies_with_its_public_key() -> None:
    key, public = _pair()
    now = int(time.time())
    assert verify_standard_webhook([PublicKey(public)], _headers(_v1a(key, "msg_1", now), now), BODY) == "msg_1"


def test_a_tampered_body_another_key_or_another_id_is_refused() -> None:
    key, public = _pair()
    _, other = _pair()
    now = int(time.time())
    headers = _headers(_v1a(key, "msg_1", now), now)
    assert _refusal([PublicKey(public)], headers, BODY + b" ") == "no_matching_signature"
    assert _refusal([PublicKey(other)], headers) == "no_matching_signature"
    assert _refusal([PublicKey(public)], headers | {"webhook-id": "msg_2"}) == "no_matching_signature"


def test_a_v1_only_receiver_skips_v1a_and_a_v1a_only_receiver_skips_v1() -> None:
    key, public = _pair()
    now = int(time.time())
    v1 = sign(WebhookSecret(HMAC_TEXT), "msg_1", now, BODY)
    both = _headers(v1 + " " + _v1a(key, "msg_1", now), now)
    assert verify_standard_webhook([WebhookSecret(HMAC_TEXT)], both, BODY) == "msg_1"
    assert verify_standard_webhook([PublicKey(public)], both, BODY) == "msg_1"
    assert _refusal([PublicKey(public)], _headers(v1, now)) == "no_matching_signature"
    assert _refusal([PublicKey(public)], _headers("v2,abc", now)) == "no_v1_signature"


def test_during_a_rotation_either_public_key_verifies() -> None:
    old, old_public = _pair()
    new, new_public = _pair()
    now = int(time.time())
    keys: list[WebhookSecret] = [PublicKey(old_public), PublicKey(new_public)]
    assert verify_standard_webhook(keys, _headers(_v1a(new, "m", now), now, "m"), BODY) == "m"
    assert verify_standard_webhook(keys, _headers(_v1a(old, "m", now), now, "m"), BODY) == "m"


def test_only_the_first_max_v1a_entries_are_checked() -> None:
    key, public = _pair()
    now = int(time.time())
    junk = " ".join(["v1a," + base64.b64encode(b"\0" * 64).decode()] * MAX_V1A)
    headers = _headers(junk + " " + _v1a(key, "msg_1", now), now)
    assert _refusal([PublicKey(public)], headers) == "no_matching_signature"


def test_an_inbound_source_takes_public_keys_but_never_a_secret_key() -> None:
    key, public = _pair()
    source = InboundSource.model_validate(
        {"name": "src", "handler": "pkg.mod:fn", "verifier": "standard-webhooks", "secret": [HMAC_TEXT, public]}
    )
    now = int(time.time())
    verifier_for(source).verify(_headers(_v1a(key, "msg_1", now), now), BODY)
    secret_key = "whsk_" + base64.b64encode(bytes(key)).decode()
    with pytest.raises(ValueError, match="not the 'whsk_'"):
        InboundSource.model_validate(
            {"name": "src", "handler": "pkg.mod:fn", "verifier": "standard-webhooks", "secret": secret_key}
        )
