"""The routing stage's first attempt inline: a lane endpoint's first POST made by the router, with no lane copy.

Through a lane, an event costs two quorum queues and two hops (the routing queue, a confirmed copy into the
lane, a consume and an ack there) where a dedicated endpoint's costs one; on a saturated machine that halves
the rate (docs/deployment.md, "Lane endpoints, measured"). So the router, for a healthy lane endpoint this worker
serves, attempts the first delivery itself with that endpoint's own runner, as if the copy had come through
its lane: the same signing, tenant check, gates, decision and settling. Only what the attempt leaves to do
goes to the broker: a retry into the delay chain (back to the endpoint's lane), a dead letter into the lane's
DLQ, a park into the lane, each confirmed as the runner always does; and a hand-back becomes a copy published
into the lane by the router. The event is acked only once every subscriber's fate is safe (delivered, or its
next step confirmed), so a publisher's confirm still means "stored for every subscriber" and a worker killed
mid-way leaves the event to another router: its inline deliveries done already are duplicates, bounded by
``[lanes] route_prefetch`` as the copies are (docs/architecture.md, "Lanes").

Isolation: an inline delivery holds the router's window (one of ``route_prefetch`` unacked events) for as long
as it takes, and with it its route partition's batched acks, so only endpoints whose deliveries are fast get one
(``InlinePolicy``, pure): seen answering fast (its last attempt, inline or from its lane: a new endpoint's
first event is its trial, inline but cut at the slow mark and then copied into its lane, and the next wait a
while for its answer), not held (circuit open, paused, disabled, or not accepting), without a fleet-wide
limit, each with at most its ``concurrency`` and a quarter of the router's window in inline deliveries, and
all of them together leaving an eighth of it free (that
part always routes copies, which take no time); one that turns slow (over 1 s, and 4 times the recent inline
deliveries' median: on a machine where everything is slow together nobody is) is barred for a while, longer
each time: as soon as one of its inline deliveries has run that long, not only when it ends. An event that
finds its endpoint's inline slots busy waits for one, within the same bounds and at most that long
(``InlineDeliveries.acquire``), rather than costing a copy.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from aio_pika.abc import AbstractIncomingMessage

from warren.consumers.endpoint_runner import EndpointRunner
from warren.consumers.inline_lines import WaitingLines
from warren.consumers.inline_policy import BAR_BASE, BAR_MAX, SLOW, InlinePolicy
from warren.consumers.lanes import LaneRunner

__all__ = ["BAR_BASE", "BAR_MAX", "SLOW", "InlineCopy", "InlineDeliveries", "InlinePolicy"]

WAIT = True  # an event whose endpoint has all its inline slots busy waits for one (at most SLOW), not copied


class InlineCopy:
    """The lane copy an inline delivery stands for, as the endpoint's runner reads and settles it.

    Nothing of it is on the broker: ``ack`` (the runner delivered it, or confirmed its next step: a retry, a dead
    letter, a park) sets ``stored`` to True; ``nack``/``reject`` (handed back: cancelled, or a move that failed)
    to False, and the router then owes the endpoint a copy in its lane. The first settlement stands; read once
    the runner returns (a plain attribute: nothing waits on it, so no future per delivery).
    """

    redelivered = False
    exchange = ""
    consumer_tag: str | None = None  # no lane channel: the settler acks it by itself (``ack``), never batched
    delivery_tag: int | None = None

    def __init__(self, event: AbstractIncomingMessage, headers: Mapping[str, Any], lane: str) -> None:
        self.body = event.body
        self.message_id = event.message_id
        self.type = event.type
        self.content_type = event.content_type
        self.timestamp = event.timestamp
        self.app_id = event.app_id
        self.correlation_id = event.correlation_id
        self.headers = headers  # the router's own for this copy (LaneRouter._store builds it; nothing changes it)
        self.routing_key = lane
        self.stored: bool | None = None  # None: not settled (the runner returned without: a copy is owed)

    def _settle(self, stored: bool) -> None:
        if self.stored is None:
            self.stored = stored

    async def ack(self, multiple: bool = False) -> None:
        self._settle(True)

    async def nack(self, multiple: bool = False, requeue: bool = True) -> None:
        self._settle(False)

    async def reject(self, requeue: bool = False) -> None:
        self._settle(False)


class InlineDeliveries:
    """The router's inline path: ``acquire`` picks (and reserves) a lane endpoint's runner, ``deliver`` uses it.

    ``runners`` is the worker's map (a deferred endpoint's runner is built by ``get``, as for its first lane
    message).
    """

    def __init__(
        self,
        runners: Mapping[str, EndpointRunner],
        window: int,
        clock: Callable[[], float] = time.monotonic,
        partitions: Callable[[], int] = lambda: 1,
    ) -> None:
        """``window`` is one route partition's (``[lanes] route_prefetch``); ``partitions()`` how many the router
        consumes now."""
        self.runners = runners
        self.policy = InlinePolicy(window, SLOW, BAR_BASE, BAR_MAX)  # read here, so that tests may set them
        self.partitions = partitions
        self.clock = clock
        self.wait = WAIT
        self.delivered = 0  # inline deliveries settled without a lane copy (tests, logs)
        self.started: Counter[str] = Counter()  # inline deliveries begun, by endpoint
        self.handed = 0  # inline deliveries that ended in a lane copy
        self.waited = 0  # inline deliveries begun after a wait for their endpoint's slot
        self.cut = 0  # trials cut at the slow mark (a copy owed: the endpoint's attempts go through its lane)
        self.refused: Counter[str] = Counter()  # first attempts sent as lane copies, by why (``refusal``, "held")
        self.lines = WaitingLines()  # events waiting for an endpoint's inline slot, or its first answer

    def forget(self, name: str) -> None:
        """``name`` is no longer a lane endpoint served here: its policy state and its count go."""
        self.policy.forget(name)
        self.started.pop(name, None)

    def _pick(self, name: str, take: bool = True) -> tuple[LaneRunner | None, str | None]:
        """``name``'s runner and None when it may begin an inline delivery now (then counted in flight), else why
        not (with the runner if it is a healthy lane endpoint's); ``take`` False: others wait in line for it, so
        "endpoint" where it might."""
        runner = self.runners.get(name)
        if not isinstance(runner, LaneRunner) or not _healthy(runner):
            return None, "held"
        self.policy.consumed(self.partitions())
        now = self.clock()
        why = self.policy.refusal(name, runner.endpoint.concurrency, now)  # a barred endpoint may not, either
        if why is None:
            if not take:
                return runner, "endpoint"
            self.policy.began(name, now)
            self.started[name] += 1
        return runner, why

    def take(self, name: str) -> tuple[LaneRunner | None, str | None]:
        """``acquire``'s first look, without a coroutine: ``name``'s runner and None when its first attempt may be
        made inline now (counted in flight: ``deliver`` it), else what to hand ``acquire`` (``picked``), which
        waits as it says. Nearly every event of a proven endpoint is taken here."""
        return self._pick(name, take=not self.lines.waiting(name))  # none overtakes those waiting

    async def acquire(self, name: str, picked: tuple[LaneRunner | None, str | None] | None = None) -> LaneRunner | None:
        """``name``'s runner if its first attempt may be made inline (counted in flight: ``deliver`` it), or None:
        a copy into its lane is owed.

        When only the endpoint's own inline slots are all busy (its ``concurrency``, or its quarter of the
        window), the event waits for one, in arrival order, for at most the slow mark: a copy costs the broker
        a confirmed publish, a consume and an ack, and the worker as much again, where a proven endpoint's slot
        frees in about one delivery's time. The events waiting are held with its inline deliveries, within the
        same bounds (``InlinePolicy.may_wait``), so a hanging endpoint holds no more of the window than before,
        and for no longer than the slow mark, after which it is barred and its waiting events go to its lane.
        Likewise the events of an endpoint new to this worker wait for its first answer (``proof_due``): at a
        worker's start every endpoint is new, and a backlog's first events were otherwise all copied.
        """
        runner, why = self.take(name) if picked is None else picked
        if why is None:
            return runner
        now = self.clock()
        deadline, first = now + self.policy.slow, False
        if why == "unproven" and runner is not None and self.wait:
            due = self.policy.proof_due(name, now)
            if due is not None:  # its first answer is on its way: waited for as a slot is (woken by ``attempted``)
                why, deadline = "endpoint", due
        while why == "endpoint" and self.wait and (left := deadline - self.clock()) > 0:
            if not first and not self.policy.may_wait(name, self.lines.waiting(name), self.lines.count):
                break
            await self.lines.wait(name, left, first)
            runner, why = self._pick(name)
            if why is None:
                self.waited += 1
                return runner
            first = True  # woken, and the slot taken after all: back to the head of the line
        self.refused[why or "endpoint"] += 1
        self.lines.wake(name)  # should a slot have freed for this one, the next in line takes it
        return None

    def attempted(self, name: str, seconds: float) -> None:
        """An attempt of ``name`` took ``seconds`` (``InlinePolicy.attempted``); its events waiting for its first
        answer look again once it proves the endpoint fast (those finding no slot go back to the line's head)."""
        self.policy.attempted(name, seconds)
        self.lines.wake_all(name)

    async def deliver(self, runner: LaneRunner, event: AbstractIncomingMessage, headers: Mapping[str, Any]) -> bool:
        """Attempt ``event`` for ``runner``'s endpoint as its lane copy would be: True when its fate is safe
        (delivered, or its retry, dead letter or park confirmed), False when a copy into its lane is owed."""
        copy = InlineCopy(event, headers, runner.queue_names[0])
        name = runner.endpoint.name
        began = self.clock()
        try:
            if self.policy.on_trial(name):
                await self._trial(runner, copy)
            else:
                await runner.deliver(copy)  # type: ignore[arg-type]  # read and settled as a lane message is
        finally:
            ended = self.clock()
            self.policy.ended(name, ended - began, ended)
            self.lines.wake(name)
        stored = copy.stored is True
        if stored:
            self.delivered += 1
        else:
            self.handed += 1
        return stored

    async def _trial(self, runner: LaneRunner, copy: InlineCopy) -> None:
        """An unproven endpoint's trial: cut at the slow mark and handed back (a copy owed), as a worker stopping
        hands back. Only the cut is caught here: any other error goes on as an untried delivery's would."""
        try:
            await asyncio.wait_for(runner.deliver(copy), self.policy.slow)  # type: ignore[arg-type]
        except TimeoutError:
            self.cut += 1


def _healthy(runner: LaneRunner) -> bool:
    """Accepting, unordered, and with no gate of the fleet's (a roster on the broker) to wait on."""
    endpoint = runner.endpoint
    return (
        runner.paused_reason is None
        and runner._accepting
        and endpoint.rate_limit is None
        and endpoint.max_in_flight is None
        and not runner.ordered
    )
