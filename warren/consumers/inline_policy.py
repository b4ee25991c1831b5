"""Which lane endpoints get their first attempt inline (warren/consumers/lane_inline.py): the policy, pure.

An endpoint seen answering fast, not barred, within its share of the router's window; a new one has one trial;
a slow one is barred for a while, longer each time. The clock is passed in; lane_inline.py does the I/O.
"""

from __future__ import annotations

import bisect
import statistics
from collections import deque
from dataclasses import dataclass, field

__all__ = ["BAR_BASE", "BAR_MAX", "FREE_SHARE", "SLOW", "WINDOW_SHARE", "InlinePolicy"]

SLOW = 1.0  # seconds: an inline delivery that took longer bars its endpoint from the inline path for a while,
SLOWER = 4.0  # if it also took this many times the recent inline deliveries' median (all slow together: none)
RECENT = 64  # inline deliveries that median is taken over
BAR_BASE = 30.0  # seconds the first such bar lasts, doubling each time in a row
BAR_MAX = 600.0  # and at most this
WINDOW_SHARE = 4  # an endpoint holds at most 1/this of the router's window with inline deliveries
FREE_SHARE = 8  # and 1/this of the window (one event at least) is never held by inline deliveries
PROOF_SHARE = 4  # a new endpoint's events wait for its first answer at least 1/this of the slow mark


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
        # attempt's answer only within the slow mark from then (``proof_due``).
        self._first_seen: dict[str, float] = {}
        # Endpoints whose trial (their one inline delivery before they are proven, cut at the slow mark) began.
        self._tried: set[str] = set()
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
        if name not in self._proven and name in self._tried:
            return "unproven"  # its trial is made or under way: through its lane until an attempt is fast
        if self.in_flight >= self.total_cap:
            return "window"
        state = self._states.get(name)
        if state is None:
            return None
        self._overdue(name, state, now)
        if now < state.barred_until:
            return "barred"
        return "endpoint" if state.in_flight >= min(self.cap, concurrency) else None

    def on_trial(self, name: str) -> bool:
        """Whether an inline delivery of ``name`` beginning now is its trial: the endpoint is not proven fast."""
        return name not in self._proven

    def proof_due(self, name: str, now: float) -> float | None:
        """Until when an event of ``name``, not yet proven fast, may wait for its first attempt's answer, or None:
        not at all. Only within ``proof_wait`` from its trial's start (or from the first event routed to it,
        when that went through its lane): so a new endpoint that hangs holds the events waiting for it once
        (within its quarter of the window), and for no longer than fast endpoints take to answer, by far."""
        first = self._first_seen.setdefault(name, now)
        due = first + self.proof_wait()
        return due if first < now < due else None

    def proof_wait(self) -> float:
        """How long a new endpoint's events may wait for its first answer: ``SLOWER`` times the recent inline
        deliveries' median, at least a quarter of the slow mark (a first request connects, and a worker's start
        has no median yet) and at most the slow mark.

        Not the slow mark itself: each waiting event is unacked in its route partition, and a new endpoint's
        events are spread over them all, so one that hangs left every partition's later acks to go alone (each a
        settle of its own on the quorum queue) for as long as they waited (docs/deployment.md, "The route
        partitions' acks")."""
        return min(self.slow, max(self.slow / PROOF_SHARE, SLOWER * self._typical))

    def may_wait(self, name: str, waiting: int, waiting_all: int) -> bool:
        """Whether one more event may wait for an inline slot of ``name`` (``waiting`` of its events do already,
        ``waiting_all`` of every endpoint's): held with its inline deliveries, within the same quarter of the
        window, and everything waiting or in flight within the part of the window inline deliveries may hold."""
        state = self._states.get(name)
        in_flight = state.in_flight if state is not None else 0
        return in_flight + waiting < self.cap and self.in_flight + waiting_all < self.total_cap

    def began(self, name: str, now: float | None = None) -> None:
        """An inline delivery of ``name`` begins (at ``now``: then one still running when it is slow bars it)."""
        if name not in self._proven:  # its trial: once, until it is forgotten (``forget``)
            self._tried.add(name)
            self._first_seen.setdefault(name, float("-inf") if now is None else now)
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

        So an endpoint not yet seen to answer fast (new to this worker after its trial, or slow since) is served
        through its lane, where a hanging attempt holds only a lane's message, not the router's. Its trial (its
        first inline delivery, ``on_trial``) is cut at the slow mark, so a new endpoint that hangs holds one routed
        event for at most that, once (and its events waiting for the trial's answer as long). Why: an inline
        delivery keeps its event unacked in its route partition for as long as it runs, and every later event of
        that partition can then only be acked alone (``AckBatcher``'s stragglers), each a settle of its own on the
        quorum queue, until it ends. A hanging endpoint's first deliveries (16, for 10 s) made most of the
        partitions' acks single ones: the broker's work per event of every endpoint went up by half or more
        (docs/deployment.md, "Isolation").
        """
        if seconds <= self.slow or not self._slow(seconds):  # the first test alone for nearly every attempt
            self._proven.add(name)
            self._first_seen.pop(name, None)
        else:
            self._proven.discard(name)

    def forget(self, name: str) -> None:
        """``name`` is no longer a lane endpoint served here (removed, moved, or reconfigured): nothing of it is kept.
        Served again, it has a trial again."""
        self._proven.discard(name)
        self._tried.discard(name)
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


def _nearest(starts: list[float], began: float) -> int:
    """The index in sorted ``starts`` of the one nearest ``began`` (the earlier of two as near)."""
    i = bisect.bisect_left(starts, began)
    if i == len(starts) or (i > 0 and began - starts[i - 1] <= starts[i] - began):
        return i - 1
    return i
