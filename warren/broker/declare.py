"""Declaring a plan over AMQP: several channels at once, only what is missing, each refusal named."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence, Set
from typing import Any

import aiormq.abc
import aiormq.exceptions
from aio_pika.abc import AbstractConnection

from warren.broker.amqp.channels import close_channel
from warren.broker.drift import ObjectCheck
from warren.core.errors import TopologyError
from warren.topology.plan import Binding, Exchange, Plan, Queue

__all__ = ["DECLARE_CHANNELS", "declare_plan", "to_create"]

# Declares run on this many channels at once: a channel has one synchronous method in flight at a time, and a
# quorum queue's declare waits for its Raft cluster to start. On 2 busy cores RabbitMQ itself is the limit
# (one channel took as long); more would only crowd a loaded node (docs/deployment.md has the setup times).
DECLARE_CHANNELS = 4


def _refused(what: str, exc: aiormq.exceptions.AMQPChannelError) -> TopologyError:
    if isinstance(exc, aiormq.exceptions.ChannelPreconditionFailed):
        return TopologyError(
            f"RabbitMQ refused {what} ({exc}); it changed on the broker while setup ran: run `warren setup` again"
        )
    if isinstance(exc, aiormq.exceptions.ChannelAccessRefused):
        return TopologyError(f"RabbitMQ refused {what}: the user may not configure it ({exc})")
    return TopologyError(f"RabbitMQ refused {what}: {exc}")


async def _declare_exchange(raw: aiormq.abc.AbstractChannel, exchange: Exchange, _: Set[str]) -> None:
    await raw.exchange_declare(
        exchange.name, exchange_type=exchange.type, durable=exchange.durable, arguments=dict(exchange.arguments)
    )


async def _declare_queue(raw: aiormq.abc.AbstractChannel, queue: Queue, passive: Set[str]) -> None:
    if queue.name in passive:
        await raw.queue_declare(queue.name, passive=True)
    else:
        await raw.queue_declare(queue.name, durable=queue.durable, arguments=dict(queue.arguments))


async def _declare_binding(raw: aiormq.abc.AbstractChannel, binding: Binding, _: Set[str]) -> None:
    if binding.destination_type == "queue":
        await raw.queue_bind(
            binding.destination, binding.source, binding.routing_key, arguments=dict(binding.arguments)
        )
    else:
        await raw.exchange_bind(
            destination=binding.destination,
            source=binding.source,
            routing_key=binding.routing_key,
            arguments=dict(binding.arguments),
        )


def _label(item: Exchange | Queue | Binding) -> str:
    if isinstance(item, Binding):
        return f"binding {item.source} → {item.destination} [{item.routing_key}]"
    return f"{'exchange' if isinstance(item, Exchange) else 'queue'} '{item.name}'"


async def _declare_share(
    raw: aiormq.abc.AbstractChannel,
    items: Sequence[Any],
    declare: Callable[[aiormq.abc.AbstractChannel, Any, Set[str]], Awaitable[None]],
    passive: Set[str],
) -> None:
    for item in items:
        try:
            await declare(raw, item, passive)
        except aiormq.exceptions.AMQPChannelError as exc:
            raise _refused(_label(item), exc) from exc


async def declare_plan(
    connection: AbstractConnection, plan: Plan, passive: Set[str] = frozenset(), channels: int | None = None
) -> None:
    """Declare every planned object, exchanges then queues then bindings. Idempotent for objects as planned.

    Each kind is spread over ``channels`` (default ``DECLARE_CHANNELS``) channels declaring at once: the round
    trips of one channel overlap those of the others (a channel has one synchronous method in flight at a time).
    No drift check:
    ``apply_setup`` compares first. Tests that start from a fresh prefix call this alone. The ``passive``
    queues exist with fewer arguments than planned (a policy gives them the rest): declaring them with the
    plan's arguments would be refused, so they are only checked to be there.
    """
    opened = [await connection.channel() for _ in range(max(1, channels or DECLARE_CHANNELS))]
    try:
        raws = [await channel.get_underlay_channel() for channel in opened]
        phases: tuple[tuple[Sequence[Any], Callable[..., Awaitable[None]]], ...] = (
            (plan.exchanges, _declare_exchange),
            (plan.queues, _declare_queue),
            (plan.bindings, _declare_binding),
        )
        for items, declare in phases:
            try:
                async with asyncio.TaskGroup() as group:
                    for index, raw in enumerate(raws):
                        group.create_task(_declare_share(raw, items[index :: len(raws)], declare, passive))
            except BaseExceptionGroup as failed:  # the first failure cancelled the other channels' shares
                raise failed.exceptions[0]  # noqa: B904 - its own cause is the broker's refusal
    finally:
        for channel in opened:
            await close_channel(channel)


def to_create(plan: Plan, checks: Sequence[ObjectCheck]) -> Plan:
    """The part of ``plan`` that is not on the broker yet: a second setup of thousands of endpoints declares nothing.

    ``checks`` are ``compare``'s, one per planned object in plan order (exchanges, queues, bindings).
    """
    objects = (*plan.exchanges, *plan.queues, *plan.bindings)
    assert len(objects) == len(checks), "one check per planned object"
    wanted = {id(o) for o, check in zip(objects, checks, strict=True) if check.status == "create"}
    return Plan(
        tuple(e for e in plan.exchanges if id(e) in wanted),
        tuple(q for q in plan.queues if id(q) in wanted),
        tuple(b for b in plan.bindings if id(b) in wanted),
        plan.delay_levels,
    )
