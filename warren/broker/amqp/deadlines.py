"""Giving up sends still waiting for their confirm at their deadline, with one timer for all of them.

A node can keep a connection alive, answering heartbeats, and never confirm (RabbitMQ 4.0 leaves a node resumed
after a pause past the net tick split from the others: docs/cluster.md), so the heartbeat does not bound the wait
for a confirm and the publisher's deadline has to. A timer per publish (``asyncio.timeout``) cost about 4 µs of
the publisher's 20 µs of CPU per event (bench/publish_overhead.py); here a send costs a set insert and removal,
and one timer, armed at the earliest deadline still pending, looks at the sends in flight when it fires.

``watch`` before the send and ``done`` after it (``finally``); a send still watched at its deadline has its task
cancelled and ``expired`` set, and the caller turns that CancelledError into its own error (``uncancel`` first).
"""

from __future__ import annotations

import asyncio

__all__ = ["Deadlines", "Watched"]


class Watched:
    """One send being waited for: its task, when to give it up, whether it was."""

    __slots__ = ("expired", "give_up", "task")

    def __init__(self, task: asyncio.Task[object], give_up: float) -> None:
        self.task = task
        self.give_up = give_up
        self.expired = False


class Deadlines:
    """The sends of one event loop (a publisher's) still waiting, and the one timer that gives them up."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None  # the first watch's (made outside a loop is fine)
        self._pending: set[Watched] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._armed_at = float("inf")  # when the timer fires (inf: not armed)

    def watch(self, give_up: float) -> Watched:
        """Watch the current task's send until ``give_up`` (the loop's clock)."""
        task = asyncio.current_task()
        assert task is not None, "watch() runs in a task"
        watched = Watched(task, give_up)
        self._pending.add(watched)
        if give_up < self._armed_at:  # nothing armed, or a shorter deadline than the one armed: arm it sooner
            if self._timer is not None:
                self._timer.cancel()
            self._loop = loop = self._loop or task.get_loop()
            self._timer, self._armed_at = loop.call_at(give_up, self._sweep), give_up
        return watched

    def done(self, watched: Watched) -> None:
        self._pending.discard(watched)

    def _sweep(self) -> None:
        self._timer, self._armed_at = None, float("inf")
        loop = self._loop
        assert loop is not None
        now = loop.time()
        for watched in [w for w in self._pending if w.give_up <= now]:
            self._pending.discard(watched)
            watched.expired = True
            watched.task.cancel()
        if self._pending:
            self._armed_at = min(w.give_up for w in self._pending)
            self._timer = loop.call_at(self._armed_at, self._sweep)
