"""Tenant-scoped API keys in the store: made (shown once), listed, revoked, and checked on each request.

A key reads ``wtk_<id>_<secret>``: ``id`` names its row (16 hex digits, shown in lists so a key can be told
apart and revoked), ``secret`` is 32 random bytes in URL-safe base64. The store keeps only the SHA-256 of the
whole key: the key carries 256 random bits, so a fast hash is enough (a slow password hash protects guessable
secrets, and this one cannot be guessed), and a stolen database gives no usable key.

A key is confined to its tenant: the admin API shows and changes only that tenant's endpoints and attempts, and
the ingest API publishes only its events (warren/api/admin/access.py). Pure parsing and hashing here, with a
thin async shell over SQLAlchemy.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker

from warren.core.moments import iso_utc
from warren.store.tables import ApiKeyRow
from warren.store.tenants import ensure_tenant

__all__ = ["KEY_PREFIX", "ApiKey", "ApiKeyStore", "key_digest", "key_id", "new_key"]

KEY_PREFIX = "wtk_"
_ID_DIGITS = 16
_HEX = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class ApiKey:
    """A key as lists show it: never its secret."""

    id: str
    tenant: str
    name: str | None
    created_at: float
    expires_at: float | None
    revoked_at: float | None

    def active(self, now: float) -> bool:
        return self.revoked_at is None and (self.expires_at is None or now < self.expires_at)

    def shown(self, now: float) -> dict[str, Any]:
        """What lists show of it, times in ISO 8601 (UTC): the admin API's answer and ``warren key --json``."""
        return {
            "id": self.id,
            "tenant": self.tenant,
            "name": self.name,
            "created_at": iso_utc(self.created_at) or "",
            "expires_at": iso_utc(self.expires_at),
            "revoked_at": iso_utc(self.revoked_at),
            "active": self.active(now),
        }


def new_key() -> tuple[str, str]:
    """A fresh key: (its id, the key itself)."""
    ident = secrets.token_hex(_ID_DIGITS // 2)
    return ident, f"{KEY_PREFIX}{ident}_{secrets.token_urlsafe(32)}"


def key_id(key: str) -> str | None:
    """The id a key names, or None when ``key`` does not have a key's form (an admin token, say)."""
    if not key.startswith(KEY_PREFIX) or len(key) < len(KEY_PREFIX) + _ID_DIGITS + 2:
        return None
    ident, separator = key[len(KEY_PREFIX) : len(KEY_PREFIX) + _ID_DIGITS], key[len(KEY_PREFIX) + _ID_DIGITS]
    if separator != "_" or not set(ident) <= _HEX:
        return None
    return ident


def key_digest(key: str) -> str:
    """What the store keeps of a key (text that is not UTF-8 hashes as its bytes: it matches no key)."""
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()


def _key(row: ApiKeyRow) -> ApiKey:
    return ApiKey(row.id, row.tenant, row.name, row.created_at, row.expires_at, row.revoked_at)


class ApiKeyStore:
    """The API keys of one deployment's store."""

    def __init__(self, engine: AsyncEngine, clock: Callable[[], float] = time.time) -> None:
        self._sessions = async_sessionmaker(engine, expire_on_commit=False)
        self._clock = clock

    async def create(
        self, tenant: str, *, name: str | None = None, expires_at: float | None = None
    ) -> tuple[ApiKey, str]:
        """A new key of ``tenant`` (the tenant is added if it is new): (the key as listed, the key itself, which
        is never shown again)."""
        ident, key = new_key()
        now = self._clock()
        row = ApiKeyRow(
            id=ident, tenant=tenant, name=name, digest=key_digest(key), created_at=now, expires_at=expires_at
        )
        async with self._sessions() as session, session.begin():
            await ensure_tenant(session, tenant, now)
            session.add(row)
        return _key(row), key

    async def list(self, tenant: str) -> list[ApiKey]:
        """Every key of ``tenant``, revoked ones too, oldest first."""
        query = select(ApiKeyRow).where(ApiKeyRow.tenant == tenant).order_by(ApiKeyRow.created_at, ApiKeyRow.id)
        async with self._sessions() as session:
            return [_key(row) for row in await session.scalars(query)]

    async def revoke(self, tenant: str, ident: str) -> ApiKey | None:
        """Revoke ``tenant``'s key ``ident`` from now on (again: no change); None when the tenant has no such key."""
        async with self._sessions() as session, session.begin():
            row = await session.get(ApiKeyRow, ident)
            if row is None or row.tenant != tenant:
                return None
            if row.revoked_at is None:
                row.revoked_at = self._clock()  # written at the commit that ends this block
            return _key(row)

    async def tenant_of(self, key: str) -> str | None:
        """The tenant of an active key (not revoked, not expired), else None: one lookup by the id it names, its
        digest compared in constant time."""
        ident = key_id(key)
        if ident is None:
            return None
        async with self._sessions() as session:
            row = await session.get(ApiKeyRow, ident)
        if row is None or not hmac.compare_digest(row.digest, key_digest(key)):
            return None
        return row.tenant if _key(row).active(self._clock()) else None
