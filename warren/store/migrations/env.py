"""Alembic environment: migrations run on the connection ``store/engine.py`` hands over (async engine, sync
callback), so no alembic.ini and no second connection string exist."""

from __future__ import annotations

from alembic import context

from warren.store.tables import Base


def run_migrations() -> None:
    context.configure(
        connection=context.config.attributes["connection"],
        target_metadata=Base.metadata,
        render_as_batch=True,  # SQLite alters a table by copying it
        version_table="warren_store_version",  # not alembic_version: the database may hold the platform's own
    )
    with context.begin_transaction():
        context.run_migrations()


if getattr(context, "config", None) is not None:  # run by Alembic (not merely imported by a package walk)
    run_migrations()
