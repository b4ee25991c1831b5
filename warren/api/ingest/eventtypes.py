"""Which event types the API accepts: AMQP topic patterns (``*`` one word, ``#`` zero or more)."""

from __future__ import annotations

from collections.abc import Sequence

from warren.topology.topics import topic_matches

__all__ = ["TypeFilter"]


class TypeFilter:
    """The configured ``api.allowed_event_types``; None allows every type."""

    def __init__(self, patterns: Sequence[str] | None) -> None:
        self.patterns = tuple(patterns) if patterns is not None else None

    def allows(self, event_type: str) -> bool:
        if self.patterns is None:
            return True
        return any(topic_matches(p, event_type) for p in self.patterns)
