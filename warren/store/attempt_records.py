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
- ``worker``: which worker made the attempt (host and PID);
- ``response``: the start of the endpoint's answer, as text (at most ``delivery.response_body_limit`` bytes
  read, invalid UTF-8 as U+FFFD, cut again to ``RESPONSE_CHARS`` characters here); null when no answer came;
- ``response_headers``: the answer's headers that matter for it (``content-type``, ``retry-after``), or null.

The last two came later: a record without them (an older worker's) reads as null, and an older writer ignores
them (the reader takes fields it does not know and leaves them).

Pure: encoding and decoding only; the publisher and the writer are thin shells around them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Annotated, Any, Literal

import orjson
from pydantic import AfterValidator, BaseModel, Field, TypeAdapter

from warren.core.errors import WarrenError
from warren.core.strict_records import MalformedRecord, Number, Text, Whole, read, shown

__all__ = [
    "ERROR_CHARS",
    "OUTCOMES",
    "RESPONSE_CHARS",
    "VERSION",
    "AttemptEntry",
    "MalformedBatch",
    "decode_batch",
    "encode_batch",
    "encode_rows",
]

VERSION = 1
ERROR_CHARS = 500
RESPONSE_CHARS = 65_536  # a response excerpt kept by the writer, whatever a worker's response_body_limit
OUTCOMES = frozenset({"delivered", "retry", "retry-in-place", "exhausted", "dead", "disabled", "parked"})
# Outcomes that are not a success: what `?status=failed` selects.
FAILED_OUTCOMES = frozenset(OUTCOMES - {"delivered"})


class MalformedBatch(WarrenError):
    """A message on the attempts queue that is not a batch of attempt records (named field and reason)."""


def clip_error(error: str | None) -> str | None:
    """An error message cut to what the log keeps."""
    if error is None or len(error) <= ERROR_CHARS:
        return error
    return error[: ERROR_CHARS - 1] + "…"


def clip_response(response: str | None) -> str | None:
    """A response excerpt cut to what the log keeps."""
    if response is None or len(response) <= RESPONSE_CHARS:
        return response
    return response[: RESPONSE_CHARS - 1] + "…"


def _known_outcome(outcome: str) -> str:
    if outcome not in OUTCOMES:
        raise ValueError(f"unknown {shown(outcome)}")
    return outcome


# What each field must be on the wire (decode_batch validates them; code that makes an entry is trusted). A field
# that may be null may also be left out (None), as every release has read it.
_Id = Annotated[Text, Field(min_length=1)]


@dataclass(frozen=True, slots=True)
class AttemptEntry:
    """One finished delivery attempt, as the attempt log keeps it."""

    id: _Id
    event_id: _Id
    tenant: Annotated[Text | None, Field(default=None)]
    endpoint: _Id
    attempt: Annotated[Whole, Field(ge=1)]
    at: Number
    status: Annotated[Whole | None, Field(default=None)]
    duration_ms: Number
    outcome: Annotated[Text, AfterValidator(_known_outcome)]
    error: Annotated[Text | None, Field(default=None), AfterValidator(clip_error)]  # clipped on the way in
    next_delay_s: Annotated[Number | None, Field(default=None)]
    worker: Text
    response: Annotated[Text | None, Field(default=None), AfterValidator(clip_response)] = None
    response_headers: Annotated[dict[str, Text] | None, Field(default=None)] = None

    @property
    def failed(self) -> bool:
        return self.outcome in FAILED_OUTCOMES


def encode_batch(entries: Iterable[AttemptEntry]) -> bytes:
    """One message body for a batch of records (orjson writes a dataclass's fields in order, as ``asdict``)."""
    return orjson.dumps({"v": VERSION, "attempts": list(entries)})


# The field names of a record, in order: what ``encode_rows`` expects of each row.
FIELDS = tuple(f.name for f in fields(AttemptEntry))


def encode_rows(rows: Iterable[Mapping[str, Any]]) -> bytes:
    """One message body for records given as mappings with exactly ``FIELDS`` (the worker's path: it builds them
    in its background task without making an AttemptEntry each). Not checked here: ``decode_batch`` checks."""
    return orjson.dumps({"v": VERSION, "attempts": list(rows)})


class _Batch(BaseModel):
    v: Literal[1]  # VERSION; lax, as ``data["v"] == 1`` was before: 1.0 and true pass too
    attempts: list[AttemptEntry]


_BATCH = TypeAdapter(_Batch)


def decode_batch(body: bytes) -> Sequence[AttemptEntry]:
    """The records of one message body; ``MalformedBatch`` names what is wrong (the whole batch is refused)."""
    try:
        return read(_BATCH, body).attempts
    except MalformedRecord as error:
        raise _malformed(error) from None


def _malformed(error: MalformedRecord) -> MalformedBatch:
    match error.where:
        case ():
            return MalformedBatch(f"attempt batch is {error.reason}")
        case ("v",):
            return MalformedBatch(f"attempt batch version {shown(error.value)}: this writer reads version {VERSION}")
        case ("attempts", int()):
            return MalformedBatch("an attempt record is not a JSON object")
        case ("attempts", int(), str() as name, *_):
            return MalformedBatch(f"attempt record field {name!r}: {error.reason}")
    return MalformedBatch(f"attempt batch {error}")
