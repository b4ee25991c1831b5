"""Portal sessions: a short-lived credential for one tenant, minted by the platform's backend (with an admin
token) and handed to that tenant's browser, like a tenant key that ends by itself.

A session is ``wps_`` and a Fernet token (the store's keys: warren/store/keys.py) of ``{"kind":
"portal-session", "tenant": ..., "exp": ...}``: authenticated and encrypted, opened with any of the store's
keys (so they rotate together), and nothing is stored. It cannot be revoked before it ends; keep it short
(minutes). Pure, given the sealer and the time.
"""

from __future__ import annotations

import orjson

from warren.store.keys import Sealer, StoreKeyError

__all__ = ["SESSION_PREFIX", "mint_session", "session_tenant"]

SESSION_PREFIX = "wps_"
_KIND = "portal-session"


def mint_session(sealer: Sealer, tenant: str, expires_at: float) -> str:
    """A session of ``tenant`` that works until ``expires_at`` (epoch seconds)."""
    claims = orjson.dumps({"kind": _KIND, "tenant": tenant, "exp": expires_at}).decode()
    return SESSION_PREFIX + sealer.seal(claims)


def session_tenant(sealer: Sealer, token: str, now: float) -> str | None:
    """The tenant of a session that has not ended, else None (not a session, forged, sealed with a key the store
    no longer has, or over)."""
    if not token.startswith(SESSION_PREFIX):
        return None
    try:
        claims = orjson.loads(sealer.open(token[len(SESSION_PREFIX) :]))
    except (StoreKeyError, orjson.JSONDecodeError, UnicodeError):
        return None
    if not isinstance(claims, dict) or claims.get("kind") != _KIND:
        return None
    tenant, ends = claims.get("tenant"), claims.get("exp")
    if not isinstance(tenant, str) or isinstance(ends, bool) or not isinstance(ends, int | float) or now >= ends:
        return None
    return tenant
