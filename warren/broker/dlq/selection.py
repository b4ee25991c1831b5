"""Which dead letters an operator means: by type pattern, dead-time window, ids, and how many. Pure."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass

from warren.broker.dlq.letters import DeadLetter
from warren.core.moments import within_range
from warren.topology.durations import parse_duration
from warren.topology.topics import topic_matches

__all__ = ["Selection", "parse_moment", "select"]


def parse_moment(text: str, now: dt.datetime) -> int:
    """A moment as epoch ms: ISO 8601 (naive means UTC), or a duration meaning that long ago (``15m``).

    ValueError for anything else, and for a moment no date holds (``999999999d`` ago, year 0 with an offset):
    such a moment would fail later, where it is printed.
    """
    try:
        seconds = now.timestamp() - parse_duration(text)
    except ValueError:
        seconds = _iso_seconds(text)
    if not within_range(seconds):
        raise ValueError(f"{text!r} is before year 1 or after year 9999")
    return round(seconds * 1000)


def _iso_seconds(text: str) -> float:
    try:
        moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"{text!r} is neither an ISO 8601 time (2024-05-01T12:00:00Z) nor a duration ago (15m, 2h, 1d)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.timestamp()


@dataclass(frozen=True)
class Selection:
    """Filters on dead letters. Time bounds apply to the dead-letter time; ``since`` inclusive, ``until`` not."""

    types: tuple[str, ...] = ()
    since_ms: int | None = None
    until_ms: int | None = None
    ids: frozenset[str] | None = None
    limit: int | None = None
    endpoint: str | None = None  # a shared lane's DLQ: the letters naming this endpoint (warren-endpoint) only

    @property
    def narrows(self) -> bool:
        """Whether this selection may leave some messages out (so a whole-queue shovel cannot serve it)."""
        return (
            bool(self.types)
            or self.since_ms is not None
            or self.until_ms is not None
            or self.ids is not None
            or (self.limit is not None)
            or self.endpoint is not None
        )

    def matches(self, letter: DeadLetter) -> bool:
        if self.endpoint is not None and letter.endpoint != self.endpoint:
            return False
        if self.types and not any(topic_matches(p, letter.event_type) for p in self.types):
            return False
        if self.ids is not None and letter.event_id not in self.ids:
            return False
        if self.since_ms is not None or self.until_ms is not None:
            if letter.dead_ms is None:
                return False
            if self.since_ms is not None and letter.dead_ms < self.since_ms:
                return False
            if self.until_ms is not None and letter.dead_ms >= self.until_ms:
                return False
        return True


def select(letters: Iterable[DeadLetter], selection: Selection, *, newest_first: bool = False) -> list[DeadLetter]:
    """The matching letters in queue order (oldest first) or reversed, at most ``selection.limit`` of them."""
    chosen = [letter for letter in letters if selection.matches(letter)]
    if newest_first:
        chosen.reverse()
    return chosen if selection.limit is None else chosen[: selection.limit]
