"""The receiving toolkit: verify inbound webhooks, queue them, and apply each event's effect exactly once.

The pieces, each usable on its own:

- ``verify_standard_webhook`` and the ``verifiers`` (Standard Webhooks, HMAC-SHA256 of the body, token
  header, none) — pure functions of headers, body and secrets;
- ``verification_middleware`` / ``verified_handler`` for aiohttp (``401`` with a JSON reason);
- ``IdempotentConsumer`` over a SQLite or PostgreSQL ``Store``: duplicates and stale sequences are dropped
  and the effect commits in the same transaction as the record of the event;
- ``build_receiver_app`` (``warren receive``) and ``Inbox`` (``warren inbox``): accept fast into RabbitMQ,
  process asynchronously with retries through the delay chain and a DLQ.
"""

from __future__ import annotations

from warren.receiving.errors import HandlerError, IdentityError, NonRetryable, StoreError, VerificationError
from warren.receiving.idempotency import DEFAULT_RETENTION, IdempotentConsumer, Outcome
from warren.receiving.identity import Identity, identify
from warren.receiving.inbox import Inbox
from warren.receiving.messages import InboundEvent
from warren.receiving.middleware import verification_middleware, verified_handler
from warren.receiving.receiver import build_receiver_app
from warren.receiving.signatures import verify_standard_webhook
from warren.receiving.stores import Store, Transaction, open_store
from warren.receiving.verifiers import (
    HmacSha256Verifier,
    NoVerifier,
    StandardWebhooksVerifier,
    TokenVerifier,
    Verifier,
    verifier_for,
)

__all__ = [
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
]
