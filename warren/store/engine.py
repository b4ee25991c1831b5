"""Opening the store: ``store.url`` to an async SQLAlchemy engine, and the schema brought to the latest revision.

``sqlite:///PATH`` runs on aiosqlite, ``postgresql://...`` on asyncpg (``pip install 'warren-webhooks[postgres]'``).
Migrations are Alembic's, run on the engine's own connection: on start-up (``store.migrate``) or by
``warren store migrate``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, event
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from warren.core.errors import WarrenError

if TYPE_CHECKING:
    from warren.topology.config import StoreSettings

__all__ = [
    "StoreUnavailable",
    "current_revision",
    "driver_url",
    "head_revision",
    "migrate",
    "open_engine",
    "open_store_engine",
]

_SCRIPTS = "warren.store:migrations"
VERSION_TABLE = "warren_store_version"


class StoreUnavailable(WarrenError):
    """The store cannot be reached, or its schema is not the one this Warren expects."""


def driver_url(url: str) -> str:
    """``store.url`` with the async driver SQLAlchemy needs: ``sqlite+aiosqlite://``, ``postgresql+asyncpg://``."""
    scheme = urlsplit(url).scheme
    if scheme == "sqlite":
        return "sqlite+aiosqlite" + url[len("sqlite") :]
    if scheme in ("postgresql", "postgres"):
        return "postgresql+asyncpg" + url[len(scheme) :]
    raise StoreUnavailable(f"store.url: unsupported scheme {scheme!r} (sqlite:///PATH or postgresql://...)")


def _sqlite_foreign_keys(dbapi_connection: Any, _: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def open_engine(url: str) -> AsyncEngine:
    """An engine for ``store.url`` (no connection is made until first use)."""
    try:
        engine = create_async_engine(driver_url(url), pool_pre_ping=True)
    except ModuleNotFoundError as exc:  # asyncpg is an extra
        raise StoreUnavailable(f"store.url needs {exc.name}: pip install 'warren-webhooks[postgres]'") from None
    if engine.dialect.name == "sqlite":
        event.listen(engine.sync_engine, "connect", _sqlite_foreign_keys)
    return engine


def _alembic_config(connection: Connection) -> Config:
    config = Config()
    config.set_main_option("script_location", _SCRIPTS)
    config.attributes["connection"] = connection
    return config


def head_revision() -> str | None:
    return ScriptDirectory.from_config(_alembic_config(None)).get_current_head()  # type: ignore[arg-type]


def _current(connection: Connection) -> str | None:
    return MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE}).get_current_revision()


async def current_revision(engine: AsyncEngine) -> str | None:
    """The revision the database is at (None: never migrated)."""
    async with engine.connect() as connection:
        return await connection.run_sync(_current)


async def migrate(engine: AsyncEngine, revision: str = "head") -> tuple[str | None, str | None]:
    """Upgrade the schema to the latest revision (or to ``revision``: a test builds an earlier release's schema
    that way); (revision before, revision after). Idempotent."""
    try:
        async with engine.begin() as connection:
            before = await connection.run_sync(_current)
            await connection.run_sync(lambda sync: command.upgrade(_alembic_config(sync), revision))
            after = await connection.run_sync(_current)
    except OSError as exc:
        raise StoreUnavailable(f"cannot reach the store: {exc}") from exc
    return before, after


async def open_store_engine(settings: StoreSettings) -> AsyncEngine:
    """The engine of ``settings.url``, migrated first when ``store.migrate`` is on (disposed if that fails)."""
    if settings.url is None:
        raise StoreUnavailable("no store configured: set store.url (sqlite:///PATH or postgresql://...)")
    engine = open_engine(settings.url)
    try:
        if settings.migrate:
            await migrate(engine)
    except BaseException:
        await engine.dispose()
        raise
    return engine
