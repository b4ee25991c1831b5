"""A lane endpoint's announcement, and the wait until every running router has it in its index.

A dedicated endpoint's bindings exist before its create returns, so an event published after the create
reaches it. A lane endpoint has no binding: a router routes to it once its index holds it, and it learns of it
from the announcement, which travels on another queue than the events. Without a wait, an event published
just after the create could be taken by a router that had not heard yet, and acked as wanted by nobody.

So the announcement of a lane endpoint asks for replies: it carries ``reply_to`` (an exclusive queue of the
caller's) and each worker that routes answers once the endpoint is in its router's index
(warren/consumers/live_endpoints.py). The caller counts the routers first (the consumers of the routers' roster
``{prefix}.route.roster``, one per routing worker, whatever route partitions each has claimed) and waits for
that many answers, at most ``[lanes] apply_wait``. A router that does not
answer in time (a worker stalled) is logged, never an error: the endpoint is created and will be served; only
an event published in that worker's window may miss it, as before this wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass

import aiormq.exceptions
from aio_pika import Message
from aio_pika.abc import AbstractConnection, AbstractIncomingMessage

from warren.broker.amqp.channels import close_channel
from warren.broker.amqp.probe import existing_queue
from warren.broker.endpoint_records import EndpointRecord
from warren.broker.live_layout import announce_on
from warren.topology import names

__all__ = ["ROUTED", "RoutersHeard", "announce_to_routers", "routed_reply", "routers_running"]

log = logging.getLogger("warren.live")

ROUTED = b"routed"  # the body of a routing worker's answer (its consumer tag is the reply's message id)


@dataclass(frozen=True)
class RoutersHeard:
    """How many routers were running when the endpoint was announced, and how many answered within the wait."""

    routers: int
    answered: int

    @property
    def complete(self) -> bool:
        return self.answered >= self.routers


async def routers_running(connection: AbstractConnection, prefix: str) -> int:
    """The routing workers running: the consumers of the routers' roster (none while it does not exist)."""
    channel = await connection.channel()
    try:
        roster = await channel.declare_queue(names.route_roster(prefix), passive=True)
    except aiormq.exceptions.ChannelNotFoundEntity:
        return 0
    with contextlib.suppress(Exception):
        await close_channel(channel)
    return roster.declaration_result.consumer_count or 0


def routed_reply(worker: str) -> Message:
    """What a routing worker answers once the announced endpoint is in its router's index."""
    return Message(ROUTED, message_id=worker)


async def announce_to_routers(
    connection: AbstractConnection, prefix: str, record: EndpointRecord, wait: float
) -> RoutersHeard:
    """Announce ``record`` (a lane endpoint's) and wait up to ``wait`` seconds for every running router's answer."""
    channel = await connection.channel(publisher_confirms=True, on_return_raises=True)
    try:
        await existing_queue(channel, names.route_partition(prefix, 0))  # `warren setup` has made the routing stage
        routers = await routers_running(connection, prefix)
        answered: set[str] = set()
        everyone = asyncio.Event()

        async def on_answer(message: AbstractIncomingMessage) -> None:
            if message.body == ROUTED:
                answered.add(message.message_id or "")
                if len(answered) >= routers:
                    everyone.set()

        replies = await channel.declare_queue(exclusive=True, auto_delete=True, arguments={"x-queue-type": "classic"})
        await replies.consume(on_answer, no_ack=True)
        await announce_on(channel, prefix, record, reply_to=replies.name)
        if routers and wait > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(everyone.wait(), wait)
        heard = RoutersHeard(routers, min(len(answered), routers))
        if not heard.complete:
            log.warning(
                "lane endpoint %s announced; %d of %d routers confirmed it within %.1f s: an event published now may "
                "miss it on the others until they hear of it",
                record.endpoint,
                heard.answered,
                heard.routers,
                wait,
                extra={"endpoint": record.endpoint},
            )
        return heard
    finally:
        with contextlib.suppress(Exception):
            await close_channel(channel)
