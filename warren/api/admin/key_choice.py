"""Which signing keys an endpoint gets, and what of them is shown: HMAC secrets (``whsec_``) and Ed25519 keys
(``whsk_``, with their public ``whpk_``). Pure, for the admin API and ``warren endpoint``.

An Ed25519 secret key is shown once, in the answer that made it, and never again (a reveal shows HMAC secrets
only): a receiver needs only its public key, which every view of the endpoint shows.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from warren.api.ingest.errors import ApiError
from warren.store.records import StoredSecret, new_signing_secret
from warren.topology.secrets import SecretError, SigningSecrets, WebhookSecret
from warren.topology.signing_keys import (
    ED25519,
    HMAC,
    SCHEMES,
    Ed25519Secret,
    Scheme,
    new_ed25519_secret,
    scheme_of,
    signing_secret,
)

__all__ = ["INVALID_KEY", "keys_to_make", "new_key", "public_keys", "rotated_secrets", "shown_keys", "signs_hidden"]

INVALID_KEY = "invalid_endpoint"


def _made(scheme: Scheme) -> str:
    return new_ed25519_secret() if scheme == ED25519 else new_signing_secret()


def _scheme(text: str) -> Scheme:
    try:
        return scheme_of(signing_secret(text))
    except SecretError as exc:
        raise ApiError(422, INVALID_KEY, f"secret: {exc}") from None


def keys_to_make(data: dict[str, Any]) -> list[str]:
    """A new endpoint's keys: the ``secret`` given (if any), and a new key for each scheme ``signing`` names that
    it does not cover; an HMAC secret when neither is given. HMAC first."""
    given = data.get("secret")
    texts = [given] if given else []
    covered = {_scheme(t) for t in texts}
    for scheme in data.get("signing") or (() if texts else (HMAC,)):
        if scheme not in covered:
            texts.append(_made(scheme))
            covered.add(scheme)
    return sorted(texts, key=lambda t: SCHEMES.index(_scheme(t)))


def new_key(secret: str | None, kind: Scheme | None, current: Iterable[WebhookSecret] = ()) -> str:
    """A rotation's new key: ``secret`` when given (of ``kind`` when that is given too), else a new one of ``kind``;
    without a kind, HMAC, unless the endpoint holds Ed25519 keys only (then its Ed25519 key rotates)."""
    if secret is None:
        held = {scheme_of(k) for k in current}
        return _made(kind or (ED25519 if held == {ED25519} else HMAC))
    if kind is not None and _scheme(secret) != kind:
        raise ApiError(422, INVALID_KEY, f"secret is not a {kind} key ({'whsk_' if kind == ED25519 else 'whsec_'}...)")
    _scheme(secret)
    return secret


def rotated_secrets(current: Iterable[WebhookSecret], new: str, keep: float, now: float) -> SigningSecrets:
    """The keys after a rotation to ``new``: it first, then the current keys of its scheme ending within ``keep``
    seconds (one already ending keeps its end; none with no grace), then the other scheme's keys as they were."""
    made = signing_secret(new)
    scheme = scheme_of(made)
    kept: list[WebhookSecret] = []
    for key in current:
        if scheme_of(key) != scheme:
            kept.append(key)
        elif keep > 0:
            end = now + keep if key.expires_at is None else min(key.expires_at, now + keep)
            kept.append(signing_secret(key.reveal(), end))
    return SigningSecrets((made, *kept))


def shown_keys(texts: Sequence[str]) -> dict[str, str | None]:
    """The answer's fields for keys just made: ``secret`` (the HMAC secret, else the Ed25519 key), ``secret_key``
    (the ``whsk_``, this once) and ``public_key`` (its ``whpk_``)."""
    ed = next((Ed25519Secret(t) for t in texts if t.startswith("whsk_")), None)
    hmac_secret = next((t for t in texts if not t.startswith("whsk_")), None)
    return {
        "secret": hmac_secret or (ed.reveal() if ed else None),
        "secret_key": ed.reveal() if ed else None,
        "public_key": ed.public_key() if ed else None,
    }


def signs_hidden(text: str) -> bool:
    """Whether a reveal leaves this key out: an Ed25519 secret key is shown only when it is made."""
    return text.startswith("whsk_")


def public_keys(stored: Sequence[StoredSecret] | None, served: Iterable[WebhookSecret] = ()) -> list[StoredSecret]:
    """The Ed25519 public keys of an endpoint: the store's (``stored``), or, for a file endpoint (``stored`` None),
    those of the keys it is served with."""
    if stored is not None:
        return [s for s in stored if s.public_key is not None]
    return [StoredSecret(0, 0.0, key.expires_at, key.public_key()) for key in served if isinstance(key, Ed25519Secret)]
