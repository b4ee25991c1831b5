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
first ones go through its lane), not held (circuit open, paused, disabled, or not accepting), without a
fleet-wide limit, each with at most its ``concurrency`` and a
quarter of the router's window in inline deliveries, and all of them together leaving an eighth of it free (that
part always routes copies, which take no time); one that turns slow (over 1 s, and 4 times the recent inline
deliveries' median: on a machine where everything is slow together nobody is) is barred for a while, longer
each time: as soon as one of its inline deliveries has run that long, not only when it ends.
"""

from __future__ import annotations

import bisect
import statistics
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aio_pika.abc import AbstractIncomingMessage

from warren.consumers.endpoint_runner import EndpointRunner
from warren.consumers.lanes import LaneRunner

__all__ = ["BAR_BASE", "BAR_MAX", "SLOW", "InlineCopy", "InlineDeliveries", "InlinePolicy"]

SLOW = 1.0  # seconds: an inline delivery that took longer bars its endpoint from the inline path for a while,
SLOWER = 4.0  # if it also took this many times the recent inline deliveries' median (all slow together: none)
RECENT = 64  # inline deliveries that median is taken over
BAR_BASE = 30.0  # seconds the first such bar lasts, doubling each time in a row
BAR_MAX = 600.0  # and at most this
WINDOW_SHARE = 4  # an endpoint holds at most 1/this of the router's window with inline deliveries
FREE_SHARE = 8  # and 1/this of the window (one event at least) is never held by inline deliveries


@dataclass
class _State:
    in_flight: int = 0
    barred_until: float = 0.0
    strikes: int = 0
    starts: list[float] = field(default_factory=list)  # when its inline deliveries in flight began
    noted: float = float("-inf")  # deliveries begun by then already barred it (while in flight): not again


class InlinePolicy:
    """Which lane endpoints get their first attempt inline; pure (the clock is passed in)."""

    def __init__(self, window: int, slow: float = SLOW, bar: float = BAR_BASE, bar_max: float = BAR_MAX) -> None:
        self.cap = max(1, window // WINDOW_SHARE)
        # An eighth of the window (one event at least) is never held by inline deliveries: it always routes copies.
        self.total_cap = window - max(1, window // FREE_SHARE)
        self.in_flight = 0
        self.slow, self.bar, self.bar_max = slow, bar, bar_max
        self._states: dict[str, _State] = {}
        # Endpoints whose last attempt (inline or through their lane) was fast: only they get inline deliveries.
        self._proven: set[str] = set()
        self._recent: deque[float] = deque(maxlen=RECENT)  # the last inline deliveries' seconds, all endpoints
        self._typical = 0.0  # their median, taken again every RECENT // 8 deliveries
        self._samples = 0

    def may(self, name: str, concurrency: int, now: float) -> bool:
        """Whether ``name`` (of ``concurrency``) may begin an inline delivery now."""
        if self.in_flight >= self.total_cap or name not in self._proven:
            return False
        state = self._states.get(name)
        if state is None:
            return True
        self._overdue(name, state, now)
        return now >= state.barred_until and state.in_flight < min(self.cap, concurrency)

    def began(self, name: str, now: float | None = None) -> None:
        """An inline delivery of ``name`` begins (at ``now``: then one still running when it is slow bars it)."""
        state = self._state(name)
        state.in_flight += 1
        if now is not None:
            bisect.insort(state.starts, now)  # kept sorted: _overdue and ended look up in O(log n)
        self.in_flight += 1

    def ended(self, name: str, seconds: float, now: float) -> None:
        """An inline delivery of ``name`` took ``seconds``: a slow one bars the endpoint (longer each time)."""
        self.in_flight = max(0, self.in_flight - 1)
        self._recent.append(seconds)
        self._samples += 1
        if self._samples < RECENT or self._samples % (RECENT // 8) == 0:  # often enough, and cheaply
            self._typical = statistics.median(self._recent)
        state = self._states.get(name)
        if state is None:  # forgotten while it ran (no longer served here): nothing of it is kept
            return
        state.in_flight = max(0, state.in_flight - 1)
        began, already = now - seconds, False
        if state.starts:  # its own start (deliveries end in any order); one that barred it in flight: not again
            start = state.starts.pop(_nearest(state.starts, began))
            already = start <= state.noted
        if self._slow(seconds):
            if not already:
                self._bar(name, state, now)
        elif now >= state.barred_until:
            state.strikes = 0
        if not state.in_flight and not state.strikes:
            del self._states[name]

    def attempted(self, name: str, seconds: float) -> None:
        """An attempt of ``name`` (inline or from its lane) took ``seconds``: a fast one proves the endpoint (it
        may have inline deliveries), a slow one takes that back until another is fast.

        So an endpoint not yet seen to answer fast (new to this worker, or slow since) is served through its lane,
        where a hanging attempt holds only a lane's message, not the router's: an inline delivery keeps its event
        unacked in its route partition for as long as it runs, and every later event of that partition can then
        only be acked alone (``AckBatcher``'s stragglers), each a settle of its own on the quorum queue, until it
        ends. A hanging endpoint's first deliveries (16, for 10 s) made most of the partitions' acks single ones:
        the broker's work per event of every endpoint went up by half or more (docs/deployment.md, "Isolation").
        """
        if seconds <= self.slow or not self._slow(seconds):  # the first test alone for nearly every attempt
            self._proven.add(name)
        else:
            self._proven.discard(name)

    def forget(self, name: str) -> None:
        """``name`` is no longer a lane endpoint served here (removed, moved, or reconfigured): nothing of it is kept.
        Served again, it proves itself again through its lane first."""
        self._proven.discard(name)
        self._states.pop(name, None)

    def _state(self, name: str) -> _State:
        """``name``'s state, made only when it has none (not a new ``_State`` built per call, as setdefault would)."""
        state = self._states.get(name)
        if state is None:
            state = self._states[name] = _State()
        return state

    def barred(self, name: str, now: float) -> bool:
        state = self._states.get(name)
        if state is None:
            return False
        self._overdue(name, state, now)
        return now < state.barred_until

    def _slow(self, seconds: float) -> bool:
        return seconds > self.slow and seconds > SLOWER * self._typical

    def _bar(self, name: str, state: _State, now: float) -> None:
        self._proven.discard(name)  # after its bar, back through its lane until an attempt there is fast
        state.barred_until = max(state.barred_until, now + min(self.bar_max, self.bar * 2.0 ** min(state.strikes, 16)))
        state.strikes += 1

    def _overdue(self, name: str, state: _State, now: float) -> None:
        """An inline delivery still running past the slow mark bars its endpoint now, not at its end (a hanging
        endpoint's first deliveries would otherwise go on taking the router's window until its timeout).

        Asked twice per inline delivery: the oldest start not yet noted decides (``_slow`` grows with the age),
        found by bisection in the sorted starts, not by a scan of every delivery in flight."""
        first = bisect.bisect_right(state.starts, state.noted)
        if first < len(state.starts) and self._slow(now - state.starts[first]):
            self._bar(name, state, now)
            state.noted = now


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
        self.headers = dict(headers)
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
    """The router's inline path: ``runner_for`` picks (and reserves) a lane endpoint's runner, ``deliver`` uses it.

    ``runners`` is the worker's map (a deferred endpoint's runner is built by ``get``, as for its first lane
    message).
    """

    def __init__(
        self, runners: Mapping[str, EndpointRunner], window: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.runners = runners
        self.policy = InlinePolicy(window, SLOW, BAR_BASE, BAR_MAX)  # read here, so that tests may set them
        self.clock = clock
        self.delivered = 0  # inline deliveries settled without a lane copy (tests, logs)
        self.started: Counter[str] = Counter()  # inline deliveries begun, by endpoint
        self.handed = 0  # inline deliveries that ended in a lane copy

    def forget(self, name: str) -> None:
        """``name`` is no longer a lane endpoint served here: its policy state and its count go."""
        self.policy.forget(name)
        self.started.pop(name, None)

    def runner_for(self, name: str) -> LaneRunner | None:
        """``name``'s runner if its first attempt may be made inline now (counted in flight: ``deliver`` it)."""
        now = self.clock()
        runner = self.runners.get(name)
        if not isinstance(runner, LaneRunner) or not _healthy(runner):
            return None
        if not self.policy.may(name, runner.endpoint.concurrency, now):  # a barred endpoint may not, either
            return None
        self.policy.began(name, now)
        self.started[name] += 1
        return runner

    async def deliver(self, runner: LaneRunner, event: AbstractIncomingMessage, headers: Mapping[str, Any]) -> bool:
        """Attempt ``event`` for ``runner``'s endpoint as its lane copy would be: True when its fate is safe
        (delivered, or its retry, dead letter or park confirmed), False when a copy into its lane is owed."""
        copy = InlineCopy(event, headers, runner.queue_names[0])
        began = self.clock()
        try:
            await runner.deliver(copy)  # type: ignore[arg-type]  # read and settled as a lane message is
        finally:
            ended = self.clock()
            self.policy.ended(runner.endpoint.name, ended - began, ended)
        stored = copy.stored is True
        if stored:
            self.delivered += 1
        else:
            self.handed += 1
        return stored


def _nearest(starts: list[float], began: float) -> int:
    """The index in sorted ``starts`` of the one nearest ``began`` (the earlier of two as near)."""
    i = bisect.bisect_left(starts, began)
    if i == len(starts) or (i > 0 and began - starts[i - 1] <= starts[i] - began):
        return i - 1
    return i


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
