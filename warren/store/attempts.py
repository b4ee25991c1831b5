"""The attempt log in the store: every delivery attempt, by event and by endpoint, kept for ``attempt_retention``.

A thin async shell over SQLAlchemy, one transaction per method. Rows are ``AttemptEntry`` records
(``warren/store/attempt_records.py``), keyed by their ``id``: ``add_many`` inserts or ignores, on SQLite and
PostgreSQL alike, so a batch delivered twice by RabbitMQ is stored once.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import orjson
from sqlalchemy import ColumnElement, and_, delete, or_, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncEngine

from warren.store.attempt_records import FAILED_OUTCOMES, AttemptEntry
from warren.store.engine import open_store_engine
from warren.store.tables import AttemptRow
from warren.topology.config import StoreSettings

__all__ = ["PURGE_BATCH", "AttemptLog", "AttemptPage", "decode_cursor", "encode_cursor"]

PURGE_BATCH = 1000  # rows deleted per transaction: a purge never holds a long lock

_FIELDS = tuple(AttemptEntry.__dataclass_fields__)


@dataclass(frozen=True)
class AttemptPage:
    """A page of one endpoint's attempts, newest first; ``next_cursor`` is None on the last page."""

    entries: list[AttemptEntry]
    next_cursor: str | None


def encode_cursor(entry: AttemptEntry) -> str:
    """The opaque cursor after ``entry``: its time and id (the page's sort key), in URL-safe base64."""
    return base64.urlsafe_b64encode(orjson.dumps([entry.at, entry.id])).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[float, str]:
    """(at, id) from a cursor; ValueError when it is not one this module made."""
    try:
        at, ident = orjson.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, TypeError, orjson.JSONDecodeError):
        raise ValueError("not a cursor of this list: pass next_cursor as it was given") from None
    if isinstance(at, bool) or not isinstance(at, int | float) or not isinstance(ident, str):
        raise ValueError("not a cursor of this list: pass next_cursor as it was given")
    return float(at), ident


def _clean(value: Any) -> Any:
    """PostgreSQL text holds no NUL character: one in a record (the JSON allows it) becomes U+FFFD, in a text
    field and in the values of a mapping (the response's headers)."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {_clean(key): _clean(item) for key, item in value.items()}
    return value


def _row(entry: AttemptEntry) -> dict[str, Any]:
    return {key: _clean(value) for key, value in asdict(entry).items()}


def _entry(row: Any) -> AttemptEntry:
    return AttemptEntry(**{name: getattr(row, name) for name in _FIELDS})


class AttemptLog:
    """The attempt log of one deployment (``store.url``)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    @classmethod
    async def open(cls, settings: StoreSettings) -> AttemptLog:
        """The log in the store of ``settings``, migrated first when ``store.migrate`` is on."""
        return cls(await open_store_engine(settings))

    async def close(self) -> None:
        await self.engine.dispose()

    async def add_many(self, entries: Sequence[AttemptEntry]) -> int:
        """Store ``entries`` in one transaction, each id once (ones stored already are left as they are);
        how many rows were new."""
        rows = list({entry.id: _row(entry) for entry in entries}.values())
        if not rows:
            return 0
        dialect = postgresql if self.engine.dialect.name == "postgresql" else sqlite
        statement = dialect.insert(AttemptRow).on_conflict_do_nothing(index_elements=["id"])
        async with self.engine.begin() as connection:
            result = await connection.execute(statement.returning(AttemptRow.id), rows)
            return len(result.all())

    async def for_event(self, event_id: str) -> list[AttemptEntry]:
        """Every attempt of one event, across endpoints, in time order (then attempt number, then endpoint)."""
        query = (
            select(AttemptRow)
            .where(AttemptRow.event_id == event_id)
            .order_by(AttemptRow.at, AttemptRow.attempt, AttemptRow.endpoint, AttemptRow.id)
        )
        async with self.engine.connect() as connection:
            rows = (await connection.execute(query)).all()
        return [_entry(row) for row in rows]

    async def for_endpoint(
        self,
        endpoint: str,
        *,
        failed_only: bool = False,
        since: float | None = None,
        until: float | None = None,
        limit: int = 50,
        cursor: str | None = None,
        tenant: str | None = None,
    ) -> AttemptPage:
        """One endpoint's attempts, newest first, ``limit`` at a time from ``cursor`` (``next_cursor`` of the
        page before). ``since`` is inclusive, ``until`` is not; ``failed_only`` keeps every outcome but delivered;
        ``tenant`` keeps only that tenant's. ValueError for a cursor this module did not make."""
        conditions: list[ColumnElement[bool]] = [AttemptRow.endpoint == endpoint]
        if tenant is not None:
            conditions.append(AttemptRow.tenant == tenant)
        if failed_only:
            conditions.append(AttemptRow.outcome.in_(sorted(FAILED_OUTCOMES)))
        if since is not None:
            conditions.append(AttemptRow.at >= since)
        if until is not None:
            conditions.append(AttemptRow.at < until)
        if cursor is not None:
            at, ident = decode_cursor(cursor)
            conditions.append(or_(AttemptRow.at < at, and_(AttemptRow.at == at, AttemptRow.id < ident)))
        query = (
            select(AttemptRow).where(*conditions).order_by(AttemptRow.at.desc(), AttemptRow.id.desc()).limit(limit + 1)
        )
        async with self.engine.connect() as connection:
            rows = (await connection.execute(query)).all()
        entries = [_entry(row) for row in rows[:limit]]
        more = len(rows) > limit
        return AttemptPage(entries, encode_cursor(entries[-1]) if more and entries else None)

    async def purge_older_than(self, moment: float, *, batch: int = PURGE_BATCH) -> int:
        """Delete the attempts made before ``moment``, ``batch`` rows per transaction; how many in all."""
        total = 0
        while True:
            oldest = select(AttemptRow.id).where(AttemptRow.at < moment).order_by(AttemptRow.at).limit(batch)
            async with self.engine.begin() as connection:
                ids = list((await connection.execute(oldest)).scalars())
                if ids:
                    await connection.execute(delete(AttemptRow).where(AttemptRow.id.in_(ids)))
            total += len(ids)
            if len(ids) < batch:
                return total
