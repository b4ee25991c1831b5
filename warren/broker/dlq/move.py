"""Replay of chosen dead letters, message by message: publish with a confirm, and only then ack the DLQ copy.

Used when a replay is filtered (the shovel moves whole queues only). The order of the two steps is the
whole safety argument: a crash between them leaves the message in the DLQ *and* back in delivery, a
duplicate the receiver drops by its ``webhook-id``; there is no moment at which it is in neither.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aio_pika import Message
from aio_pika.abc import AbstractConnection, AbstractIncomingMessage

from warren.broker import wire
from warren.broker.amqp.ack_batcher import AckBatcher
from warren.broker.amqp.confirm_channel import ConfirmChannel
from warren.broker.amqp.connection import CONNECTION_EXCEPTIONS
from warren.broker.amqp.probe import existing_exchange
from warren.broker.dlq.browse import MAX_SCAN, hold_messages
from warren.broker.dlq.letters import DeadLetter
from warren.broker.dlq.selection import Selection, select
from warren.core.deadlines import stop_if_cancelled
from warren.core.errors import PublishError, ReplayError, UnroutableError
from warren.topology import names
from warren.topology.headers import H_ROUTE_ATTEMPT

__all__ = [
    "DEFAULT_WINDOW",
    "REPLAY_ACK_BATCH",
    "REPLAY_ACK_DELAY",
    "MoveReport",
    "dlq_route",
    "move_selected",
    "replay_headers",
]

DEFAULT_WINDOW = 64  # publishes awaiting their confirm at once
log = logging.getLogger("warren.dlq")

FINISH_GRACE = 5.0  # seconds an interrupted replay gives the publishes already sent to be confirmed
# How long a confirmed copy's DLQ ack waits for its neighbours. Longer than a worker's (2 ms): nothing waits on
# these acks, and a confirm rate slowed by a loaded machine left 2 ms batches of about two letters each (254
# frames for 500 letters); at 20 ms a batch holds every confirm of that time whatever the rate.
REPLAY_ACK_DELAY = 0.02
# ...and how many confirmed copies wait at most: a fast confirm rate sends its acks in batches of this many rather
# than hundreds every 20 ms, so a killed replay leaves at most this many more confirmed copies behind in the DLQ
# (duplicates once replayed again) than its publishes in flight.
REPLAY_ACK_BATCH = 16

# Broker bookkeeping that must not travel back: x-death would make the delay chain drop the message as a
# dead-letter cycle; the delivery count and shovel trail belong to the DLQ's copy. A routing-stage letter's count
# of routing attempts goes too: a replayed event gets a fresh budget there as well.
_STRIP = frozenset({*wire.RABBITMQ_DEATH_HEADERS, wire.H_DELIVERY_COUNT, wire.H_SHOVELLED, H_ROUTE_ATTEMPT})


def replay_headers(headers: dict[str, Any], replayed_ms: int) -> dict[str, Any]:
    """The headers of a replayed copy: the story so far kept, the replay marker set (a fresh attempt budget)."""
    out = {k: v for k, v in headers.items() if k not in _STRIP}
    out[wire.H_REPLAYED] = replayed_ms
    return out


@dataclass
class MoveReport:
    depth: int  # messages in the DLQ when the pass began
    scanned: int  # messages read (all of them unless the DLQ held more than the scan limit)
    chosen: list[DeadLetter] = field(default_factory=list)  # what matched (what moved, unless dry run)
    moved: int = 0
    own: int = 0  # of those read, the letters naming the endpoint (a shared lane's DLQ; every one otherwise)


def dlq_route(prefix: str, endpoint: str, lanes: int = 0) -> tuple[str, str, str | None]:
    """The DLQ of ``endpoint``, and the exchange and routing key (None: the event type) a replay goes back by.

    ``lanes`` > 0: a lane endpoint among that many lanes: its lane's DLQ, back to its lane by the default exchange.
    ``names.ROUTE_STAGE``: the routing stage's DLQ, back to its input (each event to its key's route partition,
    owing the copies it owed when it was given up on).
    """
    if endpoint == names.ROUTE_STAGE:
        return names.route_dlq(prefix), names.route_exchange(prefix), None
    if lanes:
        lane = names.lane_of(endpoint, lanes)
        return names.lane_dlq(prefix, lane), "", names.lane_queue(prefix, lane)
    return names.dlq(prefix, endpoint), names.endpoint_exchange(prefix, endpoint), None


def _copy(message: AbstractIncomingMessage, replayed_ms: int) -> Message:
    return wire.onward(message, replay_headers(dict(message.headers or {}), replayed_ms))


async def move_selected(
    connection: AbstractConnection,
    prefix: str,
    endpoint: str,
    selection: Selection,
    *,
    newest_first: bool = False,
    dry_run: bool = False,
    scan: int = MAX_SCAN,
    window: int = DEFAULT_WINDOW,
    on_moved: Callable[[DeadLetter], None] | None = None,
    lanes: int = 0,
) -> MoveReport:
    """Move the dead letters ``selection`` picks back into the endpoint's exchange; the rest stay, in order.

    Ordered endpoints re-hash each message on its ``warren-key`` there, so it lands in its key's partition.
    A lane endpoint (``lanes``: the deployment's lane count) has no exchange: its letters are picked out of
    its lane's DLQ by their ``warren-endpoint`` and go back to its lane; no other endpoint's letter is touched.
    Raises ReplayError at the first message RabbitMQ refuses (it stays in the DLQ, as does everything after).
    """
    source, exchange_name, key = dlq_route(prefix, endpoint, lanes)
    if lanes:
        selection = dataclasses.replace(selection, endpoint=endpoint)
    publisher = await ConfirmChannel(connection).open()
    try:
        if exchange_name:
            await existing_exchange(publisher.channel, exchange_name)
        async with hold_messages(connection, source, scan=scan) as held:
            letters = held.letters()
            report = MoveReport(held.depth, len(letters), own=sum(not lanes or x.endpoint == endpoint for x in letters))
            report.chosen = select(letters, selection, newest_first=newest_first)
            if not dry_run and report.chosen:
                await _move(publisher, exchange_name, held.messages, report, window, on_moved, key)
            return report
    finally:
        await publisher.close()


async def _move(
    publisher: ConfirmChannel,
    exchange: str,
    messages: list[AbstractIncomingMessage],
    report: MoveReport,
    window: int,
    on_moved: Callable[[DeadLetter], None] | None,
    routing_key: str | None = None,
) -> None:
    slots = asyncio.Semaphore(max(1, window))
    # aiormq matches a returned message to its publish by message_id: two copies of one event (a DLQ may
    # hold duplicates) must never await their confirms together on one channel.
    in_flight: dict[str, asyncio.Task[None]] = {}
    tasks: set[asyncio.Task[None]] = set()
    errors: list[BaseException] = []
    replayed_ms = int(time.time() * 1000)
    # The DLQ copies are acked in batches (one multiple ack per settled run) rather than one by one: a quorum
    # queue's channel keeps at most 32 commands in flight to the queue and holds back the rest, and what it holds
    # back when the channel closes is never sent, so those copies return although acked. 64 single acks at once
    # (the confirms of an interrupted replay's window) left 31 letters in the DLQ and the work queue both, on a
    # loaded machine. The batcher's close sends what waits and lets the last acks settle (SETTLE_PAUSE).
    acks = AckBatcher(max_delay=REPLAY_ACK_DELAY, flush_at=REPLAY_ACK_BATCH)
    for message in messages:
        acks.track(message)

    async def one(letter: DeadLetter) -> None:
        message = messages[letter.position]
        try:
            key = routing_key if routing_key is not None else letter.event_type
            await publisher.publish(exchange, _copy(message, replayed_ms), key, what="the copy")
        except UnroutableError:
            raise ReplayError(
                f"{letter.event_id}: the endpoint's exchange routes it nowhere (no queue bound); "
                "it stays in the DLQ: check the topology with `warren setup`"
            ) from None
        except PublishError as exc:
            raise ReplayError(f"{letter.event_id}: {exc}; it stays in the DLQ") from None
        finally:
            slots.release()
        # Confirmed: only now may the DLQ copy go.
        await acks.ack(message)
        report.moved += 1
        if on_moved is not None:
            on_moved(letter)

    def finished(task: asyncio.Task[None]) -> None:
        tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            errors.append(task.exception())  # type: ignore[arg-type]

    try:
        try:
            for letter in report.chosen:
                previous = in_flight.get(letter.event_id)
                if previous is not None and not previous.done():
                    await asyncio.wait({previous})
                if errors:
                    break  # fail fast: nothing more is sent after a refusal
                stop_if_cancelled()  # Ctrl-C whose CancelledError a library lost: stop here, as if it had come
                await slots.acquire()
                task = asyncio.create_task(one(letter))
                task.add_done_callback(finished)
                in_flight[letter.event_id] = task
                tasks.add(task)
            await asyncio.gather(*tasks, return_exceptions=True)
        except BaseException:
            # Interrupted (Ctrl-C, a cancelled task): let the publishes already sent finish and ack their DLQ
            # copies, so that an interruption leaves no duplicate behind when the broker is responsive.
            unconfirmed: set[asyncio.Task[None]] = set()
            if tasks:
                _, unconfirmed = await asyncio.wait(set(tasks), timeout=FINISH_GRACE)
            if unconfirmed:
                log.warning(
                    "replay interrupted: %d publish(es) not confirmed within %gs; their letters stay in the DLQ and "
                    "may be in the work queue too (duplicates the receiver drops by webhook-id)",
                    len(unconfirmed),
                    FINISH_GRACE,
                )
            for task in list(tasks):
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        if errors:
            error = errors[0]
            if isinstance(error, CONNECTION_EXCEPTIONS):
                raise ReplayError(
                    f"connection to RabbitMQ lost after {report.moved} moved: run the replay again "
                    "(nothing is lost; a message confirmed but not yet removed from the DLQ is replayed twice)"
                ) from error
            raise error
    finally:
        await acks.close()
