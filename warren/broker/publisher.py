"""Publishing events with publisher confirms and ``mandatory``: an event is either stored or an error."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable
from contextlib import AbstractContextManager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass, field

import aiormq.exceptions
from aio_pika.abc import AbstractConnection
from opentelemetry.trace import Tracer
from prometheus_client import Counter

from warren import tracing
from warren.broker.amqp.confirm import LinkLost, Nacked, Outgoing, Turns, await_turn, end_turn
from warren.broker.amqp.confirm_channel import ConfirmChannel
from warren.broker.amqp.deadlines import Deadlines
from warren.broker.amqp.probe import missing
from warren.broker.events import Event, event_body, event_headers, event_properties
from warren.broker.publish_deadline import DEFAULT_DEADLINE
from warren.core.errors import EventError, PublishError, UnroutableError
from warren.topology import names
from warren.topology.catalog import Catalog
from warren.tracing.carry import inject_current

__all__ = ["DEFAULT_DEADLINE", "DEFAULT_WINDOW", "TENANT_EVENTS_UNROUTED", "PublishReport", "Publisher"]

log = logging.getLogger("warren.publisher")

# The tracer publish_many looked up for its batch, seen by the publishes it starts (None: look it up).
_BATCH_TRACER: ContextVar[tuple[Tracer | None] | None] = ContextVar("warren_publish_batch_tracer", default=None)

_NO_SPAN = nullcontext()  # the span of a publish while nothing records (reusable: it holds no state)

DEFAULT_WINDOW = 256  # unconfirmed publishes kept in flight by publish_many
RESEND_PAUSE = 0.25
RESEND_PAUSE_MAX = 2.0

# A tenant's event that no endpoint takes is accepted (a tenant without endpoints yet is normal on a platform),
# and counted here: in the process's default registry, which ``warren api`` and any embedding app export.
TENANT_EVENTS_UNROUTED = Counter(
    "warren_tenant_events_unrouted",
    "Events published for a tenant that no endpoint subscribes to (accepted, delivered to no one).",
    ["tenant"],
)


def check_schema(catalog: Catalog, event: Event) -> None:
    """EventError when the event's data breaks its type's newest schema and the catalog rejects; a warning when
    it warns instead."""
    violation = catalog.violation(event.type, event.data)
    if violation is None:
        return
    where = f"event {event.id} of type {event.type!r} (schema version {violation.version})"
    text = f"{where}: {violation.path}: {violation.message}"
    if catalog.on_invalid == "reject":
        raise EventError(text)
    log.warning("%s; published anyway (catalog.on_invalid = warn)", text, extra={"event_id": event.id})


@dataclass
class PublishReport:
    """What publish_many did: ids confirmed, and (event id, error) for every event that was not stored."""

    confirmed: list[str] = field(default_factory=list)
    failed: list[tuple[str, PublishError]] = field(default_factory=list)


class Publisher:
    """Publishes events to the events exchange and waits for RabbitMQ's confirm of each one."""

    def __init__(
        self,
        channel: ConfirmChannel,
        exchange: str,
        max_payload: int | None,
        tenants: str | None = None,
        catalog: Catalog | None = None,
    ) -> None:
        """``tenants`` names the tenants exchange; None when the broker has none (a topology set up before tenants).
        ``catalog``: events are checked against their type's schema first (``config.event_catalog()``)."""
        self._channel = channel
        self._deadlines = Deadlines()  # one timer for every send waiting for its confirm (deadlines.py)
        self._catalog = catalog
        self._exchange = exchange
        self._tenants = tenants
        self._max_payload = max_payload
        self.unrouted_tenant_events = 0  # this publisher's share of TENANT_EVENTS_UNROUTED
        # Publishes of one id on this channel go one after the other (see one_at_a_time and await_turn).
        self._in_flight: Turns = {}

    @classmethod
    async def open(
        cls,
        connection: AbstractConnection,
        prefix: str,
        *,
        max_payload: int | None = None,
        catalog: Catalog | None = None,
    ) -> Publisher:
        channel = await ConfirmChannel(connection).open()
        tenants: str | None = None
        # Checked on a channel of its own: a missing exchange closes the channel that asked.
        probe = await connection.channel()
        try:
            await probe.get_exchange(names.tenants_exchange(prefix), ensure=True)
            tenants = names.tenants_exchange(prefix)
        except aiormq.exceptions.ChannelNotFoundEntity:
            log.warning("%s", missing("exchange", names.tenants_exchange(prefix)) + " (events for a tenant fail)")
        finally:
            with contextlib.suppress(Exception):
                await probe.close()
        return cls(channel, names.events_exchange(prefix), max_payload, tenants, catalog)

    async def close(self) -> None:
        await self._channel.close()

    async def publish(self, event: Event, *, deadline: float = DEFAULT_DEADLINE) -> str:
        """Publish one event; return its id once confirmed. Raises EventError (its data breaks its type's schema,
        with a catalog that rejects), UnroutableError, PublishError.

        An event that is not confirmed (nacked, or its connection lost while a node fails over) is sent again,
        with the same id, until ``deadline`` seconds after its first send; only then is it a PublishError, and so
        is a send still waiting for its confirm then (a node that keeps the link but never answers). A re-send of
        an event that was in fact stored (its confirm lost with the connection) is a duplicate, which receivers
        drop by ``webhook-id``. ``deadline=0`` sends once.
        """
        batch = _BATCH_TRACER.get()  # publish_many looked it up once for its whole batch
        tracer = tracing.tracer() if batch is None else batch[0]
        if self._catalog is not None:
            check_schema(self._catalog, event)
        body, headers = event_body(event, self._max_payload), event_headers(event)
        if event.tenant is None:
            exchange = self._exchange
        elif self._tenants is not None:
            exchange = self._tenants
        else:
            raise PublishError(
                f"event {event.id} names a tenant, but the tenants exchange does not exist: run `warren setup`",
                event.id,
            )
        # The send is in this coroutine, not one of its own: a coroutine fewer in flight per event (issue 38).
        span: AbstractContextManager[object] = _NO_SPAN
        if tracer is None:
            inject_current(headers)  # a trace context the caller attached (the ingest API's request) goes on
        else:
            span = tracing.publish_span(
                tracer,
                headers,
                event_id=event.id,
                event_type=event.type,
                exchange=exchange,
                routing_key=event.routing_key,
                body_size=len(body),
                tenant=event.tenant,
            )
        event_id = event.id
        turns = self._in_flight
        with span:  # the span's context goes into the headers on entry: the message is built after it
            # What encode_event's message would send, built once for the wire (the headers hold the trace context)
            message = Outgoing(body, event_properties(event, headers))
            if event_id in turns:  # another publish of this id is in flight on the channel: after it
                await await_turn(turns, event_id)
            else:
                turns[event_id] = None
            try:
                await resend_until_confirmed(
                    self._channel, exchange, message, event.routing_key, event_id, deadline, self._deadlines
                )
            except UnroutableError as exc:
                if event.tenant is None:
                    text = f"event {event_id} of type {event.type!r} is unroutable: no endpoint subscribes to it"
                    raise UnroutableError(text, event_id) from exc.__cause__
                # Accepted: the tenant has no endpoint for this type (yet). Counted, never an error.
                self.unrouted_tenant_events += 1
                TENANT_EVENTS_UNROUTED.labels(event.tenant).inc()
                log.info(
                    "event %s for tenant %s: no endpoint subscribes to %r; counted, not delivered",
                    event_id,
                    event.tenant,
                    event.type,
                    extra={"tenant": event.tenant, "event_id": event_id},
                )
            finally:
                end_turn(turns, event_id)
        return event_id

    async def publish_many(
        self,
        events: Iterable[Event] | AsyncIterable[Event],
        *,
        window: int = DEFAULT_WINDOW,
        on_result: Callable[[str, PublishError | None], Awaitable[None] | None] | None = None,
        deadline: float = DEFAULT_DEADLINE,
    ) -> PublishReport:
        """Publish a stream of events keeping up to ``window`` unconfirmed; report every outcome.

        An event not confirmed is sent again until ``deadline`` seconds after its first send (``publish``), its
        key's later events waiting behind it, so a node failing over costs time, not events: only what is still
        not confirmed at its deadline is reported as not stored.

        Events of one ordering key go one after another: each is sent once the one before it (of the same
        tenant and key) is confirmed, and not at all when that one was not stored. So what is stored of a key
        is always a prefix of its events here, and a producer that sends the failed ones again (same ids)
        keeps the key's order. Pipelined, a later event could be confirmed while an earlier one of its key
        was nacked or timed out, and the retry would land behind it (seen on a cluster losing a node).
        Events of different keys, and events without a key, are in flight side by side as before.
        """
        report = PublishReport()
        # The tracer is looked up once for the batch (the lookup reads the environment: 3% of a publish, profiled
        # in issue 38): a tracer provider an application sets while a batch is in flight records from its next call.
        batch_tracer = _BATCH_TRACER.set((tracing.tracer(),))  # the tasks below copy the context with it
        loop = asyncio.get_running_loop()
        # The window: a count and, while it is full, the future the loop below waits on (an asyncio.Semaphore's
        # acquire is a coroutine and a scan of its waiters per event, issue 38).
        in_flight = started = 0
        room: asyncio.Future[None] | None = None
        # The events' tasks not yet finished (or failed: the gather below raises), by their number in the batch.
        tasks: dict[int, asyncio.Task[None]] = {}
        # The events that keep one order: their key, or (tenant, key) for a tenant's (a str never equals a tuple).
        Chain = str | tuple[str, str]
        latest: dict[Chain, int] = {}  # chain -> its last event's number, until that one is stored
        # number -> its outcome (stored or not), made only when a later event of its chain waits for it, or when it
        # was not stored: with many keys, most events are stored before the next of their key starts (issue 38).
        outcomes: dict[int, asyncio.Future[bool]] = {}
        confirmed, failed = report.confirmed, report.failed

        async def one(
            number: int,
            event: Event,
            chain: Chain | None,
            before: asyncio.Future[bool] | None,
        ) -> None:
            nonlocal in_flight, room
            error: PublishError | None = None
            stored = False
            try:
                if before is not None and not await asyncio.shield(before):
                    raise PublishError(
                        f"event {event.id} not sent: an earlier event with key {event.key!r} was not stored, and "
                        "sending this one first would break the key's order; send both again (same ids)",
                        event.id,
                    )
                await self.publish(event, deadline=deadline)
                confirmed.append(event.id)
                stored = True
            except UnroutableError as exc:
                error = exc
                failed.append((event.id, exc))
                stored = True  # no endpoint takes it, so it holds no place in any endpoint's order
            except EventError as exc:  # its data breaks its type's schema (or is too large): never sent
                error = PublishError(str(exc), event.id)
                failed.append((event.id, error))
                stored = True  # as an unroutable one: it holds no place in its key's order
            except PublishError as exc:
                error = exc
                failed.append((event.id, exc))
            finally:
                in_flight -= 1
                if room is not None:
                    if not room.done():
                        room.set_result(None)
                    room = None
                if chain is not None:
                    settled = outcomes.pop(number, None)
                    if latest.get(chain) == number:
                        if stored:
                            del latest[chain]  # the key's next event may go at once
                        else:  # a failure stays: the key's events started later must not go
                            settled = outcomes[number] = settled or loop.create_future()
                    if settled is not None and not settled.done():
                        settled.set_result(stored)
            if on_result is not None:
                outcome = on_result(event.id, error)
                if outcome is not None:
                    await outcome
            # Finished: out of tasks here rather than by a done callback (a call_soon per event); a task that
            # raised stays in it, for the gather below to raise.
            del tasks[number]

        async def wait_for_room() -> None:
            nonlocal room
            while in_flight >= window:
                room = loop.create_future()
                await room

        def start(event: Event) -> None:
            nonlocal in_flight, started
            in_flight += 1
            started += 1
            before = chain = None
            if event.key is not None:
                chain = event.key if event.tenant is None else (event.tenant, event.key)
                previous = latest.get(chain)
                if previous is not None:  # in flight, or not stored: this one waits for its outcome
                    before = outcomes.get(previous)
                    if before is None:
                        before = outcomes[previous] = loop.create_future()
                latest[chain] = started
            tasks[started] = loop.create_task(one(started, event, chain, before))

        try:
            # A plain iterable is read as one, not through an async generator: one step less per event.
            if isinstance(events, AsyncIterable):
                async for event in events:
                    if in_flight >= window:
                        await wait_for_room()
                    start(event)
            else:
                for event in events:
                    if in_flight >= window:
                        await wait_for_room()
                    start(event)
        finally:
            _BATCH_TRACER.reset(batch_tracer)
        if tasks:
            await asyncio.gather(*tasks.values())
        return report


async def resend_until_confirmed(
    channel: ConfirmChannel,
    exchange: str,
    message: Outgoing,
    routing_key: str,
    event_id: str,
    deadline: float,
    deadlines: Deadlines | None = None,
) -> None:
    """``message`` published on ``channel`` (``ConfirmChannel.publish``, errors naming "event <event_id>"), and
    again after each nack or lost link (a node failing over), with pauses doubling from RESEND_PAUSE,
    until ``deadline`` seconds have passed: then the last error is raised. Other failures are answers (a returned
    event, an exchange that does not exist) and raised at once.

    A send still waiting for its confirm at the deadline is given up (a PublishError, "not confirmed in N s"): a
    node can keep the link alive, answering heartbeats, and never confirm (RabbitMQ 4.0 leaves a node resumed
    after a pause past the net tick split from the others, and a publish there went unconfirmed until the node
    was restarted: docs/cluster.md), so the heartbeat alone does not bound the wait. ``deadlines`` watches it (a
    publisher's, one timer for all its sends; a fresh one when None). The publish frame itself is never cut
    (aiormq writes it whole or not at all) and a confirm arriving later is dropped; the event may be stored,
    which a send again with the same id turns into a duplicate that receivers drop. ``deadline=0`` sends once
    and waits for its answer however long."""
    loop = asyncio.get_running_loop()
    give_up = loop.time() + deadline
    watcher = deadlines or Deadlines()
    watched = watcher.watch(give_up) if deadline > 0 else None
    pause = RESEND_PAUSE
    last: PublishError | None = None  # the last nack or lost link; None while a send waits for its answer
    try:
        while True:
            try:
                last = None
                # The arguments passed, not a closure: a function and five cells fewer in flight per event (issue 38)
                await channel.publish(exchange, message, routing_key, what=None, event_id=event_id)
                return
            except (Nacked, LinkLost) as exc:
                last = exc
                left = give_up - loop.time()
                if left <= 0:
                    if deadline <= 0:
                        raise
                    raise PublishError(f"{exc} (sent again for {deadline:g} s)", event_id) from exc
                log.info("event %s not confirmed (%s); sending it again", event_id, exc, extra={"event_id": event_id})
                await asyncio.sleep(min(pause, left))
                pause = min(pause * 2, RESEND_PAUSE_MAX)
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if watched is None or not watched.expired or task is None or task.uncancel() > 0:
            raise  # cancelled by its caller (too): passed on
        if last is not None:  # the deadline came while pausing before a send again
            raise PublishError(f"{last} (sent again for {deadline:g} s)", event_id) from last
        raise PublishError(
            f"event {event_id} not confirmed in {deadline:g} s: RabbitMQ kept the connection open but did not "
            "answer (it may be stored; send it again with the same id)",
            event_id,
        ) from None
    finally:
        if watched is not None:
            watcher.done(watched)
