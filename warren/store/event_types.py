"""The event types declared through the admin API, in the store: put (added or replaced), listed, removed.

The file's ``[[event_types]]`` are not stored: they are read from the file, and win over a stored entry of the
same name and version (warren/topology/catalog.py merges them).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker

from warren.store.tables import EventTypeRow
from warren.topology.catalog import EventTypeSpec

__all__ = ["EventTypeStore"]


def _spec(row: EventTypeRow) -> EventTypeSpec:
    return EventTypeSpec.model_validate(
        {
            "name": row.name,
            "version": row.version,
            "description": row.description,
            "json_schema": row.schema,
            "deprecated": row.deprecated,
        }
    )


class EventTypeStore:
    def __init__(self, engine: AsyncEngine, clock: Callable[[], float] = time.time) -> None:
        self._sessions = async_sessionmaker(engine, expire_on_commit=False)
        self._clock = clock

    async def put(self, spec: EventTypeSpec) -> bool:
        """Add or replace one version of a type; True when it is new."""
        async with self._sessions() as session, session.begin():
            row = await session.get(EventTypeRow, (spec.name, spec.version))
            new = row is None
            if row is None:
                row = EventTypeRow(name=spec.name, version=spec.version)
                session.add(row)
            row.description = spec.description
            row.schema = spec.json_schema
            row.deprecated = spec.deprecated
            row.updated_at = self._clock()
        return new

    async def all(self) -> tuple[EventTypeSpec, ...]:
        query = select(EventTypeRow).order_by(EventTypeRow.name, EventTypeRow.version)
        async with self._sessions() as session:
            return tuple(_spec(row) for row in await session.scalars(query))

    async def remove(self, name: str, version: int | None = None) -> int:
        """Remove one version of a type, or every version (``version`` None); how many were removed."""
        statement = delete(EventTypeRow).where(EventTypeRow.name == name)
        if version is not None:
            statement = statement.where(EventTypeRow.version == version)
        async with self._sessions() as session, session.begin():
            result = await session.execute(statement)
        return int(result.rowcount or 0)  # type: ignore[attr-defined]
