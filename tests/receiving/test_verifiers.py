"""The pluggable verifiers, each in the shape of the provider it exists for, and choosing one from config."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from typing import Any

import pytest

from warren.receiving.errors import VerificationError
from warren.receiving.verifiers import (
    HmacSha256Verifier,
    NoVerifier,
    StandardWebhooksVerifier,
    TokenVerifier,
    verifier_for,
)
from warren.topology.config import InboundSource
from warren.topology.secrets import SigningSecrets, WebhookSecret
from warren.transport.signing import signature_header

BODY = b'{"action":"opened","number":7}'
WH_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def digest(secret: str, body: bytes = BODY) -> bytes:
    return hmac.new(secret.encode(), body, hashlib.sha256).digest()


def source(**fields: Any) -> InboundSource:
    return InboundSource.model_validate({"name": "src", "handler": "pkg.mod:fn", **fields})


def rejected(verifier: Any, headers: dict[str, str], body: bytes = BODY) -> str:
    with pytest.raises(VerificationError) as caught:
        verifier.verify(headers, body)
    return str(caught.value.reason)


# --- HMAC of the body ----------------------------------------------------------------------------------------
GITHUB = HmacSha256Verifier((b"gh-secret",), "X-Hub-Signature-256", "hex", "sha256=")
SHOPIFY = HmacSha256Verifier((b"shop-secret",), "X-Shopify-Hmac-Sha256", "base64")
WOO = HmacSha256Verifier((b"woo-secret",), "X-WC-Webhook-Signature", "base64")


def test_github_shape_hex_with_prefix() -> None:
    signed = "sha256=" + digest("gh-secret").hex()
    GITHUB.verify({"X-Hub-Signature-256": signed}, BODY)
    # Hex is case-insensitive, and the header name too.
    GITHUB.verify({"x-hub-signature-256": "sha256=" + digest("gh-secret").hex().upper()}, BODY)
    # And the same header over another body, or made with another secret, is refused: the check is real
    assert rejected(GITHUB, {"X-Hub-Signature-256": signed}, BODY + b" ") == "no_matching_signature"
    assert rejected(GITHUB, {"X-Hub-Signature-256": "sha256=" + digest("other").hex()}) == "no_matching_signature"


def test_shopify_and_woocommerce_shape_base64() -> None:
    SHOPIFY.verify({"X-Shopify-Hmac-Sha256": base64.b64encode(digest("shop-secret")).decode()}, BODY)
    WOO.verify({"X-WC-Webhook-Signature": base64.b64encode(digest("woo-secret")).decode()}, BODY)
    # And each refuses the other's signature (another secret)
    assert rejected(SHOPIFY, {"X-Shopify-Hmac-Sha256": base64.b64encode(digest("woo-secret")).decode()}) == (
        "no_matching_signature"
    )
    assert rejected(WOO, {"X-WC-Webhook-Signature": base64.b64encode(digest("shop-secret")).decode()}) == (
        "no_matching_signature"
    )


def test_hmac_rejections_have_distinct_reasons() -> None:
    good = "sha256=" + digest("gh-secret").hex()
    assert rejected(GITHUB, {}) == "missing_signature"
    assert rejected(GITHUB, {"X-Hub-Signature-256": digest("gh-secret").hex()}) == "malformed_signature"
    assert rejected(GITHUB, {"X-Hub-Signature-256": "sha256=zz-not-hex"}) == "malformed_signature"
    assert rejected(GITHUB, {"X-Hub-Signature-256": good}, BODY + b"x") == "no_matching_signature"
    assert rejected(GITHUB, {"X-Hub-Signature-256": "sha256=" + digest("other").hex()}) == "no_matching_signature"
    assert rejected(SHOPIFY, {"X-Shopify-Hmac-Sha256": "***"}) == "malformed_signature"


def test_hmac_accepts_any_secret_during_rotation() -> None:
    rotating = HmacSha256Verifier((b"old", b"new"), "X-Sig", "hex")
    for secret in ("old", "new"):
        rotating.verify({"X-Sig": digest(secret).hex()}, BODY)
    assert rejected(rotating, {"X-Sig": digest("neither").hex()}) == "no_matching_signature"


# --- token header -------------------------------------------------------------------------------------------------
TELEGRAM = TokenVerifier((b"bot-secret-token",), "X-Telegram-Bot-Api-Secret-Token")


def test_telegram_shape_token() -> None:
    TELEGRAM.verify({"X-Telegram-Bot-Api-Secret-Token": "bot-secret-token"}, b"{}")
    assert rejected(TELEGRAM, {}) == "missing_token"
    assert rejected(TELEGRAM, {"X-Telegram-Bot-Api-Secret-Token": "bot-secret-tokeN"}) == "invalid_token"
    assert rejected(TELEGRAM, {"X-Telegram-Bot-Api-Secret-Token": "bot-secret-token-longer"}) == "invalid_token"


def test_the_token_header_is_a_secret_header() -> None:
    assert TELEGRAM.secret_headers == ("X-Telegram-Bot-Api-Secret-Token",)
    assert GITHUB.secret_headers == ()


# --- none and standard webhooks -----------------------------------------------------------------------------
def test_none_accepts_anything() -> None:
    NoVerifier().verify({}, b"anything")


def test_standard_webhooks_verifier_uses_its_clock_and_tolerance() -> None:
    secrets = SigningSecrets((WebhookSecret(WH_SECRET),))
    ts = 1_700_000_000
    headers = {
        "webhook-id": "m",
        "webhook-timestamp": str(ts),
        "webhook-signature": signature_header(secrets, "m", ts, BODY),
    }
    StandardWebhooksVerifier(secrets, 60, lambda: ts + 59).verify(headers, BODY)
    assert rejected(StandardWebhooksVerifier(secrets, 60, lambda: ts + 61), headers) == "timestamp_too_old"


def test_secrets_stay_out_of_repr() -> None:
    assert "gh-secret" not in repr(GITHUB)
    assert "bot-secret" not in repr(TELEGRAM)


# --- from the configuration ---------------------------------------------------------------------------------
def test_verifier_for_each_configured_kind() -> None:
    gh = verifier_for(
        source(
            verifier="hmac-sha256",
            secret="gh-secret-0123456789",
            header="X-Hub-Signature-256",
            signature_prefix="sha256=",
            id_header="X-GitHub-Delivery",
        )
    )
    gh.verify({"X-Hub-Signature-256": "sha256=" + digest("gh-secret-0123456789").hex()}, BODY)
    tg = verifier_for(
        source(
            verifier="token",
            secret=["old-token-0123456789", "new-token-0123456789"],
            header="X-Token",
            id_field="update_id",
        )
    )
    tg.verify({"X-Token": "new-token-0123456789"}, b"{}")
    assert verifier_for(source(verifier="none", id_field="id")).kind == "none"
    now = int(time.time())
    sw = verifier_for(source(verifier="standard-webhooks", secret=WH_SECRET, tolerance="1m"))
    secrets = SigningSecrets((WebhookSecret(WH_SECRET),))
    sw.verify(
        {
            "webhook-id": "m",
            "webhook-timestamp": str(now),
            "webhook-signature": signature_header(secrets, "m", now, BODY),
        },
        BODY,
    )
    # And each built verifier refuses what it must: a wrong token, a Standard Webhooks signature over another body
    assert rejected(tg, {"X-Token": "stale-token"}, b"{}") == "invalid_token"
    other_body = signature_header(secrets, "m", now, b"{}")
    stale = {"webhook-id": "m", "webhook-timestamp": str(now), "webhook-signature": other_body}
    assert rejected(sw, stale) == "no_matching_signature"


def test_a_secret_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHOP_SECRET", "from-env-0123456789")
    verifier = verifier_for(
        source(
            verifier="hmac-sha256",
            secret="env:SHOP_SECRET",
            header="X-Shopify-Hmac-Sha256",
            encoding="base64",
            id_header="X-Shopify-Webhook-Id",
        )
    )
    verifier.verify({"X-Shopify-Hmac-Sha256": base64.b64encode(digest("from-env-0123456789")).decode()}, BODY)
    # And the reference itself is not the secret
    signed_with_reference = base64.b64encode(digest("env:SHOP_SECRET")).decode()
    assert rejected(verifier, {"X-Shopify-Hmac-Sha256": signed_with_reference}) == "no_matching_signature"
