"""Alembic environment, shared by the three lines of migrations (``store/engine.py``): migrations run on the
connection ``store/engine.py`` hands over (async engine, sync callback), so no alembic.ini and no second
connection string exist."""

from __future__ import annotations

from alembic import context

from warren.store.tables import Base


def run_migrations() -> None:
    attributes = context.config.attributes
    context.configure(
        connection=attributes["connection"],
        target_metadata=Base.metadata,
        render_as_batch=True,  # SQLite alters a table by copying it
        # Not alembic_version: the database may hold the platform's own. One table per line (store/engine.py).
        version_table=attributes.get("version_table", "warren_store_version"),
        version_table_schema=attributes.get("schema"),
    )
    with context.begin_transaction():
        context.run_migrations()


if getattr(context, "config", None) is not None:  # run by Alembic (not merely imported by a package walk)
    run_migrations()
