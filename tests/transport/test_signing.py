"""Standard Webhooks signing: the header format, rotation, and the specification's published example."""

from __future__ import annotations

import base64
import hashlib
import hmac

from warren.topology.secrets import SigningSecrets, WebhookSecret
from warren.transport.signing import sign, signature_header, signed_content

SECRET = WebhookSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
OTHER = WebhookSecret("whsec_" + base64.b64encode(b"another-secret-of-32-bytes-long!").decode())


def test_signed_content_is_id_dot_timestamp_dot_raw_body() -> None:
    assert signed_content("msg_1", 1700000000, b'{"a": 1}') == b'msg_1.1700000000.{"a": 1}'


def test_sign_matches_the_specification_example() -> None:
    # The example of the Standard Webhooks specification (and of the svix libraries' tests).
    body = b'{"test": 2432232314}'
    signature = sign(SECRET, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body)
    assert signature == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_sign_is_hmac_sha256_base64_with_v1_prefix() -> None:
    expected = hmac.new(SECRET.key, b"id.5.body", hashlib.sha256).digest()
    assert sign(SECRET, "id", 5, b"body") == "v1," + base64.b64encode(expected).decode()


def test_every_secret_signs_in_order_space_separated() -> None:
    header = signature_header(SigningSecrets((SECRET, OTHER)), "msg_1", 1700000000, b"{}")
    first, second = header.split(" ")
    assert first == sign(SECRET, "msg_1", 1700000000, b"{}")
    assert second == sign(OTHER, "msg_1", 1700000000, b"{}")


def test_one_secret_gives_one_signature() -> None:
    assert " " not in signature_header(SigningSecrets((SECRET,)), "msg_1", 1, b"x")


def test_the_precomputed_key_state_signs_as_hmac_does_for_every_key_length_and_again() -> None:
    """The key's inner and outer states are made once and copied per signature: keys shorter than SHA-256's
    block, of its length and longer (hashed first, RFC 2104), each signing several bodies in turn."""
    for length in (16, 32, 63, 64, 65, 200):
        raw = bytes(range(length))
        secret = WebhookSecret("whsec_" + base64.b64encode(raw).decode())
        for body in (b"", b'{"a": 1}', b"x" * 5000, b'{"a": 1}'):
            expected = hmac.new(raw, b"msg_7.1700000000." + body, hashlib.sha256).digest()
            assert sign(secret, "msg_7", 1700000000, body) == "v1," + base64.b64encode(expected).decode()
            assert signature_header((secret,), "msg_7", 1700000000, body) == sign(secret, "msg_7", 1700000000, body)
