"""Fairness inside a lane, as pure policy: how much of the lane's window an endpoint may hold, and whose
waiting message starts next (deficit round robin, billed in time).

A lane's window (``[lanes] prefetch`` unacked messages) is what its endpoints share. Two rules keep a slow or
failing endpoint from taking it (docs/architecture.md, "Shared lanes"):

- ``may_hold``: whether an endpoint may hold one more of the window's messages (in flight or waiting its
  turn): yes within its fair share of the window (``window_share``), and beyond it only while it is not slow:
  while it would work through what it holds sooner than a parked message could come back, or while its
  deliveries take no longer than ``SLOWER`` times its busy lane-mates' (a lane whose endpoints are all slow
  together, a loaded receiver or machine, parks nothing: parking would only add work). Otherwise the message
  is parked through the delay chain, so the lane's head moves. Parking a fast endpoint's surplus would only
  delay it and cost the broker a trip through the delay chain; a slow one's must not sit in the window.
  ``park_delay``: for how long, longer for an endpoint whose deliveries take long, so that its surplus comes
  round about when it has room again instead of passing the lane's head every second.
- ``DeficitRoundRobin``: the held messages wait in a FIFO per endpoint, and at most ``budget`` of them are in
  flight on the lane at once, each endpoint at most its ``concurrency``. Which FIFO's head starts next is
  decided by deficit round robin where a message's cost is its endpoint's recent mean *delivery time* (an
  exponentially weighted mean of how long its deliveries took, from start to settled, timeouts included).
  Each round gives every waiting endpoint the same quantum of time; one whose deliveries take 100 times
  longer starts 100 times fewer of them. So every busy endpoint gets the same share of the lane's in-flight
  time, and a slow endpoint's hold on the lane is bounded by that share whatever its timeout, while a fast
  one is never held behind it. Time, not body size, is what a delivery takes from the lane: a 10 s timeout
  with a 100-byte body holds a slot 1,000 times longer than a 10 ms answer to a 100 KiB one.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Generic, TypeVar

__all__ = ["DeficitRoundRobin", "held_park_delay", "may_hold", "park_delay", "park_left", "window_share"]

T = TypeVar("T")

SMOOTHING = 0.2  # weight of the newest delivery time in an endpoint's mean
FLOOR = 0.001  # seconds: the least a delivery is billed (a mean of 0 would make an endpoint free)
SLOWER = 4.0  # an endpoint whose deliveries take this many times its lane-mates' (their median) is slow
SLACK = 1e-9  # seconds: credit that float rounding may leave short of a cost still pays it
PARK_DUE = 0.02  # seconds: a park that comes back this close to its end (or later) is over


def window_share(prefetch: int, busy_others: int, concurrency: int) -> int:
    """How many of a lane's ``prefetch`` messages one endpoint may hold at once (in flight or waiting its turn).

    The window divided among the lane's busy endpoints (``busy_others`` besides this one), counted as at least
    two, so that one endpoint never holds more than half of it and the others always find room; and at most
    twice its ``concurrency``, so that its FIFO stays short. At least 1.
    """
    return max(1, min(prefetch // max(2, busy_others + 1), 2 * concurrency))


def may_hold(
    held: int, share: int, prefetch: int, concurrency: int, seconds_each: float, wait: float, typical: float
) -> bool:
    """Whether an endpoint holding ``held`` of a lane's ``prefetch`` window may hold one more message.

    Within its ``share`` (``window_share``), always. Beyond it, only while it is not slow: its deliveries
    (``seconds_each``, its mean or the age of its oldest one in flight, whichever is longer) would see the new
    message through within ``wait`` seconds (the least time a parked message is away), or take no longer than
    ``SLOWER`` times ``typical`` (its busy lane-mates' median); and never past twice its ``concurrency`` or three
    quarters of the window, so that a fast endpoint that turns slow holds a bounded part of it.
    """
    if held < share:
        return True
    if held >= min(2 * concurrency, prefetch * 3 // 4):
        return False
    return seconds_each <= SLOWER * typical or seconds_each * math.ceil((held + 1) / max(1, concurrency)) <= wait


def park_delay(base: float, limit: float, mean_seconds: float, held: int, concurrency: int) -> float:
    """Seconds a message over its endpoint's share waits in the delay chain before it comes back to the lane.

    About the time the endpoint needs to work through what it holds (``held`` messages, ``concurrency`` at a
    time, ``mean_seconds`` each), at least ``base`` and at most ``limit``: a fast endpoint's surplus comes back
    soon, a slow one's passes the lane's head a bounded number of times instead of once every ``base``.
    """
    needed = mean_seconds * math.ceil(held / max(1, concurrency))
    return max(base, min(limit, needed))


def held_park_delay(base: float, limit: float, times: int) -> float:
    """Seconds a message of a held endpoint (circuit open, paused, disabled) is parked, the ``times``-th time in
    a row: ``base``, doubling each time, at most ``limit``. A long outage's messages then pass the lane's head
    (and the delay chain) a few times a minute instead of every ``base`` seconds; its probe needs only one.
    """
    return min(limit, base * 2.0 ** min(max(0, times), 16))


def park_left(until_ms: int | None, now_ms: int) -> float:
    """Seconds a lane message back from a park longer than the delay chain reaches (``warren-park-until``) must
    wait still; 0 when it is due (within ``PARK_DUE``: a delay chain's lateness is a few milliseconds)."""
    if until_ms is None or until_ms - now_ms <= PARK_DUE * 1000:
        return 0.0
    return (until_ms - now_ms) / 1000


@dataclass
class _Flow(Generic[T]):
    """One endpoint in a lane: its waiting messages, how many are in flight, its credit and its mean cost."""

    waiting: deque[T] = field(default_factory=deque)
    limit: int = 1  # its concurrency
    in_flight: int = 0
    deficit: float = 0.0


class DeficitRoundRobin(Generic[T]):
    """Deficit round robin over a lane's endpoints, billed in seconds; pure (no clock, no I/O).

    ``push`` a waiting item under its endpoint; ``pop`` the next item to start (None: the lane's ``budget`` is
    in flight, or every endpoint with something waiting is at its own limit); ``finished`` when a started item
    is done, with how long it took. ``quantum`` is the time credit each waiting endpoint gets per round.
    """

    def __init__(self, budget: int, quantum: float = 0.01) -> None:
        self.budget = max(1, budget)
        self.quantum = quantum
        self.in_flight = 0
        self._flows: dict[str, _Flow[T]] = {}
        self._active: deque[str] = deque()  # endpoints with something waiting, in round order
        self._costs: dict[str, float] = {}  # each endpoint's mean delivery time, kept while it is idle too

    def cost(self, name: str) -> float:
        """The mean seconds a delivery of ``name`` takes (a first one is billed one quantum)."""
        return max(FLOOR, self._costs.get(name, self.quantum))

    def waiting(self, name: str) -> int:
        flow = self._flows.get(name)
        return len(flow.waiting) if flow else 0

    def started(self, name: str) -> int:
        flow = self._flows.get(name)
        return flow.in_flight if flow else 0

    def push(self, name: str, item: T, limit: int) -> None:
        """``item`` waits its turn behind ``name``'s others; ``limit`` is the endpoint's concurrency."""
        flow = self._flows.setdefault(name, _Flow())
        flow.limit = max(1, limit)
        if not flow.waiting:
            self._active.append(name)
        flow.waiting.append(item)

    def drop(self, name: str, item: T) -> bool:
        """Take a waiting ``item`` out (its message went elsewhere). False if it was not waiting."""
        flow = self._flows.get(name)
        if flow is None or item not in flow.waiting:
            return False
        flow.waiting.remove(item)
        if not flow.waiting:
            self._idle(name, flow)
        return True

    def pop(self) -> tuple[str, T] | None:
        """The next item to start, in deficit-round-robin order, or None if none may start now."""
        if self.in_flight >= self.budget or not self._active:
            return None
        head = self._active[0]  # the common case: the endpoint whose turn it is can start, with credit enough
        flow = self._flows[head]
        if flow.in_flight < flow.limit and flow.deficit + SLACK >= self.cost(head):
            return head, self._start(head, flow)
        ready = [name for name in self._active if self._can_start(name)]
        if not ready:
            return None
        # Skip the rounds in which nobody could start: give every ready endpoint the credit of as many rounds as
        # the closest one needs (exact deficit round robin, without looping a round at a time).
        rounds = min(self._rounds_needed(name) for name in ready)
        if rounds:
            for name in ready:
                self._flows[name].deficit += rounds * self.quantum
        # Serve in round order from the head of the active list: the first ready one with credit enough.
        for _ in range(len(self._active)):
            name = self._active[0]
            flow = self._flows[name]
            if self._can_start(name) and flow.deficit + SLACK >= self.cost(name):
                return name, self._start(name, flow)
            self._active.rotate(-1)  # its turn is over for this round (no credit, or at its limit)
            if self._can_start(name):
                flow.deficit += self.quantum  # it keeps its place in the next round, with that round's credit
        raise AssertionError("a ready endpoint had credit enough after the skipped rounds")  # pragma: no cover

    def finished(self, name: str, seconds: float) -> None:
        """A started item of ``name`` is done after ``seconds``: its cost, the budget and its slot are freed."""
        self.in_flight = max(0, self.in_flight - 1)
        previous = self._costs.get(name)
        took = max(FLOOR, seconds)
        self._costs[name] = took if previous is None else (1 - SMOOTHING) * previous + SMOOTHING * took
        flow = self._flows.get(name)
        if flow is None:
            return
        flow.in_flight = max(0, flow.in_flight - 1)
        if not flow.waiting and not flow.in_flight:
            del self._flows[name]

    def forget(self, name: str) -> None:
        """``name`` is no longer served here: its mean cost goes (its flow went when its last item finished)."""
        self._costs.pop(name, None)

    def _can_start(self, name: str) -> bool:
        flow = self._flows[name]
        return bool(flow.waiting) and flow.in_flight < flow.limit

    def _rounds_needed(self, name: str) -> int:
        short = self.cost(name) - self._flows[name].deficit
        return max(0, math.ceil((short - SLACK) / self.quantum))

    def _start(self, name: str, flow: _Flow[T]) -> T:
        item = flow.waiting.popleft()
        flow.deficit -= self.cost(name)
        flow.in_flight += 1
        self.in_flight += 1
        if not flow.waiting:
            self._idle(name, flow)
        return item

    def _idle(self, name: str, flow: _Flow[T]) -> None:
        """Nothing of ``name`` waits any more: it leaves the round, and its credit with it (no banking)."""
        flow.deficit = 0.0
        self._active.remove(name)
        if not flow.in_flight:
            del self._flows[name]
