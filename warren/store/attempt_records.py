"""The attempt log's wire format: what a worker publishes on ``{prefix}.attempts`` and the writer stores.

One AMQP message carries a batch: ``{"v": 1, "attempts": [record, ...]}`` (JSON, content type
``application/json``, persistent). A record is one finished delivery attempt:

- ``id``: unique per record (the worker makes it), so a batch stored twice (the writer died after its commit
  and before its ack) stores each record once;
- ``event_id``, ``tenant`` (null for an event without one), ``endpoint``, ``attempt`` (1-based);
- ``at``: when the attempt ended, seconds since the epoch;
- ``status`` (the HTTP status, null when there was none), ``duration_ms``, ``outcome`` (the worker's decision:
  delivered, retry, retry-in-place, exhausted, dead, disabled, parked), ``error`` (null or at most
  ``ERROR_CHARS`` characters), ``next_delay_s`` (null unless a retry was scheduled);
- ``worker``: which worker made the attempt (host and PID).

Pure: encoding and decoding only; the publisher and the writer are thin shells around them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import orjson

from warren.core.errors import WarrenError

__all__ = [
    "ERROR_CHARS",
    "OUTCOMES",
    "VERSION",
    "AttemptEntry",
    "MalformedBatch",
    "decode_batch",
    "encode_batch",
    "encode_rows",
]

VERSION = 1
ERROR_CHARS = 500
OUTCOMES = frozenset({"delivered", "retry", "retry-in-place", "exhausted", "dead", "disabled", "parked"})
# Outcomes that are not a success: what `?status=failed` selects.
FAILED_OUTCOMES = frozenset(OUTCOMES - {"delivered"})


class MalformedBatch(WarrenError):
    """A message on the attempts queue that is not a batch of attempt records (named field and reason)."""


@dataclass(frozen=True, slots=True)
class AttemptEntry:
    """One finished delivery attempt, as the attempt log keeps it."""

    id: str
    event_id: str
    tenant: str | None
    endpoint: str
    attempt: int
    at: float
    status: int | None
    duration_ms: float
    outcome: str
    error: str | None
    next_delay_s: float | None
    worker: str

    @property
    def failed(self) -> bool:
        return self.outcome in FAILED_OUTCOMES


def clip_error(error: str | None) -> str | None:
    """An error message cut to what the log keeps."""
    if error is None or len(error) <= ERROR_CHARS:
        return error
    return error[: ERROR_CHARS - 1] + "…"


def encode_batch(entries: Iterable[AttemptEntry]) -> bytes:
    """One message body for a batch of records (orjson writes a dataclass's fields in order, as ``asdict``)."""
    return orjson.dumps({"v": VERSION, "attempts": list(entries)})


# The field names of a record, in order: what ``encode_rows`` expects of each row.
FIELDS = tuple(f.name for f in fields(AttemptEntry))


def encode_rows(rows: Iterable[Mapping[str, Any]]) -> bytes:
    """One message body for records given as mappings with exactly ``FIELDS`` (the worker's path: it builds them
    in its background task without making an AttemptEntry each). Not checked here: ``decode_batch`` checks."""
    return orjson.dumps({"v": VERSION, "attempts": list(rows)})


def _field(record: dict[str, Any], name: str, kinds: tuple[type, ...], *, nullable: bool = False) -> Any:
    value = record.get(name)
    if value is None and nullable:
        return None
    # bool is an int in Python: refuse it wherever a number is asked for.
    if value is None or isinstance(value, bool) or not isinstance(value, kinds):
        raise MalformedBatch(f"attempt record field {name!r}: expected {'/'.join(k.__name__ for k in kinds)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise MalformedBatch(f"attempt record field {name!r}: not a finite number")
    return value


def _entry(record: object) -> AttemptEntry:
    if not isinstance(record, dict):
        raise MalformedBatch("an attempt record is not a JSON object")
    outcome = _field(record, "outcome", (str,))
    if outcome not in OUTCOMES:
        raise MalformedBatch(f"attempt record field 'outcome': unknown {outcome!r}")
    attempt = _field(record, "attempt", (int,))
    if attempt < 1:
        raise MalformedBatch("attempt record field 'attempt': must be at least 1")
    for name in ("id", "event_id", "endpoint"):
        if not _field(record, name, (str,)):
            raise MalformedBatch(f"attempt record field {name!r}: empty")
    return AttemptEntry(
        id=record["id"],
        event_id=record["event_id"],
        tenant=_field(record, "tenant", (str,), nullable=True),
        endpoint=record["endpoint"],
        attempt=attempt,
        at=float(_field(record, "at", (int, float))),
        status=_field(record, "status", (int,), nullable=True),
        duration_ms=float(_field(record, "duration_ms", (int, float))),
        outcome=outcome,
        error=clip_error(_field(record, "error", (str,), nullable=True)),
        next_delay_s=_opt_float(_field(record, "next_delay_s", (int, float), nullable=True)),
        worker=_field(record, "worker", (str,)),
    )


def _opt_float(value: int | float | None) -> float | None:
    return None if value is None else float(value)


def decode_batch(body: bytes) -> Sequence[AttemptEntry]:
    """The records of one message body; ``MalformedBatch`` names what is wrong (the whole batch is refused)."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as error:
        raise MalformedBatch(f"attempt batch is not JSON: {error}") from None
    if not isinstance(data, dict):
        raise MalformedBatch("attempt batch is not a JSON object")
    if data.get("v") != VERSION:
        raise MalformedBatch(f"attempt batch version {data.get('v')!r}: this writer reads version {VERSION}")
    records = data.get("attempts")
    if not isinstance(records, list):
        raise MalformedBatch("attempt batch field 'attempts': expected a list")
    return [_entry(record) for record in records]
