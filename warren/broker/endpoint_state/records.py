"""The shared state of an endpoint, as records every worker applies the same way. Pure: no I/O.

Three independent kinds of record, each last-writer-wins by ``version`` (then ``by``, to break ties):

- ``admin``: ``active`` | ``paused`` | ``disabled``: the operator's word, or auto-disable (410, open too long);
- ``circuit``: ``closed`` | ``open`` | ``half-open``: the breaker's verdict (warren/consumers/health/breaker.py);
- ``throttle``: the endpoint asked everyone to wait (429 + Retry-After) ``until`` a time.

Keeping them apart means a worker closing the circuit can never overwrite an operator's ``disable`` that it
had not seen yet: they are different records. Versions are epoch milliseconds, bumped past the version a
writer knows, so a later decision wins even across slightly skewed clocks.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import orjson
from pydantic import AfterValidator, TypeAdapter

from warren.core.strict_records import Number, Text, Whole, read, shown

__all__ = [
    "ACTIVE",
    "ADMIN",
    "CIRCUIT",
    "CLOSED",
    "DISABLED",
    "HALF_OPEN",
    "OPEN",
    "PAUSED",
    "THROTTLE",
    "THROTTLED",
    "EndpointView",
    "Standing",
    "StateRecord",
    "hold_end",
    "standing",
    "summary",
]

ADMIN, CIRCUIT, THROTTLE = "admin", "circuit", "throttle"
ACTIVE, PAUSED, DISABLED = "active", "paused", "disabled"
CLOSED, OPEN, HALF_OPEN = "closed", "open", "half-open"
THROTTLED = "throttled"

_STATES = {ADMIN: {ACTIVE, PAUSED, DISABLED}, CIRCUIT: {CLOSED, OPEN, HALF_OPEN}, THROTTLE: {THROTTLED}}


@dataclass(frozen=True)
class StateRecord:
    """One state change of one endpoint, as published on the control exchange and kept in the state stream."""

    # The types are what ``from_bytes`` requires of each field on the wire (strict: warren/core/strict_records.py).
    endpoint: Text
    kind: Text  # admin | circuit | throttle
    state: Text
    reason: Text
    since: Number  # epoch seconds: when this state began (for an open circuit, when it first opened)
    version: Whole  # epoch ms, strictly above the version its writer had seen
    by: Text  # the worker (or "cli@host") that decided it
    opened_at: Number | None = None  # circuit: when this outage began (for disable_after)
    failures: Whole = 0  # circuit: probes that failed in this outage (the cool-down grows with them)
    retry_at: Number | None = None  # circuit open: when a probe may go
    until: Number | None = None  # throttle: no attempt before this time

    def to_bytes(self) -> bytes:
        return orjson.dumps({k: v for k, v in dataclasses.asdict(self).items() if v is not None})

    @classmethod
    def from_bytes(cls, body: bytes) -> StateRecord:
        """Parse a record; ValueError when the body is not one (so a stray message cannot break a worker)."""
        return read(_RECORD, body)

    def newer_than(self, other: StateRecord | None) -> bool:
        return other is None or (self.version, self.by) > (other.version, other.by)


def _known_state(record: StateRecord) -> StateRecord:
    if record.state not in _STATES.get(record.kind, ()):
        raise ValueError(f"unknown {shown(record.kind)} state {shown(record.state)}")
    return record


_RECORD: TypeAdapter[StateRecord] = TypeAdapter(Annotated[StateRecord, AfterValidator(_known_state)])


@dataclass
class EndpointView:
    """What this process knows of one endpoint's fleet-wide state: the latest record of each kind."""

    endpoint: str
    admin: StateRecord | None = None
    circuit: StateRecord | None = None
    throttle: StateRecord | None = None

    def apply(self, record: StateRecord) -> bool:
        """Take ``record`` if it is newer than what we hold of its kind; True when something changed."""
        if record.endpoint != self.endpoint or record.kind not in _STATES:
            return False
        if not record.newer_than(getattr(self, record.kind)):
            return False
        setattr(self, record.kind, record)
        return True

    @property
    def admin_state(self) -> str:
        return self.admin.state if self.admin else ACTIVE

    @property
    def circuit_state(self) -> str:
        return self.circuit.state if self.circuit else CLOSED

    @property
    def throttled_until(self) -> float:
        if self.throttle is None:
            return 0.0
        return self.throttle.until or 0.0

    def next_version(self, kind: str, now: float) -> int:
        """A version that wins over everything this view holds of ``kind``."""
        current: StateRecord | None = getattr(self, kind)
        return max(int(now * 1000), (current.version + 1) if current else 0)

    def record(self, kind: str, state: str, reason: str, now: float, by: str, **fields: Any) -> StateRecord:
        """A new record of ``kind`` that supersedes the current one (``since`` defaults to now)."""
        since = fields.pop("since", now)
        return StateRecord(self.endpoint, kind, state, reason, since, self.next_version(kind, now), by, **fields)

    def in_force(self, now: float) -> list[StateRecord]:
        """The records that still change anything (not active, not closed, not an expired throttle)."""
        records = []
        if self.admin and self.admin.state != ACTIVE:
            records.append(self.admin)
        if self.circuit and self.circuit.state != CLOSED:
            records.append(self.circuit)
        if self.throttle and self.throttled_until > now:
            records.append(self.throttle)
        return records


@dataclass(frozen=True)
class Standing:
    """What a worker may do with an endpoint now: deliver, send one probe, or hold (consume nothing)."""

    mode: Literal["deliver", "probe", "hold"]
    reason: str = ""
    since: float | None = None


DELIVER = Standing("deliver")  # the usual answer, asked before every attempt: one instance (frozen)


def standing(view: EndpointView, now: float, probing: bool = False) -> Standing:
    """The operator's word first, then a throttle, then the circuit (``probing``: this worker holds the probe)."""
    admin = view.admin
    if admin is not None and admin.state == DISABLED:
        return Standing("hold", f"disabled: {admin.reason}", admin.since)
    if admin is not None and admin.state == PAUSED:
        return Standing("hold", f"paused: {admin.reason}", admin.since)
    throttle = view.throttle
    if throttle is not None and view.throttled_until > now:
        return Standing("hold", f"throttled: {throttle.reason}", throttle.since)
    circuit = view.circuit
    if circuit is not None and circuit.state in (OPEN, HALF_OPEN):
        if probing:
            return Standing("probe", f"probing: {circuit.reason}", circuit.since)
        return Standing("hold", f"circuit {circuit.state}: {circuit.reason}", circuit.since)
    return DELIVER


def hold_end(view: EndpointView, now: float, probing: bool = False) -> float | None:
    """When a hold that ends by itself does (epoch seconds): a throttle's end, an open circuit's next probe (the
    later of the two). None when the endpoint is not so held: not held, paused or disabled by the operator (no end
    is known), or this worker holds its probe."""
    admin = view.admin
    if admin is not None and admin.state in (DISABLED, PAUSED):
        return None
    ends = [view.throttled_until] if view.throttle is not None and view.throttled_until > now else []
    circuit = view.circuit
    if circuit is not None and circuit.state in (OPEN, HALF_OPEN) and not probing and circuit.retry_at is not None:
        ends.append(float(circuit.retry_at))
    return max(ends) if ends else None


def summary(view: EndpointView, now: float) -> tuple[str, str, float | None]:
    """(state, reason, since) as an operator reads it: disabled, paused, open, half-open, throttled or active."""
    if view.admin is not None and view.admin.state != ACTIVE:
        return view.admin.state, view.admin.reason, view.admin.since
    if view.circuit is not None and view.circuit.state != CLOSED:
        return view.circuit.state, view.circuit.reason, view.circuit.since
    if view.throttle is not None and view.throttled_until > now:
        return THROTTLED, view.throttle.reason, view.throttle.since
    latest = max((r for r in (view.admin, view.circuit) if r is not None), key=lambda r: r.version, default=None)
    return ACTIVE, (latest.reason if latest else ""), (latest.since if latest else None)
