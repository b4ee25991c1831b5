"""The event-type catalog the ingest API checks events against: the file's ``[[event_types]]`` always, and the
ones declared through the admin API when it runs (it sets ``load``: they are read from the store every
``REFRESH`` seconds, and at once after a change made through this process).

A violation is a 422 ``invalid_event`` naming the first error's path (``data.amount``, ``events[2].data.amount``)
and nothing is published; with ``[catalog] on_invalid = "warn"`` the event is accepted and the violation
logged.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from aiohttp import web

from warren.api.ingest.errors import INVALID, ApiError, FieldProblem
from warren.api.ingest.schemas import EventIn
from warren.topology.catalog import Catalog, EventTypeSpec
from warren.topology.config import WarrenConfig

__all__ = ["CATALOG", "REFRESH", "CatalogSource"]

log = logging.getLogger("warren.api")

REFRESH = 5.0  # seconds a stored catalog is used before it is read again


class CatalogSource:
    """The catalog now: the file's, merged with the store's as last read."""

    def __init__(self, config: WarrenConfig, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.load: Callable[[], Awaitable[tuple[EventTypeSpec, ...]]] | None = None
        self._clock = clock
        self._catalog = config.event_catalog()
        self._read_at: float | None = None

    def stale(self) -> None:
        """Read the store again on the next use (after a change through this process)."""
        self._read_at = None

    async def current(self) -> Catalog:
        if self.load is None:
            return self._catalog
        now = self._clock()
        if self._read_at is None or now - self._read_at >= REFRESH:
            try:
                self._catalog = self.config.event_catalog(await self.load())
                self._read_at = now
            except Exception as exc:  # the store is away: the catalog as last read, the file's at least
                log.warning("event types not read from the store (the last read ones are used): %s", exc)
        return self._catalog

    async def check(self, items: Sequence[EventIn], *, batch: bool) -> None:
        """422 for the first event whose data breaks its type's schema (when the catalog rejects)."""
        catalog = await self.current()
        for index, item in enumerate(items):
            violation = catalog.violation(item.type, item.data)
            if violation is None:
                continue
            path = f"events[{index}].{violation.path}" if batch else violation.path
            text = f"{path}: {violation.message} (schema of {item.type!r}, version {violation.version})"
            if catalog.on_invalid == "warn":
                log.warning("%s; accepted (catalog.on_invalid = warn)", text)
                continue
            raise ApiError(422, INVALID, text, fields=[FieldProblem(path, violation.message)])


CATALOG = web.AppKey("catalog", CatalogSource)
