"""Ed25519 keys (``whsk_``/``whpk_``): parsing, the RFC 8032 vectors, and an endpoint's ``signing``."""

from __future__ import annotations

import base64

import pytest

from warren.topology.config import Endpoint
from warren.topology.secrets import SecretError, SigningSecrets, WebhookSecret
from warren.topology.signing_keys import (
    Ed25519Secret,
    PublicKey,
    new_ed25519_secret,
    scheme_of,
    signing_now,
    signing_secret,
    verifying_key,
)

# RFC 8032, section 7.1, TEST 1 and TEST 2: secret key (seed), public key, message, signature.
RFC8032 = [
    (
        "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
        "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
        "",
        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b",
    ),
    (
        "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
        "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
        "72",
        "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00",
    ),
]
HMAC_TEXT = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def _b64(hex_text: str) -> str:
    return base64.b64encode(bytes.fromhex(hex_text)).decode()


@pytest.mark.parametrize(("seed", "public", "message", "signature"), RFC8032)
def test_the_rfc_8032_vectors(seed: str, public: str, message: str, signature: str) -> None:
    key = Ed25519Secret("whsk_" + _b64(seed))
    assert key.public_key() == "whpk_" + _b64(public)
    assert key.sign(bytes.fromhex(message)).hex() == signature
    assert PublicKey("whpk_" + _b64(public)).verify(bytes.fromhex(signature), bytes.fromhex(message))
    assert not PublicKey("whpk_" + _b64(public)).verify(bytes.fromhex(signature), b"other")


def test_a_64_byte_secret_key_is_the_seed_and_its_public_key() -> None:
    seed, public, _, _ = RFC8032[0]
    key = Ed25519Secret("whsk_" + _b64(seed + public))
    assert key.reveal() == "whsk_" + _b64(seed)  # written back as the 32-byte seed
    _, other_public, _, _ = RFC8032[1]
    with pytest.raises(SecretError, match="second half"):
        Ed25519Secret("whsk_" + _b64(seed + other_public))


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("whsk_" + base64.b64encode(b"x" * 31).decode(), "32 bytes"),
        ("whsk_not base64!", "base64"),
        ("whsec_" + base64.b64encode(b"x" * 32).decode(), "must start with 'whsk_'"),
    ],
)
def test_malformed_secret_keys_are_refused(text: str, problem: str) -> None:
    with pytest.raises(SecretError, match=problem):
        Ed25519Secret(text)


def test_new_keys_are_fresh_32_byte_seeds_and_never_shown_by_repr() -> None:
    first, second = new_ed25519_secret(), new_ed25519_secret()
    assert first != second
    assert len(base64.b64decode(first.removeprefix("whsk_"))) == 32
    key = Ed25519Secret(first)
    assert key.reveal() == first
    assert first not in repr(key) and first not in str(SigningSecrets((key,)))
    assert key.public_key() in repr(PublicKey(key.public_key()))  # a public key is no secret


def test_senders_take_whsec_or_whsk_and_receivers_whsec_or_whpk() -> None:
    ed = new_ed25519_secret()
    public = Ed25519Secret(ed).public_key()
    assert scheme_of(signing_secret(ed)) == "ed25519"
    assert scheme_of(signing_secret(HMAC_TEXT)) == "hmac"
    assert scheme_of(verifying_key(public)) == "ed25519"
    assert type(verifying_key(HMAC_TEXT)) is WebhookSecret
    with pytest.raises(SecretError, match="cannot sign"):
        signing_secret(public)
    with pytest.raises(SecretError, match="not the 'whsk_'"):
        verifying_key(ed)
    with pytest.raises(SecretError, match="must start with"):
        signing_secret("sk_live_123")


def test_an_hmac_secret_and_an_ed25519_key_of_the_same_bytes_differ() -> None:
    raw = base64.b64encode(b"k" * 32).decode()
    assert WebhookSecret("whsec_" + raw) != Ed25519Secret("whsk_" + raw)
    assert Ed25519Secret("whsk_" + raw) != WebhookSecret("whsec_" + raw)


def _endpoint(**fields: object) -> Endpoint:
    return Endpoint.model_validate({"name": "e", "url": "https://example.com/h", "events": ["#"], **fields})


def test_an_endpoint_signs_with_each_scheme_it_holds_a_key_for_unless_signing_says() -> None:
    ed = new_ed25519_secret()
    both = _endpoint(secret=[HMAC_TEXT, ed])
    assert both.signing is None
    assert [scheme_of(k) for k in signing_now(both.secret, both.signing, 0)] == ["hmac", "ed25519"]
    only_ed = _endpoint(secret=[HMAC_TEXT, ed], signing=["ed25519"])
    assert [k.reveal() for k in signing_now(only_ed.secret, only_ed.signing, 0)] == [ed]
    assert only_ed.model_dump(mode="json")["secret"] == [HMAC_TEXT, ed]  # the HMAC secret is kept, unused


@pytest.mark.parametrize(
    ("secret", "signing", "problem"),
    [
        ([HMAC_TEXT], ["ed25519"], "no 'whsk_' key"),
        ([new_ed25519_secret()], ["hmac"], "no 'whsec_' secret"),
        ([HMAC_TEXT], ["hmac", "hmac"], "each once"),
        ([HMAC_TEXT], [], "each once"),
        ([HMAC_TEXT], ["rsa"], "signing"),
    ],
)
def test_signing_names_schemes_with_keys(secret: list[str], signing: list[str], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        _endpoint(secret=secret, signing=signing)


def test_a_rotated_out_key_ends_within_its_scheme_and_the_other_scheme_signs_on() -> None:
    old, new = new_ed25519_secret(), new_ed25519_secret()
    secrets = SigningSecrets((signing_secret(new), signing_secret(old, 100.0), WebhookSecret(HMAC_TEXT)))
    assert len(signing_now(secrets, None, 99.0)) == 3
    assert [k.reveal() for k in signing_now(secrets, None, 100.0)] == [new, HMAC_TEXT]
    assert [k.reveal() for k in signing_now(secrets, ("ed25519",), 100.0)] == [new]
