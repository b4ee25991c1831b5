"""AMQP topic matching (``*`` one word, ``#`` zero or more), as a RabbitMQ topic exchange does it. Pure.

One implementation for every place Warren matches event types against patterns itself: the ingest API's
``api.allowed_event_types`` and the DLQ tools' ``--type`` filters.
"""

from __future__ import annotations

__all__ = ["topic_matches"]


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
