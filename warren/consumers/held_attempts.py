"""What an ordered endpoint's runner remembers of messages it gave back mid-schedule. Pure state, no I/O.

An ordered message is retried in place, unacked, so its attempt count is in no header while it is held. When
it stops being held before it is settled (the hold limit, a parked circuit, a gate) the runner remembers the
attempts it spent and when its next attempt is due, so that its next delivery here continues the schedule
instead of starting it again (another worker starts from the headers' count; ``max_age`` bounds it either way).
It also counts the returns that only waited for that attempt (``waited``): they are no hand-backs of an attempt,
and ``delivery.max_handbacks`` does not count them; nor the returns of messages that waited behind their key's head
and went back with their partition (or ordered lane) without ever being started (``not_started``): RabbitMQ counts
each such return in ``x-delivery-count`` as it counts a hand-back. Bounded: past ``HELD_MEMORY`` messages the oldest
memory goes.
"""

from __future__ import annotations

from typing import Any

from warren.transport.base import Delivery

__all__ = ["HELD_MEMORY", "Held", "HeldAttempts"]

HELD_MEMORY = 1000  # ordered messages handed back (hold limit, parked) whose attempt counts a runner remembers
Held = tuple[int, int | None, list[dict[str, Any]]]  # attempts made, first attempt (ms), history


class HeldAttempts:
    """Event id -> (attempts, first attempt ms, history) of messages given back, and when each is due next."""

    def __init__(self, limit: int = HELD_MEMORY) -> None:
        self.limit = limit
        self._held: dict[str, Held] = {}
        self._due: dict[str, float] = {}  # time.monotonic() of the next attempt
        self._waits: dict[str, int] = {}  # returns that only waited for the next attempt (hold limit < its delay)

    def due(self, event_id: str) -> float | None:
        return self._due.get(event_id)

    def recall(self, delivery: Delivery) -> Held:
        """The attempts spent so far: remembered here, else the message's headers'."""
        held = self._held.get(delivery.event_id)
        if held is None:
            return delivery.attempts_made, delivery.first_attempt_ms, list(delivery.history)
        return held[0], held[1], list(held[2])

    def remember(self, event_id: str, held: Held, due: float | None = None) -> None:
        if event_id not in self._held and len(self._held) >= self.limit:
            self.forget(next(iter(self._held)))
        self._held[event_id] = held
        if due is not None:
            self._due[event_id] = due

    def keep_spent(self, delivery: Delivery, held: Held) -> None:
        """Remember the attempts an ordered message spent in place before it is handed back without a due time."""
        if held[0] > delivery.attempts_made:
            self.remember(delivery.event_id, held)
            self._due.pop(delivery.event_id, None)

    def waited(self, event_id: str) -> None:
        """Count one return of a remembered message that was no attempt's: its delay was past the hold limit."""
        if event_id in self._held:
            self._waits[event_id] = self._waits.get(event_id, 0) + 1

    def not_started(self, event_id: str | None) -> None:
        """Count one return of a message this runner never started: it went back with its partition's channel."""
        if event_id is None:
            return
        if event_id not in self._waits and len(self._waits) >= self.limit:
            self._waits.pop(next(iter(self._waits)))
        self._waits[event_id] = self._waits.get(event_id, 0) + 1

    def waits(self, event_id: str) -> int:
        """How many of the message's returns (``x-delivery-count``) were waits here or unstarted, not hand-backs."""
        return self._waits.get(event_id, 0)

    def forget(self, event_id: str) -> None:
        self._held.pop(event_id, None)
        self._due.pop(event_id, None)
        self._waits.pop(event_id, None)
