"""``v1a`` signatures: Warren's, checked with PyNaCl (libsodium), not with Warren's own code; and beside ``v1``."""

from __future__ import annotations

import base64
import time

import nacl.signing
import pytest
from standardwebhooks import Webhook

from warren.topology.config import Endpoint
from warren.topology.secrets import SigningSecrets, WebhookSecret
from warren.topology.signing_keys import Ed25519Secret, new_ed25519_secret
from warren.transport.base import Delivery
from warren.transport.http import webhook_headers
from warren.transport.signing import sign, signature_header

HMAC_TEXT = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
BODY = b'{"type":"order.paid","data":{"id":1}}'


def _nacl_verify(public_key: str, signature: str, content: bytes) -> bytes:
    """What a receiver does with libsodium: the whpk_'s 32 bytes, the v1a's 64 (raises BadSignatureError)."""
    version, _, encoded = signature.partition(",")
    assert version == "v1a"
    verify_key = nacl.signing.VerifyKey(base64.b64decode(public_key.removeprefix("whpk_")))
    return bytes(verify_key.verify(content, base64.b64decode(encoded)))


def test_a_v1a_signature_verifies_with_the_public_key_in_libsodium() -> None:
    key = Ed25519Secret(new_ed25519_secret())
    signature = sign(key, "msg_1", 1700000000, BODY)
    assert _nacl_verify(key.public_key(), signature, b"msg_1.1700000000." + BODY) == b"msg_1.1700000000." + BODY
    with pytest.raises(nacl.exceptions.BadSignatureError):
        _nacl_verify(key.public_key(), signature, b"msg_1.1700000001." + BODY)


def test_a_libsodium_key_signs_as_warren_does() -> None:
    seed = nacl.signing.SigningKey.generate()
    key = Ed25519Secret("whsk_" + base64.b64encode(bytes(seed)).decode())
    assert key.public_key() == "whpk_" + base64.b64encode(bytes(seed.verify_key)).decode()
    expected = base64.b64encode(seed.sign(b"id.5.body").signature).decode()  # Ed25519 is deterministic
    assert sign(key, "id", 5, b"body") == "v1a," + expected


def test_during_a_migration_both_signatures_go_in_one_header_and_each_verifies() -> None:
    key = Ed25519Secret(new_ed25519_secret())
    now = int(time.time())
    header = signature_header(SigningSecrets((WebhookSecret(HMAC_TEXT), key)), "msg_2", now, BODY)
    v1, v1a = header.split(" ")
    assert v1.startswith("v1,") and v1a.startswith("v1a,")
    _nacl_verify(key.public_key(), v1a, f"msg_2.{now}.".encode() + BODY)
    # The standardwebhooks library (v1 only) verifies v1 with the secret and skips the v1a beside it.
    headers = {"webhook-id": "msg_2", "webhook-timestamp": str(now), "webhook-signature": header}
    assert Webhook(HMAC_TEXT).verify(BODY, headers) == {"type": "order.paid", "data": {"id": 1}}


def test_webhook_headers_sign_with_the_schemes_the_endpoint_names() -> None:
    ed = new_ed25519_secret()
    delivery = Delivery("msg_3", "order.paid", BODY, 0, 0, None, ())
    fields = {"name": "e", "url": "https://example.com/h", "events": ["#"], "secret": [HMAC_TEXT, ed]}
    both = webhook_headers(Endpoint.model_validate(fields), delivery, 1700000000)["webhook-signature"]
    assert [s.split(",")[0] for s in both.split(" ")] == ["v1", "v1a"]
    only = webhook_headers(Endpoint.model_validate(fields | {"signing": ["ed25519"]}), delivery, 1700000000)
    (signature,) = only["webhook-signature"].split(" ")
    _nacl_verify(Ed25519Secret(ed).public_key(), signature, b"msg_3.1700000000." + BODY)
