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
first event goes through its lane, the next wait a while for its answer), not held (circuit open, paused,
disabled, or not accepting), without a fleet-wide limit, each with at most its ``concurrency`` and a
quarter of the router's window in inline deliveries, and all of them together leaving an eighth of it free (that
part always routes copies, which take no time); one that turns slow (over 1 s, and 4 times the recent inline
deliveries' median: on a machine where everything is slow together nobody is) is barred for a while, longer
each time: as soon as one of its inline deliveries has run that long, not only when it ends. An event that
finds its endpoint's inline slots busy waits for one, within the same bounds and at most that long
(``InlineDeliveries.acquire``), rather than costing a copy.
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
from warren.consumers.inline_lines import WaitingLines
from warren.consumers.lanes import LaneRunner

__all__ = ["BAR_BASE", "BAR_MAX", "SLOW", "InlineCopy", "InlineDeliveries", "InlinePolicy"]

SLOW = 1.0  # seconds: an inline delivery that took longer bars its endpoint from the inline path for a while,
SLOWER = 4.0  # if it also took this many times the recent inline deliveries' median (all slow together: none)
RECENT = 64  # inline deliveries that median is taken over
BAR_BASE = 30.0  # seconds the first such bar lasts, doubling each time in a row
BAR_MAX = 600.0  # and at most this
WINDOW_SHARE = 4  # an endpoint holds at most 1/this of the router's window with inline deliveries
FREE_SHARE = 8  # and 1/this of the window (one event at least) is never held by inline deliveries
WAIT = True  # an event whose endpoint has all its inline slots busy waits for one (at most SLOW), not copied


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
        self.window = window
        self.cap = max(1, window // WINDOW_SHARE)
        # An eighth of the window (one event at least) is never held by inline deliveries: it always routes copies.
        self.total_cap = window - max(1, window // FREE_SHARE)
        self.partitions = 1
        self.in_flight = 0
        self.slow, self.bar, self.bar_max = slow, bar, bar_max
        self._states: dict[str, _State] = {}
        # Endpoints whose last attempt (inline or through their lane) was fast: only they get inline deliveries.
        self._proven: set[str] = set()
        # When this worker first routed to each endpoint not yet proven: its events may wait for its first
        # attempt's answer only within the slow mark from then (``may_await_proof``).
        self._first_seen: dict[str, float] = {}
        self._recent: deque[float] = deque(maxlen=RECENT)  # the last inline deliveries' seconds, all endpoints
        self._typical = 0.0  # their median, taken again every RECENT // 8 deliveries
        self._samples = 0

    def consumed(self, partitions: int) -> None:
        """The router consumes ``partitions`` route partitions, each with a window of its own (``window`` events):
        inline deliveries and the events waiting for them may hold seven eighths of them all, each endpoint still
        at most a quarter of one (its events may all be of one key, so in one partition)."""
        partitions = max(1, partitions)
        if partitions != self.partitions:
            self.partitions, whole = partitions, self.window * partitions
            self.total_cap = whole - max(1, whole // FREE_SHARE)

    def may(self, name: str, concurrency: int, now: float) -> bool:
        """Whether ``name`` (of ``concurrency``) may begin an inline delivery now."""
        return self.refusal(name, concurrency, now) is None

    def refusal(self, name: str, concurrency: int, now: float) -> str | None:
        """Why ``name`` (of ``concurrency``) may not begin an inline delivery now, or None: it may."""
        if name not in self._proven:
            return "unproven"
        if self.in_flight >= self.total_cap:
            return "window"
        state = self._states.get(name)
        if state is None:
            return None
        self._overdue(name, state, now)
        if now < state.barred_until:
            return "barred"
        return "endpoint" if state.in_flight >= min(self.cap, concurrency) else None

    def proof_due(self, name: str, now: float) -> float | None:
        """Until when an event of ``name``, not yet proven fast, may wait for its first attempt's answer, or None:
        not at all. Not the first one routed to it (its copy makes that attempt, through its lane), and only
        within the slow mark from that one: so a new endpoint that hangs holds the events waiting for it once
        (within its quarter of the window), for at most the slow mark."""
        first = self._first_seen.setdefault(name, now)
        return first + self.slow if first < now < first + self.slow else None

    def may_wait(self, name: str, waiting: int, waiting_all: int) -> bool:
        """Whether one more event may wait for an inline slot of ``name`` (``waiting`` of its events do already,
        ``waiting_all`` of every endpoint's): held with its inline deliveries, within the same quarter of the
        window, and everything waiting or in flight within the part of the window inline deliveries may hold."""
        state = self._states.get(name)
        in_flight = state.in_flight if state is not None else 0
        return in_flight + waiting < self.cap and self.in_flight + waiting_all < self.total_cap

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
            self._first_seen.pop(name, None)
        else:
            self._proven.discard(name)

    def forget(self, name: str) -> None:
        """``name`` is no longer a lane endpoint served here (removed, moved, or reconfigured): nothing of it is kept.
        Served again, it proves itself again through its lane first."""
        self._proven.discard(name)
        self._states.pop(name, None)
        self._first_seen.pop(name, None)

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
