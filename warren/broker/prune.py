"""Removing leftovers (see warren/broker/drift.py): what ``warren setup --prune`` deletes, and what it keeps.

A queue is deleted only when it is empty and nobody consumes it, unless ``force``: a removed endpoint's
queue may still hold events (or dead letters) someone wants. Quorum queues refuse ``queue.delete`` with
``if-empty`` (NOT_IMPLEMENTED on 3.10), so emptiness is checked with a passive declare just before the
delete. To keep that window short, the queue is first unbound from every exchange, so nothing new arrives.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import aiormq.exceptions
from aio_pika.abc import AbstractConnection
from aiormq.abc import AbstractChannel

from warren.broker.amqp.channels import close_channel
from warren.broker.amqp.probe import counts
from warren.broker.drift import Leftover

__all__ = ["Action", "LeftoverOutcome", "preview", "prune"]

T = TypeVar("T")

Action = Literal["reported", "deleted", "kept", "would delete", "would keep", "gone"]


@dataclass(frozen=True)
class LeftoverOutcome:
    """A leftover and what setup did (or, in a dry run, would do) with it."""

    leftover: Leftover
    action: Action
    detail: str = ""
    messages: int | None = None
    consumers: int | None = None


def _busy(messages: int | None, consumers: int | None) -> str:
    parts = []
    if messages:
        parts.append(f"{messages} message{'s' if messages != 1 else ''}")
    if consumers:
        parts.append(f"{consumers} consumer{'s' if consumers != 1 else ''}")
    return ", ".join(parts)


def report_only(leftovers: Iterable[Leftover], queues: Mapping[str, Mapping[str, Any]]) -> list[LeftoverOutcome]:
    """Without --prune: each leftover as found, with the counts the management API shows for queues."""
    outcomes = []
    for leftover in leftovers:
        record = queues.get(leftover.name, {}) if leftover.kind == "queue" else {}
        outcomes.append(LeftoverOutcome(leftover, "reported", "", record.get("messages"), record.get("consumers")))
    return outcomes


def preview(
    leftovers: Iterable[Leftover], queues: Mapping[str, Mapping[str, Any]], force: bool
) -> list[LeftoverOutcome]:
    """Dry run of --prune: what would go, judged on the management API's counts (which may lag seconds)."""
    outcomes = []
    for leftover in leftovers:
        if leftover.kind != "queue":
            outcomes.append(LeftoverOutcome(leftover, "would delete"))
            continue
        record = queues.get(leftover.name, {})
        messages, consumers = record.get("messages"), record.get("consumers")
        busy = _busy(messages, consumers)
        if busy and not force:
            outcomes.append(LeftoverOutcome(leftover, "would keep", f"not empty: {busy}", messages, consumers))
        else:
            detail = f"{busy}, forced" if busy else ("if empty" if messages is None else "")
            outcomes.append(LeftoverOutcome(leftover, "would delete", detail, messages, consumers))
    return outcomes


async def _on_fresh_channel(connection: AbstractConnection, operation: Callable[[AbstractChannel], Awaitable[T]]) -> T:
    """Run one operation on a channel of its own: a 404 or 406 closes the channel it happens on."""
    channel = await connection.channel()
    try:
        raw: AbstractChannel = await channel.get_underlay_channel()
        return await operation(raw)
    finally:
        await close_channel(channel)


async def prune(
    connection: AbstractConnection,
    leftovers: Sequence[Leftover],
    bindings: Iterable[Mapping[str, Any]],
    force: bool,
) -> list[LeftoverOutcome]:
    """Delete leftovers: stale bindings, then exchanges, then queues (empty ones only, unless ``force``)."""
    outcomes: list[LeftoverOutcome] = []
    deleted_exchanges = {x.name for x in leftovers if x.kind == "exchange"}
    for leftover in (x for x in leftovers if x.kind == "binding"):
        await _on_fresh_channel(connection, _unbind(leftover))
        outcomes.append(LeftoverOutcome(leftover, "deleted"))
    for leftover in (x for x in leftovers if x.kind == "exchange"):
        await _on_fresh_channel(connection, _delete_exchange(leftover.name))
        outcomes.append(LeftoverOutcome(leftover, "deleted"))
    records = list(bindings)
    for leftover in (x for x in leftovers if x.kind == "queue"):
        # Deleting an exchange took its bindings; the rest still feed the queue and go first.
        feeds = [
            r
            for r in records
            if r.get("destination") == leftover.name
            and r.get("destination_type") == "queue"
            and r.get("source")
            and r["source"] not in deleted_exchanges
        ]
        outcomes.append(await _prune_queue(connection, leftover, feeds, force))
    return outcomes


def _unbind(leftover: Leftover) -> Callable[[AbstractChannel], Awaitable[None]]:
    async def unbind(channel: AbstractChannel) -> None:
        arguments = dict(leftover.arguments or {})
        if leftover.destination_type == "exchange":
            await channel.exchange_unbind(
                destination=leftover.destination,
                source=leftover.source,
                routing_key=leftover.routing_key,
                arguments=arguments,
            )
        else:
            await channel.queue_unbind(leftover.destination, leftover.source, leftover.routing_key, arguments)

    return unbind


def _delete_exchange(name: str) -> Callable[[AbstractChannel], Awaitable[None]]:
    async def delete(channel: AbstractChannel) -> None:
        await channel.exchange_delete(name)

    return delete


def _delete_queue(name: str) -> Callable[[AbstractChannel], Awaitable[None]]:
    async def delete(channel: AbstractChannel) -> None:
        await channel.queue_delete(name)

    return delete


async def _prune_queue(
    connection: AbstractConnection, leftover: Leftover, feeds: list[Mapping[str, Any]], force: bool
) -> LeftoverOutcome:
    async def unbind_and_count(channel: AbstractChannel) -> tuple[int, int]:
        for feed in feeds:
            await channel.queue_unbind(
                leftover.name, feed["source"], feed.get("routing_key", ""), dict(feed.get("arguments") or {})
            )
        found = await counts(channel, leftover.name)
        return found.ready, found.consumers

    try:
        held = await _on_fresh_channel(connection, unbind_and_count)
    except aiormq.exceptions.ChannelNotFoundEntity:
        return LeftoverOutcome(leftover, "gone", "deleted by someone else meanwhile")
    except aiormq.exceptions.ChannelLockedResource:
        # An exclusive queue of another connection (RESOURCE_LOCKED): it lives and dies with that connection.
        return LeftoverOutcome(leftover, "kept", "exclusive to a running connection; it goes when that one closes")
    messages, consumers = held
    busy = _busy(messages, consumers)
    if busy and not force:
        detail = f"not empty: {busy}; unbound, so nothing new arrives; --force deletes it"
        return LeftoverOutcome(leftover, "kept", detail, messages, consumers)
    await _on_fresh_channel(connection, _delete_queue(leftover.name))
    return LeftoverOutcome(leftover, "deleted", f"{busy}, forced" if busy else "", messages, consumers)
