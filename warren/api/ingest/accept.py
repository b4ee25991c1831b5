"""Accepting events: ids from ``Idempotency-Key``, the configured checks, publishing with confirms, and
every outcome in HTTP terms (202, 207, 409, 413, 422, 503).

Policy (ids, checks, the batch status) is pure; ``publish_one`` and ``publish_batch`` are the thin I/O.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from warren.api.ingest.errors import (
    BROKER_UNAVAILABLE,
    EVENT_TYPE_NOT_ALLOWED,
    INVALID,
    PAYLOAD_TOO_LARGE,
    UNROUTABLE,
    ApiError,
    FieldProblem,
)
from warren.api.ingest.eventtypes import TypeFilter
from warren.api.ingest.link import BrokerLink
from warren.api.ingest.schemas import EVENT_ID_PATTERN, EventIn
from warren.broker.events import Event, new_event_id
from warren.core.errors import BrokerUnavailable, EventError, PublishError, UnroutableError

__all__ = [
    "IDEMPOTENCY_HEADER",
    "BatchOutcome",
    "Limits",
    "batch_key_max_length",
    "build_events",
    "check_idempotency_key",
    "event_ids",
    "publish_batch",
    "publish_one",
]

IDEMPOTENCY_HEADER = "Idempotency-Key"
_ID = re.compile(EVENT_ID_PATTERN)


@dataclass(frozen=True)
class Limits:
    """What the configuration allows, and how long to wait for RabbitMQ."""

    type_filter: TypeFilter
    max_payload: int
    max_batch: int
    publish_timeout: float
    retry_after: int

    def unavailable(self, message: str, failed: list[dict[str, Any]] | None = None) -> ApiError:
        return ApiError(503, BROKER_UNAVAILABLE, message, headers={"Retry-After": str(self.retry_after)}, failed=failed)


def batch_key_max_length(max_batch: int) -> int:
    """The longest Idempotency-Key a batch can take: ``<key>.<index>`` must still be a valid event id."""
    return 200 - 1 - len(str(max_batch - 1))


def check_idempotency_key(key: str | None, *, max_length: int = 200) -> None:
    if key is None:
        return
    if not _ID.fullmatch(key) or len(key) > max_length:
        raise ApiError(
            422,
            INVALID,
            f"{IDEMPOTENCY_HEADER} must be 1-{max_length} letters, digits, '_', '-', '.' or ':'",
            fields=[FieldProblem(IDEMPOTENCY_HEADER, "not a valid event id")],
        )


def event_ids(items: Sequence[EventIn], key: str | None, *, batch: bool) -> list[str]:
    """Each event's id: its own ``id`` first, else from the Idempotency-Key, else a fresh one.

    A single event takes the key as its id; the event at index i of a batch takes ``<key>.<i>``. Either
    way, the same request retried with the same key yields the same ids, hence the same webhook-ids.
    """
    ids = []
    for index, item in enumerate(items):
        if item.id is not None:
            ids.append(item.id)
        elif key is not None:
            ids.append(f"{key}.{index}" if batch else key)
        else:
            ids.append(new_event_id())
    return ids


def _where(index: int, name: str, batch: bool) -> str:
    return f"events[{index}].{name}" if batch else name


def build_events(items: Sequence[EventIn], ids: Sequence[str], limits: Limits, *, batch: bool) -> list[Event]:
    """The events to publish, or one ApiError for the whole request: nothing is published unless all pass."""
    disallowed = [i for i, item in enumerate(items) if not limits.type_filter.allows(item.type)]
    if disallowed:
        problems = [
            FieldProblem(_where(i, "type", batch), f"event type {items[i].type!r} is not allowed here")
            for i in disallowed
        ]
        raise ApiError(
            422,
            EVENT_TYPE_NOT_ALLOWED,
            f"{problems[0].field}: event type {items[disallowed[0]].type!r} is not in api.allowed_event_types",
            fields=problems[:20],
        )
    first_at: dict[str, int] = {}
    for index, event_id in enumerate(ids):
        if event_id in first_at:
            where = _where(index, "id", batch)
            raise ApiError(
                422,
                INVALID,
                f"{where}: id {event_id!r} already used by events[{first_at[event_id]}]",
                fields=[FieldProblem(where, "duplicate id in one batch")],
            )
        first_at[event_id] = index
    events = []
    for index, (item, event_id) in enumerate(zip(items, ids, strict=True)):
        where = f"events[{index}]" if batch else "event"
        try:
            event = Event(
                type=item.type, data=item.data, id=event_id, key=item.key, sequence=item.sequence, tenant=item.tenant
            )
            # The body encode_event will send, measured without building an AMQP message (a test holds them equal).
            size = len(orjson.dumps(event.envelope()))
        except (EventError, TypeError) as exc:
            raise ApiError(422, INVALID, f"{where}: {exc}") from None
        if size > limits.max_payload:
            raise ApiError(
                413,
                PAYLOAD_TOO_LARGE,
                f"{where}: the webhook body would be {size} bytes, over delivery.max_payload ({limits.max_payload})",
            )
        events.append(event)
    return events


async def publish_one(link: BrokerLink, event: Event, limits: Limits) -> str:
    """Publish and wait for the confirm: the id, or 409 (unroutable) / 503 (not stored, retry)."""
    loop = asyncio.get_running_loop()
    give_up = loop.time() + limits.publish_timeout
    try:
        # A node failing over: the link is waited for, and what is not confirmed sent again, within the timeout.
        publisher = await link.ready_publisher(limits.publish_timeout)
        async with asyncio.timeout_at(give_up):
            return await publisher.publish(event, deadline=give_up - loop.time())
    except UnroutableError as exc:
        raise ApiError(409, UNROUTABLE, f"no endpoint subscribes to event type {event.type!r}: not stored") from exc
    except (BrokerUnavailable, PublishError) as exc:
        # The Publisher maps every failure of the link or the broker to PublishError: the event may or may not
        # be stored, so the answer is 503 and the producer retries with the same id.
        raise limits.unavailable(f"event {event.id} not stored: {exc}") from exc
    except TimeoutError as exc:
        raise limits.unavailable(
            f"event {event.id} not confirmed by RabbitMQ within {limits.publish_timeout:g}s; retry with the same id"
        ) from exc
    except asyncio.CancelledError as exc:
        if _we_are_cancelled():
            raise
        raise limits.unavailable(
            f"event {event.id} not stored: the publish was cancelled by the client library"
        ) from exc


def _we_are_cancelled() -> bool:
    """True when the CancelledError at hand is for this task (shutdown, client gone), not from aio-pika.

    aio-pika cancels the futures of in-flight publishes when it force-closes a stuck connection; that
    cancellation is a broker failure for the request, not a reason to drop the request without an answer.
    """
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


@dataclass
class BatchOutcome:
    """Ids confirmed (request order) and ``FailedEvent`` dicts for the rest."""

    ids: list[str]
    failed: list[dict[str, Any]]

    @property
    def status(self) -> int:
        """202 all stored, 207 some stored; with none stored, 409 if every one was unroutable, else 503."""
        if not self.failed:
            return 202
        if self.ids:
            return 207
        return 409 if all(f["error"] == UNROUTABLE for f in self.failed) else 503

    def body(self) -> dict[str, Any]:
        return {"ids": self.ids, "failed": self.failed}


async def publish_batch(link: BrokerLink, events: Sequence[Event], limits: Limits) -> BatchOutcome:
    """Publish every event (pipelined, each confirmed on its own) and say which were stored.

    A batch is not atomic: RabbitMQ confirms each message alone and cannot take one back. Whatever was
    confirmed before a failure or the timeout is stored and reported in ``ids``; everything else is in
    ``failed`` and may be retried with the same ids.
    """
    loop = asyncio.get_running_loop()
    give_up = loop.time() + limits.publish_timeout
    # BrokerUnavailable here: nothing was sent, the caller answers 503 (a link reconnecting is waited for first).
    publisher = await link.ready_publisher(limits.publish_timeout)
    outcomes: dict[str, PublishError | None] = {}
    problem = f"not confirmed by RabbitMQ within {limits.publish_timeout:g}s"

    def record(event_id: str, error: PublishError | None) -> None:
        outcomes[event_id] = error

    try:
        async with asyncio.timeout_at(give_up):
            await publisher.publish_many(events, on_result=record, deadline=give_up - loop.time())
    except TimeoutError:
        pass
    except asyncio.CancelledError:
        if _we_are_cancelled():
            raise
        problem = "the publish was cancelled by the client library"
    ids: list[str] = []
    failed: list[dict[str, Any]] = []
    for index, event in enumerate(events):
        if event.id in outcomes and outcomes[event.id] is None:
            ids.append(event.id)
            continue
        error = outcomes.get(event.id)
        if isinstance(error, UnroutableError):
            code, message = UNROUTABLE, f"no endpoint subscribes to event type {event.type!r}"
        else:
            code, message = BROKER_UNAVAILABLE, str(error) if error is not None else problem
        failed.append({"index": index, "id": event.id, "error": code, "message": message})
    return BatchOutcome(ids, failed)
