"""Events from JSON lines (``{"type", "data", "id"?, "key"?, "sequence"?, "tenant"?}`` per line), with line numbers."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from warren.broker.events import Event
from warren.core.errors import EventError
from warren.core.strict_json import DUPLICATE_KEY, WRITTEN_DEPTH, duplicate_key, unwritable

__all__ = ["BadLine", "aread_event_lines", "event_from_fields", "parse_event_line", "read_event_lines"]

_FIELDS = {"type", "data", "id", "key", "sequence", "tenant"}


@dataclass(frozen=True)
class BadLine:
    line: int
    reason: str


def event_from_fields(fields: dict[str, Any]) -> Event:
    """An Event from a decoded JSON object; EventError names the first problem."""
    unknown = set(fields) - _FIELDS
    if unknown:
        raise EventError(f"unknown field(s) {', '.join(sorted(unknown))} (allowed: {', '.join(sorted(_FIELDS))})")
    if "type" not in fields or not isinstance(fields["type"], str):
        raise EventError("'type' is required and must be a string")
    if "data" not in fields:
        raise EventError("'data' is required")
    kwargs: dict[str, Any] = {"type": fields["type"], "data": fields["data"]}
    for name, kind in (("id", str), ("key", str), ("sequence", int), ("tenant", str)):
        value = fields.get(name)
        if value is None:
            continue
        if not isinstance(value, kind) or isinstance(value, bool):
            raise EventError(f"'{name}' must be a {kind.__name__}")
        kwargs[name] = value
    return Event(**kwargs)


def parse_event_line(number: int, raw: str | bytes) -> Event | BadLine | None:
    """Line ``number`` as an Event, or a BadLine saying why not; None for a blank line."""
    if not raw.strip():
        return None
    try:
        fields = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return BadLine(number, f"not JSON: {exc}")
    if not isinstance(fields, dict):
        return BadLine(number, "not a JSON object")
    duplicate = duplicate_key(raw, fields)
    if duplicate is not None:
        return BadLine(number, DUPLICATE_KEY.format(duplicate))
    if unwritable(raw, fields):
        return BadLine(number, f"nested too deeply to publish (at most {WRITTEN_DEPTH - 1} levels)")
    try:
        return event_from_fields(fields)
    except EventError as exc:
        return BadLine(number, str(exc))


def read_event_lines(lines: Iterable[str | bytes]) -> Iterator[Event | BadLine]:
    """Each non-blank line as an Event, or a BadLine saying which line and why; blank lines are skipped."""
    for number, raw in enumerate(lines, start=1):
        if (item := parse_event_line(number, raw)) is not None:
            yield item


async def aread_event_lines(lines: AsyncIterable[bytes]) -> AsyncIterator[Event | BadLine]:
    """``read_event_lines`` for lines that arrive over time (a live pipe)."""
    number = 0
    async for raw in lines:
        number += 1
        if (item := parse_event_line(number, raw)) is not None:
            yield item
