"""Tenants in the store: a tenant exists once something names it (an endpoint, an API key)."""

from __future__ import annotations

from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession

from warren.store.tables import TenantRow

__all__ = ["ensure_tenant"]


async def ensure_tenant(session: AsyncSession, tenant: str | None, now: float) -> None:
    """Add ``tenant`` if it is missing. An insert that skips a row already there: requests for a new tenant
    come concurrently, and a look-then-add let all but one fail on the tenant's key (NameTaken on create,
    a 500 on update)."""
    if tenant is None:
        return
    dialect = session.get_bind().dialect.name
    insert = postgresql_insert if dialect == "postgresql" else sqlite_insert
    row = {"name": tenant, "created_at": now}
    await session.execute(insert(TenantRow).values(**row).on_conflict_do_nothing(index_elements=["name"]))
