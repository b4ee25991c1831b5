"""Warren's message headers: their names, and the readers of their values. Pure: no I/O.

The names live here, at the bottom of the layering, so that the planner (the consistent-hash exchange hashes
``warren-key``), the publisher, the worker and the DLQ tools all use one definition. ``broker/wire.py``
describes the wire format around them and re-exports them.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from warren.core.digits import ascii_int

__all__ = [
    "CONTROL_CHARACTERS",
    "H_ATTEMPT",
    "H_DEAD_AT",
    "H_DEAD_REASON",
    "H_DELIVERY_COUNT",
    "H_ENDPOINT",
    "H_FENCE_QUEUE",
    "H_FENCE_UNTIL",
    "H_FIRST_ATTEMPT",
    "H_HISTORY",
    "H_KEY",
    "H_LANE_FENCE",
    "H_LANE_HOLDS",
    "H_LANE_MISSES",
    "H_LAST_ATTEMPT",
    "H_LAST_ERROR",
    "H_LAST_RESPONSE",
    "H_LAST_STATUS",
    "H_MOVE_END",
    "H_PARK_UNTIL",
    "H_PUBLISHED",
    "H_REPLAYED",
    "H_REQUEST_HEADERS",
    "H_ROUTE_ATTEMPT",
    "H_ROUTE_FENCE",
    "H_ROUTE_OWED",
    "H_ROUTE_TENANT",
    "H_ROUTE_TYPE",
    "H_SEQUENCE",
    "H_SHOVELLED",
    "H_SOURCE",
    "H_TENANT",
    "MAX_COUNTED",
    "MAX_HEADER_INT",
    "NO_CONTROL_PATTERN",
    "RABBITMQ_DEATH_HEADERS",
    "header_history",
    "header_int",
    "header_text",
]

H_KEY = "warren-key"  # ordering key (the event id when the event has none): the consistent-hash input
H_SEQUENCE = "warren-sequence"  # producer's sequence number, when given
H_PUBLISHED = "warren-published-ms"  # epoch ms when the publisher sent it: the age and latency origin
H_ATTEMPT = "warren-attempt"  # attempts already made; never derived from x-death
H_FIRST_ATTEMPT = "warren-first-attempt-ms"
H_LAST_ATTEMPT = "warren-last-attempt-ms"
H_LAST_STATUS = "warren-last-status"  # HTTP status of the last attempt, 0 when there was no response
H_LAST_ERROR = "warren-last-error"  # short text: why the last attempt failed
H_LAST_RESPONSE = "warren-last-response"  # a dead letter's last response body, as much as the worker read of it
H_ENDPOINT = "warren-endpoint"
H_LANE_HOLDS = "warren-lane-holds"  # a lane message parked in a row because its endpoint was held: how often
H_MOVE_END = "warren-move-end"  # the last message of a moved ordered endpoint's queue (live_demote_ordered.py)
H_LANE_MISSES = "warren-lane-misses"  # a lane message parked because its endpoint was not (yet) served: how often
H_PARK_UNTIL = "warren-park-until"  # epoch ms a lane park ends, when it is longer than the delay chain reaches
# The routing stage's own (warren/consumers/route_attempts.py), on an event it sends round again or dead-letters:
H_ROUTE_ATTEMPT = "warren-route-attempt"  # routing attempts already made; never derived from x-delivery-count
H_ROUTE_OWED = "warren-route-owed"  # lane endpoints whose copies are still owed, comma-separated; absent: all
H_ROUTE_TYPE = "warren-route-type"  # the event type it was published with (the delay chain's key replaces it)
H_ROUTE_TENANT = "warren-route-tenant"  # and its tenant, when it was published for one
H_ROUTE_FENCE = "warren-route-fence"  # a promotion's fence through a route partition, never an event (its id)
H_LANE_FENCE = "warren-lane-fence"  # an ordered promotion's fence through an ordered lane, never an event (its id)
H_FENCE_QUEUE = "warren-fence-queue"  # the queue a fence was published into (its answer names it)
H_FENCE_UNTIL = "warren-fence-until"  # epoch ms its caller waits for a fence's answer until ([lanes] promote_wait)
H_TENANT = "warren-tenant"  # the tenant the event was published for, when it names one
H_DEAD_REASON = "warren-dead-reason"  # why the message was dead-lettered
H_DEAD_AT = "warren-dead-ms"
H_HISTORY = "warren-history"  # JSON list of the last few attempts, bounded
H_REPLAYED = "warren-replayed"  # set by replay: the worker starts a fresh attempt budget
H_DELIVERY_COUNT = "x-delivery-count"  # set by quorum queues: how many times the message was returned
H_SHOVELLED = "x-shovelled"  # added by a shovel with dest-add-forward-headers: marks a shovel replay [3.10.8]
H_SOURCE = "warren-source"  # inbound: the configured source a received webhook came from
H_REQUEST_HEADERS = "warren-request-headers"  # inbound: the HTTP request's headers (a table, names lowercased)

MAX_HEADER_INT = 2**63 - 1  # an AMQP header integer is a signed 64-bit one: a larger value cannot be published
# Attempt counts read from a header are taken as at most this: max_attempts is at most 1,000, and the count
# written back (one more) must still be a header integer. 2^63 - 1 plus one made the DLQ move itself fail.
MAX_COUNTED = 2**31

# Characters no event id, type or ordering key may hold: C0 controls, DEL, C1 controls and the Unicode line
# and paragraph separators. A newline in an id would reach an HTTP header (aiohttp refuses it) and a log line.
_CONTROL = r"\x00-\x1f\x7f-\x9f\u2028\u2029"
CONTROL_CHARACTERS = re.compile(f"[{_CONTROL}]")
NO_CONTROL_PATTERN = f"^[^{_CONTROL}]*$"  # the same rule as a JSON schema pattern (the ingest API's key)

# RabbitMQ's own dead-letter bookkeeping. It must be stripped before a message re-enters the delay chain:
# a message carrying its old x-death back into the same TTL cycle is dropped as a dead-letter cycle.
RABBITMQ_DEATH_HEADERS = (
    "x-death",
    "x-first-death-exchange",
    "x-first-death-queue",
    "x-first-death-reason",
    "x-last-death-exchange",
    "x-last-death-queue",
    "x-last-death-reason",
)


def header_text(value: object) -> str | None:
    """A header's value as text (AMQP may hand over bytes); None when absent."""
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def header_int(value: object) -> int | None:
    """A header's value as an integer; None when absent or not a number (a bool is not one).

    Text (a raw AMQP client may send ``"3"``) counts when it is ASCII digits, with a ``-``: ``int()`` would also
    read ``" 3"``, ``"1_000"`` and other scripts' digits (``"\\u0663"`` is 3)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    return ascii_int(header_text(value) or "", signed=True)


def header_history(value: object) -> tuple[dict[str, Any], ...]:
    """The ``warren-history`` header: the last attempts, each a dict; empty when absent or unreadable.

    Warren writes flat records (at, status, ms, error), so only their plain values are kept: orjson reads 1,024
    levels but writes 254, and the history is written back with each retry (a deeper one made every move of the
    message fail, and the DLQ tools' recursive rendering raise)."""
    text = header_text(value)
    if not text:
        return ()
    try:
        items = orjson.loads(text)
    except orjson.JSONDecodeError:
        return ()
    if not isinstance(items, list):
        return ()
    plain = (str, int, float, bool, type(None))
    return tuple({k: v for k, v in i.items() if isinstance(v, plain)} for i in items if isinstance(i, dict))
