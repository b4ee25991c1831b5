"""Live apply: one endpoint's RabbitMQ objects declared or removed at runtime, and the fleet told at once.

The admin API calls these two functions after it changed its store; nothing here reads a database. Workers learn
the change through RabbitMQ (``consumers/live_endpoints.py``): a record on ``<prefix>.endpoints``, which every
worker hears and the endpoints stream remembers (latest record per endpoint wins, warren/broker/endpoint_records.py).

Apply declares the planner's objects for the one endpoint (warren/topology/planner.py ``endpoint_plan``), idempotently,
drops the subscription bindings the new configuration no longer has (events or tenant changed), and only then
announces: a worker that hears of the endpoint finds its queues there. A change of ordering or partitions is
refused while the queues it would drop hold messages (as ``warren setup`` refuses a differing exchange). The
record's signing secrets are sealed with the store's keys (``[store] keys``): apply needs them, and refuses without.

Remove announces first (workers stop consuming and hand back what they hold), deletes the endpoint's exchange (no
event reaches it any more), waits for its consumers to go, then deletes its queues and its DLQ: nothing of it is
left that could collect events, and nothing a later endpoint of the same name could inherit. Without ``force`` it
changes nothing while they hold messages; with ``force`` what they hold is discarded, and counted (``Removal``).
Retries of the endpoint still travelling the delay chain come due under a queue name that is gone, and RabbitMQ
drops them; should the name be reused by then, they reach the later endpoint's queue, and its workers deliver
them only if the later endpoint serves their tenant (``Endpoint.receives_tenant``; the others are discarded).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import aiormq.exceptions
from aio_pika.abc import AbstractConnection

from warren.broker.amqp.channels import close_channel
from warren.broker.amqp.confirm import publish_confirmed
from warren.broker.amqp.connection import connect_once
from warren.broker.amqp.probe import QueueDepth, QueueProbe, counts, missing
from warren.broker.applier import declare_plan
from warren.broker.capacity import problems_adding
from warren.broker.endpoint_records import EndpointRecord
from warren.broker.management import ManagementClient
from warren.core.errors import EndpointNotEmpty, LiveApplyError, TopologyError
from warren.store.keys import StoreKeyError, sealer_from
from warren.topology import names
from warren.topology.addresses import url_host_problem
from warren.topology.config import Endpoint, WarrenConfig
from warren.topology.delays import level_count
from warren.topology.plan import Plan
from warren.topology.planner import consumed_queues, delay_levels, endpoint_plan, subscription_bindings

__all__ = [
    "EndpointConfig",
    "EndpointNotEmpty",
    "LiveApplyError",
    "Removal",
    "Settings",
    "apply_endpoint",
    "remove_endpoint",
]

log = logging.getLogger("warren.live_apply")

# The names the admin side uses for the configuration types.
Settings = WarrenConfig
EndpointConfig = Endpoint

# How long remove waits, past the workers' grace period, for the endpoint's consumers to go.
CONSUMERS_GONE_SLACK = 2.0
POLL = 0.02


@dataclass(frozen=True)
class Removal:
    """What removing an endpoint discarded (only ``force`` discards): messages still queued, and dead letters."""

    queued: int = 0
    dead_letters: int = 0

    @property
    def discarded(self) -> int:
        return self.queued + self.dead_letters


@contextlib.asynccontextmanager
async def _connection(
    settings: WarrenConfig, given: AbstractConnection | None, name: str
) -> AsyncIterator[AbstractConnection]:
    """``given`` as it is (the caller's, kept open), or a connection of this call's own, closed after it."""
    if given is not None:
        yield given
        return
    connection = await connect_once(settings.broker.urls, name=name)
    try:
        yield connection
    finally:
        await connection.close()


def _by() -> str:
    return f"live-apply@{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True)
class _Layout:
    """What the broker holds of an endpoint now: its consumed queues' ready counts, its DLQ's, its exchange."""

    consumed: dict[str, int]
    dlq: int | None
    exchange: bool

    @property
    def exists(self) -> bool:
        return self.exchange or bool(self.consumed) or self.dlq is not None

    def held(self, dlq: str) -> dict[str, int]:
        """Queue -> ready messages, of the queues (the DLQ, named ``dlq``, among them) that hold any."""
        held = {q: n for q, n in self.consumed.items() if n}
        if self.dlq:
            held[dlq] = self.dlq
        return held


async def _layout(connection: AbstractConnection, prefix: str, name: str) -> _Layout:
    """Probed with passive declares, the first four at once (each on a channel of its own: a miss closes one)."""

    async def depth(queue: str) -> int | None:
        probe = QueueProbe(connection)
        try:
            found = await probe.depth(queue)
            return found.ready if found else None
        finally:
            await probe.close()

    async def exchange_exists() -> bool:
        probe = QueueProbe(connection)
        try:
            return await probe.exchange_exists(names.endpoint_exchange(prefix, name))
        finally:
            await probe.close()

    work_name, first_partition = names.work_queue(prefix, name), names.partition_queue(prefix, name, 0)
    work, partition, dlq, exchange = await asyncio.gather(
        depth(work_name), depth(first_partition), depth(names.dlq(prefix, name)), exchange_exists()
    )
    consumed: dict[str, int] = {}
    if work is not None:
        consumed[work_name] = work
    if partition is not None:
        consumed[first_partition] = partition
        probe = QueueProbe(connection)
        try:
            for index in range(1, 256):
                found = await probe.depth(names.partition_queue(prefix, name, index))
                if found is None:
                    break
                consumed[found.name] = found.ready
        finally:
            await probe.close()
    return _Layout(consumed, dlq, exchange)


def _check_address(settings: WarrenConfig, endpoint: Endpoint) -> None:
    # As the configuration refuses it at load for the file's endpoints (the worker checks again as it connects).
    if not settings.delivery.allow_private_networks and (problem := url_host_problem(endpoint.url)):
        raise LiveApplyError(f"endpoint {endpoint.name!r}: url refused: {problem}")


def _check_delays(settings: WarrenConfig, endpoint: Endpoint) -> None:
    needed = level_count(endpoint.retry_policy(settings.retry).longest_delay)
    have = delay_levels(settings)
    if needed > have:
        raise LiveApplyError(
            f"endpoint {endpoint.name!r}: its retry policy waits up to "
            f"{endpoint.retry_policy(settings.retry).longest_delay:g}s, longer than the delay chain set up for "
            f"this deployment reaches ({have} levels); lower its retry cap/schedule, or raise [retry] cap in the "
            "configuration and run `warren setup`"
        )


async def _announce(connection: AbstractConnection, prefix: str, record: EndpointRecord) -> None:
    channel = await connection.channel(publisher_confirms=True, on_return_raises=True)
    try:
        try:
            exchange = await channel.get_exchange(names.endpoints_exchange(prefix), ensure=True)
        except aiormq.exceptions.ChannelNotFoundEntity:
            raise TopologyError(missing("exchange", names.endpoints_exchange(prefix))) from None
        await publish_confirmed(exchange, record.to_message(), "", what=f"the record of endpoint {record.endpoint}")
    finally:
        with contextlib.suppress(Exception):
            await close_channel(channel)


async def _checked_subscriptions(settings: WarrenConfig, endpoint: Endpoint, plan: Plan) -> list[tuple[str, str]]:
    """(source, key) of bindings feeding the endpoint's exchange that its configuration no longer has (to remove).

    Raises LiveApplyError first when a node could not hold the plan's new quorum queues (warren/broker/capacity.py:
    past its file-handle cache a 3.10 node accepts no connection on any vhost).
    """
    prefix = settings.broker.prefix
    wanted = {(b.source, b.routing_key) for b in subscription_bindings(prefix, endpoint)}
    sources = {names.events_exchange(prefix), names.tenants_exchange(prefix)}
    quorum = [q.name for q in plan.queues if q.arguments.get("x-queue-type") == "quorum"]
    async with ManagementClient.from_settings(settings.broker) as api:
        problems = await problems_adding(api, quorum)
        if problems:
            raise LiveApplyError(f"endpoint {endpoint.name!r} not applied, nothing declared: " + "; ".join(problems))
        found = await api.bindings_to_exchange(names.endpoint_exchange(prefix, endpoint.name))
    return sorted(
        {
            (b["source"], b.get("routing_key", ""))
            for b in found
            if b.get("source") in sources and (b["source"], b.get("routing_key", "")) not in wanted
        }
    )


async def apply_endpoint(
    settings: Settings, endpoint: EndpointConfig, *, connection: AbstractConnection | None = None
) -> None:
    """Declare ``endpoint``'s exchange, bindings and queues (idempotent), then announce it to every worker.

    On ``connection`` when given (``warren api`` keeps one for its lifetime, warren/broker/admin/link.py), else on a
    connection of its own.

    Raises EndpointNotEmpty when the change moves ordering or partitions of queues that hold messages,
    LiveApplyError when it cannot be applied otherwise, TopologyError when the broker refuses an object (or
    ``warren setup`` never ran), BrokerUnavailable or ManagementError when RabbitMQ cannot be reached.
    """
    _check_address(settings, endpoint)
    _check_delays(settings, endpoint)
    try:
        sealer = sealer_from(settings.store.keys)
    except StoreKeyError as exc:
        raise LiveApplyError(f"endpoint {endpoint.name!r}: secrets not sealed for the workers: {exc}") from None
    record = EndpointRecord.applying(endpoint, _by(), sealer)
    # The management API's answer and the AMQP connection are awaited together: apply latency is the sum of
    # round trips, and these two need nothing of each other.
    plan = endpoint_plan(settings, endpoint)
    stale_reading = asyncio.ensure_future(_checked_subscriptions(settings, endpoint, plan))
    try:
        async with _connection(settings, connection, "warren-live-apply") as conn:
            await _apply_on(conn, settings, endpoint, plan, record, stale_reading)
    finally:
        if not stale_reading.done():
            stale_reading.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await stale_reading


async def _apply_on(
    connection: AbstractConnection,
    settings: WarrenConfig,
    endpoint: Endpoint,
    plan: Plan,
    record: EndpointRecord,
    stale_reading: asyncio.Future[list[tuple[str, str]]],
) -> None:
    prefix = settings.broker.prefix
    before, stale = await asyncio.gather(_layout(connection, prefix, endpoint.name), stale_reading)
    wanted = set(consumed_queues(prefix, endpoint))
    dropped = {q: n for q, n in before.consumed.items() if q not in wanted}
    if dropped:
        await _relayout(connection, settings, endpoint, dropped)
    await declare_plan(connection, plan)
    if stale:
        await _unbind(connection, names.endpoint_exchange(prefix, endpoint.name), stale)
    await _announce(connection, prefix, record)
    if dropped:
        try:
            await _retire(connection, settings, endpoint.name, list(dropped), force=False)
        except EndpointNotEmpty as exc:
            # Applied: only messages handed back by workers as they switched are left in an old queue.
            log.warning("endpoint %s applied; old queues kept, not empty: %s", endpoint.name, exc.queues)


async def _relayout(
    connection: AbstractConnection, settings: WarrenConfig, endpoint: Endpoint, dropped: dict[str, int]
) -> None:
    """The endpoint's queues change (ordering or partitions): refused while a queue to drop holds messages."""
    prefix = settings.broker.prefix
    busy = {q: n for q, n in dropped.items() if n}
    if busy:
        held = ", ".join(f"{q} ({n})" for q, n in sorted(busy.items()))
        raise EndpointNotEmpty(
            f"endpoint {endpoint.name!r}: changing its ordering or partitions would drop queues that hold messages "
            f"({held}); let them drain (pause producers or the endpoint's events) and apply again",
            busy,
        )
    exchange = names.endpoint_exchange(prefix, endpoint.name)
    channel = await connection.channel()
    try:
        # A new exchange type cannot be declared over the old one; the consistent-hash exchange of a new
        # partition count keeps its type, and unbinding the dropped partitions is enough.
        partitions_only = endpoint.ordering == "key" and all(q.rsplit(".", 1)[-1].startswith("p") for q in dropped)
        raw = await channel.get_underlay_channel()
        if partitions_only:
            for queue in dropped:
                await raw.queue_unbind(queue, exchange, "1")
        else:
            await raw.exchange_delete(exchange)
    except aiormq.exceptions.AMQPChannelError as exc:
        raise TopologyError(f"RabbitMQ refused to re-lay endpoint {endpoint.name!r}: {exc}") from exc
    finally:
        with contextlib.suppress(Exception):
            await close_channel(channel)


async def _unbind(connection: AbstractConnection, exchange: str, stale: list[tuple[str, str]]) -> None:
    channel = await connection.channel()
    try:
        raw = await channel.get_underlay_channel()
        for source, key in stale:
            await raw.exchange_unbind(destination=exchange, source=source, routing_key=key)
    finally:
        with contextlib.suppress(Exception):
            await close_channel(channel)


async def remove_endpoint(
    settings: Settings, name: str, *, force: bool, connection: AbstractConnection | None = None
) -> Removal:
    """Stop delivery to ``name`` everywhere, then delete its queues and its DLQ.

    Without ``force``, raises EndpointNotEmpty (and changes nothing) when its queues or its DLQ hold messages;
    and, when messages came back from the workers as they stopped, raises it after stopping delivery, with every
    message still queued. With ``force``, what they hold is discarded: the Removal counts it. On ``connection``
    when given, else on a connection of its own.
    """
    async with _connection(settings, connection, "warren-live-remove") as conn:
        return await _remove_on(conn, settings, name, force=force)


async def _remove_on(connection: AbstractConnection, settings: WarrenConfig, name: str, *, force: bool) -> Removal:
    prefix = settings.broker.prefix
    dlq = names.dlq(prefix, name)
    layout = await _layout(connection, prefix, name)
    held = layout.held(dlq)
    if held and not force:
        listed = ", ".join(f"{q} ({n})" for q, n in sorted(held.items()))
        raise EndpointNotEmpty(
            f"endpoint {name!r} holds messages ({listed}): nothing removed; let it drain (replay or purge its "
            "dead letters), or remove it with force to discard them",
            held,
        )
    await _announce(connection, prefix, EndpointRecord.removing(name, _by()))
    if not layout.exists:
        return Removal()
    channel = await connection.channel()
    try:
        await (await channel.get_underlay_channel()).exchange_delete(names.endpoint_exchange(prefix, name))
    finally:
        with contextlib.suppress(Exception):
            await close_channel(channel)
    queues = [*layout.consumed, *([dlq] if layout.dlq is not None else [])]
    discarded = await _retire(connection, settings, name, queues, force=force)
    removal = Removal(sum(n for q, n in discarded.items() if q != dlq), discarded.get(dlq, 0))
    if removal.discarded:
        log.warning(
            "endpoint %s removed with force: %d queued message(s) and %d dead letter(s) discarded",
            name,
            removal.queued,
            removal.dead_letters,
        )
    return removal


async def _retire(
    connection: AbstractConnection, settings: WarrenConfig, endpoint: str, queues: list[str], *, force: bool
) -> dict[str, int]:
    """Delete queues no longer consumed, once their consumers left: when empty, or with ``force`` whatever they
    hold. Returns queue -> messages discarded with it (``force`` only)."""
    probe = QueueProbe(connection)
    discarded: dict[str, int] = {}
    try:
        deadline = time.monotonic() + settings.delivery.grace_period + CONSUMERS_GONE_SLACK
        left: dict[str, int] = {}
        for queue in queues:
            depth = await _consumers_gone(probe, queue, deadline)
            if depth is None:
                continue
            if depth.consumers:
                raise LiveApplyError(
                    f"endpoint {endpoint!r}: {queue} still has {depth.consumers} consumer(s) "
                    f"{settings.delivery.grace_period + CONSUMERS_GONE_SLACK:g}s after the fleet was told; "
                    "delivery from it is not stopped (a worker of an earlier release?): run the removal again"
                )
            if force:
                discarded[queue] = await _delete(connection, queue)
            elif not await _delete_if_empty(connection, queue):
                left[queue] = (await probe.depth(queue) or depth).ready
        if left:
            listed = ", ".join(f"{q} ({n})" for q, n in sorted(left.items()))
            raise EndpointNotEmpty(
                f"endpoint {endpoint!r}: delivery is stopped, but messages came back to {listed} as the workers "
                "stopped; they are still queued: remove it again with force to discard them",
                left,
            )
    finally:
        await probe.close()
    return {q: n for q, n in discarded.items() if n}


async def _consumers_gone(probe: QueueProbe, queue: str, deadline: float) -> QueueDepth | None:
    """The queue's depth once no consumer is left on it (or at ``deadline``); None when it does not exist."""
    depth = await probe.depth(queue)
    while depth is not None and depth.consumers and time.monotonic() < deadline:
        # Polled: the consumers are other processes', and RabbitMQ tells nobody when they cancel.
        await asyncio.sleep(POLL)
        depth = await probe.depth(queue)
    return depth


async def _delete_if_empty(connection: AbstractConnection, queue: str) -> bool:
    """Delete ``queue`` when it holds nothing; False (and kept) otherwise.

    Quorum queues refuse ``queue.delete`` with ``if-empty`` (NOT_IMPLEMENTED), so, as ``warren setup --prune``
    does, the count is read with a passive declare just before the delete; nothing feeds the queue any more by
    then (its exchange and delay-chain binding are gone), so the window holds no new message.
    """
    channel = await connection.channel()
    try:
        raw = await channel.get_underlay_channel()
        try:
            if (await counts(raw, queue)).ready:
                return False
        except aiormq.exceptions.ChannelNotFoundEntity:
            return True
        await raw.queue_delete(queue)
        return True
    finally:
        with contextlib.suppress(Exception):
            await close_channel(channel)


async def _delete(connection: AbstractConnection, queue: str) -> int:
    """Delete ``queue`` whatever it holds; how many messages went with it (0 when it was gone already)."""
    channel = await connection.channel()
    try:
        raw = await channel.get_underlay_channel()
        try:
            deleted = await raw.queue_delete(queue)
        except aiormq.exceptions.ChannelNotFoundEntity:
            return 0
        return int(deleted.message_count or 0)
    finally:
        with contextlib.suppress(Exception):
            await close_channel(channel)
