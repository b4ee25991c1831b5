"""Which event types the API accepts: AMQP topic patterns (``*`` one word, ``#`` zero or more), matched here."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["TypeFilter", "topic_matches"]


def topic_matches(pattern: str, routing_key: str) -> bool:
    """True when ``routing_key`` matches the topic ``pattern`` exactly as a RabbitMQ topic exchange would."""
    return _match(pattern.split("."), 0, routing_key.split("."), 0)


def _match(pattern: list[str], p: int, words: list[str], w: int) -> bool:
    if p == len(pattern):
        return w == len(words)
    if pattern[p] == "#":
        # '#' takes zero words, or one word and stays in place to take more.
        return _match(pattern, p + 1, words, w) or (w < len(words) and _match(pattern, p, words, w + 1))
    if w == len(words):
        return False
    return pattern[p] in ("*", words[w]) and _match(pattern, p + 1, words, w + 1)


class TypeFilter:
    """The configured ``api.allowed_event_types``; None allows every type."""

    def __init__(self, patterns: Sequence[str] | None) -> None:
        self.patterns = tuple(patterns) if patterns is not None else None

    def allows(self, event_type: str) -> bool:
        if self.patterns is None:
            return True
        return any(topic_matches(p, event_type) for p in self.patterns)
