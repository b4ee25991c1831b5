"""The store's tables as SQLAlchemy 2 declarative models. The schema itself is made by the Alembic migrations
in ``store/migrations/versions``; a test holds the two in step.

Times are seconds since the epoch (a float), the same on SQLite and PostgreSQL.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, Boolean, Float, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

__all__ = ["ApiKeyRow", "AttemptRow", "Base", "EndpointRow", "EventTypeRow", "SecretRow", "TenantRow"]

NAME = 63  # an endpoint or tenant name: a token of at most 63 characters (warren/topology/config_fields.py)


class Base(DeclarativeBase):
    pass


class TenantRow(Base):
    """A platform's customer; endpoints that name it receive only its events."""

    __tablename__ = "warren_tenants"

    name: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    created_at: Mapped[float] = mapped_column(Float)


class EndpointRow(Base):
    """An endpoint: ``options`` holds every field of topology's Endpoint other than name, url, events, secret."""

    __tablename__ = "warren_endpoints"

    name: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    tenant: Mapped[str | None] = mapped_column(String(NAME), ForeignKey("warren_tenants.name"), index=True)
    url: Mapped[str] = mapped_column(Text)
    events: Mapped[list[str]] = mapped_column(JSON)
    options: Mapped[dict[str, Any]] = mapped_column(JSON)
    managed_by: Mapped[str] = mapped_column(String(8), index=True)  # "api" or "file" (warren setup)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)
    version: Mapped[int] = mapped_column(Integer, default=1)


class SecretRow(Base):
    """One signing secret of an endpoint, sealed; ``expires_at`` is set on the one a rotation replaced.
    ``public_key`` (``whpk_``) is set on an Ed25519 key, null on an HMAC secret: a rotation replaces the keys of
    its own scheme only, and the admin API shows public keys without opening a sealed one."""

    __tablename__ = "warren_endpoint_secrets"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    endpoint: Mapped[str] = mapped_column(
        String(NAME), ForeignKey("warren_endpoints.name", ondelete="CASCADE"), index=True
    )
    sealed: Mapped[str] = mapped_column(Text)
    created_at: Mapped[float] = mapped_column(Float)
    expires_at: Mapped[float | None] = mapped_column(Float, default=None)
    public_key: Mapped[str | None] = mapped_column(Text, default=None)


class AttemptRow(Base):
    """One delivery attempt of the attempt log (``warren/store/attempt_records.py`` describes each field).

    The record's own ``id`` is the key, so a batch stored twice stores each record once. No foreign key to the
    endpoint: the log outlives a deleted endpoint (until retention), and file endpoints need not be stored.
    """

    __tablename__ = "warren_attempts"
    __table_args__ = (
        Index("ix_warren_attempts_event", "event_id", "attempt", "at"),
        Index("ix_warren_attempts_endpoint", "endpoint", "at"),
        Index("ix_warren_attempts_tenant", "tenant", "at"),
        Index("ix_warren_attempts_at", "at"),  # retention purges by time alone
    )

    id: Mapped[str] = mapped_column(String, primary_key=True)
    event_id: Mapped[str] = mapped_column(String)
    tenant: Mapped[str | None] = mapped_column(String)
    endpoint: Mapped[str] = mapped_column(String)
    attempt: Mapped[int] = mapped_column(Integer)
    at: Mapped[float] = mapped_column(Float)
    status: Mapped[int | None] = mapped_column(Integer)
    duration_ms: Mapped[float] = mapped_column(Float)
    outcome: Mapped[str] = mapped_column(String(16))
    error: Mapped[str | None] = mapped_column(Text)
    next_delay_s: Mapped[float | None] = mapped_column(Float)
    worker: Mapped[str] = mapped_column(String)
    response: Mapped[str | None] = mapped_column(Text)
    response_headers: Mapped[dict[str, str] | None] = mapped_column(JSON)


class ApiKeyRow(Base):
    """A tenant-scoped API key: confined to one tenant's endpoints, attempts and events. Only the SHA-256 of
    its secret part is kept (the key is shown once, when it is made); ``revoked_at`` is set when it is revoked
    (the row stays, so a revoked key is told apart from one that never was)."""

    __tablename__ = "warren_api_keys"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(NAME), ForeignKey("warren_tenants.name"), index=True)
    name: Mapped[str | None] = mapped_column(Text)
    digest: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[float] = mapped_column(Float)
    expires_at: Mapped[float | None] = mapped_column(Float, default=None)
    revoked_at: Mapped[float | None] = mapped_column(Float, default=None)


class EventTypeRow(Base):
    """One version of an event type declared through the admin API (the file's live in the file)."""

    __tablename__ = "warren_event_types"

    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    description: Mapped[str] = mapped_column(Text)
    schema: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    deprecated: Mapped[bool] = mapped_column(Boolean)
    updated_at: Mapped[float] = mapped_column(Float)
