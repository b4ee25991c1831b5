"""A robust channel that says what happens to a consumer RabbitMQ cancels, and when it consumes again.

RabbitMQ cancels a consumer (``basic.cancel``) when its queue is deleted under it: by an operator, by
`warren setup --prune`, or when a classic queue's node goes away. aio-pika (10.2.1 and later, pinned in
constraints.txt) then consumes the queue again on the same channel, with the same consumer tag, once it
exists: it probes it every ``reconnect_interval`` (5 s) with the declare it was obtained with. Every queue of
the topology a worker consumes (lanes, work queues, partitions, route partitions, ordered lanes, park queues) is
obtained with a passive declare (``get_queue(..., ensure=True)``), so a probe never creates one: the worker waits
until `warren setup` declares it again, with the topology's arguments (the worker's own exclusive queues are
declared again as they were). No restart and no reconnect is needed, and the worker's own bookkeeping (a lane's
ack batcher, an endpoint's consumer tags) holds, since the tag is the same. What aio-pika left unsaid, this
channel logs: aiormq names only the consumer tag, and the waiting and the recovery were silent. The cancel is
logged (info), a queue still missing a second later is warned about (then once a minute), and its return is
logged (info).

This covers every consumer of a worker's robust connection alike (the lanes, dedicated endpoints' work queues
and partitions, the route partitions, the ordered lanes, inbound queues): one place, not one per consumer.
"""

from __future__ import annotations

import logging
import time
from itertools import chain
from typing import Any

import aio_pika
import aiormq

__all__ = ["REMIND_EVERY", "SETTLE", "ReportingChannel"]

log = logging.getLogger("warren.broker")

SETTLE = 1.0  # seconds after a cancel before a queue still missing is a warning (a worker deleting a queue it
# drains, a moved ordered endpoint's `.moved` queue, closes the consumer's channel within that: nothing to report)
REMIND_EVERY = 60.0  # seconds between two warnings about one queue still missing


class ReportingChannel(aio_pika.RobustChannel):
    """aio-pika's robust channel, logging a consumer RabbitMQ cancelled, its wait, and its return."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # consumer tag -> its queue, when RabbitMQ cancelled it, when the worker last warned about it (0: never)
        self._cancelled: dict[str, tuple[str, float, float]] = {}

    def _queue_of(self, tag: str) -> str | None:
        for queue in chain(*self._queues.values()):
            if tag in queue._consumers:
                return queue.name
        return None

    def _on_consumer_cancel(self, frame: aiormq.spec.Basic.Cancel) -> None:
        tag = frame.consumer_tag or ""
        if (name := self._queue_of(tag)) is not None:
            self._cancelled[tag] = (name, time.monotonic(), 0.0)
            log.info(
                "RabbitMQ cancelled this worker's consumer of %s (was it deleted?); consumed again once it exists", name
            )
        super()._on_consumer_cancel(frame)

    async def _restore_missing_consumers(self, channel: aiormq.Channel) -> bool:
        retry: bool = await super()._restore_missing_consumers(channel)
        now = time.monotonic()
        for tag, (name, since, warned) in list(self._cancelled.items()):
            if tag in channel.consumers:
                del self._cancelled[tag]
                log.info("consuming %s again, %.0f s after RabbitMQ cancelled its consumer", name, now - since)
            elif self._queue_of(tag) is None or self.is_closed:
                del self._cancelled[tag]  # cancelled or closed by the worker meanwhile: nothing to restore
            elif now - since >= SETTLE and now - warned >= REMIND_EVERY:
                self._cancelled[tag] = (name, since, now)
                log.warning(
                    "%s is missing (RabbitMQ cancelled this worker's consumer of it %.0f s ago: deleted by an operator "
                    "or `warren setup --prune`?); nothing is delivered from it until `warren setup` declares it "
                    "again, when this worker consumes it again by itself (no restart needed)",
                    name,
                    now - since,
                )
        return retry
