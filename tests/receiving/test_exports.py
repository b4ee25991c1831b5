"""What ``warren.receiving`` exports: the receiving toolkit's pieces, each usable on its own."""

from __future__ import annotations

from tests.support.exports import assert_exports


def test_receiving_exports_the_toolkit() -> None:
    assert_exports(
        "warren.receiving",
        {
            "DEFAULT_RETENTION",
            "HandlerError",
            "HmacSha256Verifier",
            "IdempotentConsumer",
            "Identity",
            "IdentityError",
            "InboundEvent",
            "Inbox",
            "NoVerifier",
            "NonRetryable",
            "Outcome",
            "StandardWebhooksVerifier",
            "Store",
            "StoreError",
            "TokenVerifier",
            "Transaction",
            "VerificationError",
            "Verifier",
            "build_receiver_app",
            "identify",
            "open_store",
            "verification_middleware",
            "verified_handler",
            "verifier_for",
            "verify_standard_webhook",
        },
    )
