"""Opening the store: ``store.url`` to an async SQLAlchemy engine, and the schema brought to the latest revision.

``sqlite:///PATH`` runs on aiosqlite, ``postgresql://...`` on asyncpg (``pip install 'warren-webhooks[postgres]'``).
Migrations are Alembic's, run on the engine's own connection: on start-up (``store.migrate``) or by
``warren store migrate``.

Three lines of migrations share the one Alembic environment (``migrations/env.py``), each with its own folder of
revisions and its own version table, so that a database migrates only the tables it holds: ``STORE`` (endpoints,
tenants, the attempt log), ``INGEST_KEYS`` (the ingest API's Idempotency-Keys, ``api.idempotency_store``) and
``RECEIVING`` (the receiving toolkit's processed messages and sequences, in the toolkit user's own database).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
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
    "INGEST_KEYS",
    "RECEIVING",
    "STORE",
    "Line",
    "StoreUnavailable",
    "current_revision",
    "driver_url",
    "head_revision",
    "migrate",
    "migrate_line",
    "open_engine",
    "open_store_engine",
]

_SCRIPTS = "warren.store:migrations"
_MIGRATIONS = Path(__file__).parent / "migrations"
VERSION_TABLE = "warren_store_version"


@dataclass(frozen=True)
class Line:
    """One line of migrations: a folder of revisions under ``store/migrations`` and the table that records it."""

    folder: str
    version_table: str


STORE = Line("versions", VERSION_TABLE)
INGEST_KEYS = Line("idempotency", "warren_api_idempotency_version")
RECEIVING = Line("receiving", "warren_inbox_version")


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


def _sqlite_serialised(dbapi_connection: Any, _: Any) -> None:
    # The driver opens no transaction behind our back (the "begin" listener says BEGIN IMMEDIATE); a writer
    # waits for another process's lock instead of failing; WAL lets readers go on beside the one writer.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA busy_timeout = 10000")
    cursor.execute("PRAGMA journal_mode = WAL")
    cursor.close()


def _begin_immediate(connection: Connection) -> None:
    connection.exec_driver_sql("BEGIN IMMEDIATE")


def open_engine(url: str, *, serialised: bool = False, dsn_as_is: bool = False) -> AsyncEngine:
    """An engine for ``store.url`` (no connection is made until first use).

    ``serialised`` (SQLite): every transaction begins with ``BEGIN IMMEDIATE``, taking the file's write lock at
    once, so that processes sharing the file queue (up to a 10 s busy timeout) instead of failing at commit;
    what the idempotency stores need for a read-then-write claim. ``dsn_as_is`` (PostgreSQL): the URL goes to
    ``asyncpg.connect`` unchanged, so that a query parameter means what it meant to asyncpg (a server setting
    such as ``?search_path=...``), as it did when those stores ran on asyncpg alone.
    """
    options: dict[str, Any] = {"pool_pre_ping": True}
    try:
        if dsn_as_is and urlsplit(url).scheme in ("postgresql", "postgres"):
            import asyncpg  # an extra: loaded only for a PostgreSQL URL

            options["async_creator"] = lambda: asyncpg.connect(url)
            engine = create_async_engine("postgresql+asyncpg://", **options)
        else:
            engine = create_async_engine(driver_url(url), **options)
    except ModuleNotFoundError as exc:  # asyncpg is an extra
        raise StoreUnavailable(
            f"{url.split(':', 1)[0]}:// needs {exc.name}: pip install 'warren-webhooks[postgres]'"
        ) from None
    if engine.dialect.name == "sqlite":
        event.listen(engine.sync_engine, "connect", _sqlite_foreign_keys)
        if serialised:
            event.listen(engine.sync_engine, "connect", _sqlite_serialised)
            event.listen(engine.sync_engine, "begin", _begin_immediate)
    return engine


def _alembic_config(connection: Connection | None, line: Line = STORE, schema: str | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", _SCRIPTS)
    config.set_main_option("path_separator", "os")
    config.set_main_option("version_locations", str(_MIGRATIONS / line.folder))
    config.attributes["connection"] = connection
    config.attributes["version_table"] = line.version_table
    config.attributes["schema"] = schema
    return config


def head_revision(line: Line = STORE) -> str | None:
    return ScriptDirectory.from_config(_alembic_config(None, line)).get_current_head()


def _current(connection: Connection, line: Line = STORE, schema: str | None = None) -> str | None:
    opts = {"version_table": line.version_table, "version_table_schema": schema}
    return MigrationContext.configure(connection, opts=opts).get_current_revision()


async def current_revision(engine: AsyncEngine, line: Line = STORE, schema: str | None = None) -> str | None:
    """The revision the database is at (None: never migrated)."""
    async with engine.connect() as connection:
        return await connection.run_sync(_current, line, schema)


def migrate_line(
    connection: Connection, line: Line, schema: str | None = None, revision: str = "head"
) -> tuple[str | None, str | None]:
    """Upgrade one line to its latest revision (or to ``revision``: a test builds an earlier release's schema that
    way) on a sync connection (inside its transaction); before, after.

    ``schema`` (PostgreSQL) puts the line's tables and its version table in that schema.
    """
    with _quiet_alembic(line is not STORE):
        before = _current(connection, line, schema)
        command.upgrade(_alembic_config(connection, line, schema), revision)
        return before, _current(connection, line, schema)


@contextmanager
def _quiet_alembic(quiet: bool) -> Iterator[None]:
    # The idempotency stores migrate on every start of `warren api` and `warren inbox`: Alembic's info lines
    # ("Context impl SQLiteImpl.") would be noise there; its warnings and errors still show.
    logger = logging.getLogger("alembic")
    level = logger.level
    if quiet:
        logger.setLevel(max(level, logging.WARNING))
    try:
        yield
    finally:
        logger.setLevel(level)


async def migrate(engine: AsyncEngine, line: Line = STORE, *, revision: str = "head") -> tuple[str | None, str | None]:
    """Upgrade the schema to the latest revision (or ``revision``); (revision before, revision after). Idempotent."""
    try:
        async with engine.begin() as connection:
            return await connection.run_sync(migrate_line, line, None, revision)
    except OSError as exc:
        raise StoreUnavailable(f"cannot reach the store: {exc}") from exc


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
