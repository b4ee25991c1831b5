"""An endpoint's ``filter`` as a configuration field: the JSON object of warren/core/filters.py, checked and compiled
when the endpoint is loaded or created, written back as the object it was given.

Given as a TOML table, a JSON object (the admin API, ``warren endpoint create --filter``) or a JSON text (an
environment variable). An empty object is no filter, as leaving it out is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

import orjson
from pydantic import PlainSerializer, PlainValidator

from warren.core.filters import EventFilter, FilterError

__all__ = ["PayloadFilter", "filter_source"]


def _parse(value: Any) -> EventFilter | None:
    if value is None or isinstance(value, EventFilter):
        return value
    if isinstance(value, str | bytes):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError as exc:
            raise ValueError(f"a filter is a JSON object; this text is not JSON: {exc}") from None
    if isinstance(value, Mapping) and not value:
        return None
    try:
        return EventFilter(value)
    except FilterError as exc:
        raise ValueError(str(exc)) from None


def filter_source(value: EventFilter | None) -> dict[str, Any] | None:
    """The filter as the JSON object it was given (None: no filter)."""
    return None if value is None else value.source


PayloadFilter = Annotated[EventFilter | None, PlainValidator(_parse), PlainSerializer(filter_source)]
