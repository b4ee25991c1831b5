"""Binary delay levels: any delay, exact to the millisecond, from a handful of fixed-TTL queues.

Level ``k`` is a queue whose ``x-message-ttl`` is ``2^k`` ms. A delay of ``d`` ms is spelled as the binary
digits of ``d``, least significant first, one routing-key word per level, followed by the name of the queue
the message returns to: 5 ms to ``warren.ep.acme.q`` is ``1.0.1.0.warren.ep.acme.q`` with four levels. The
message enters the exchange of the highest level; each level's exchange sends it into that level's queue when
its word is ``1`` (it waits there, then dead-letters to the next lower exchange) or straight on when it is
``0``. The last hop routes on the tail of the key back to the queue. Because every queue has one fixed TTL,
messages expire in the order they arrived and a short delay never waits behind a long one.
"""

from __future__ import annotations

import math

__all__ = ["delay_routing_key", "level_count", "levels_for_delay", "quantise_ms", "reach"]


def level_count(longest_delay_seconds: float) -> int:
    """How many levels reach the longest delay a policy can ask for."""
    return max(1, math.ceil(longest_delay_seconds * 1000).bit_length())


def reach(levels: int) -> float:
    """The longest delay, in seconds, that ``levels`` levels hold a message (a longer one is cut to it)."""
    return ((1 << levels) - 1) / 1000


def quantise_ms(delay_seconds: float, levels: int) -> int:
    """The delay in whole milliseconds, clamped to what ``levels`` levels can express."""
    return max(0, min(round(delay_seconds * 1000), (1 << levels) - 1))


def levels_for_delay(delay_ms: int, levels: int) -> tuple[int, ...]:
    """The levels a message of this delay waits in, lowest first (its set bits)."""
    return tuple(k for k in range(levels) if delay_ms >> k & 1)


def delay_routing_key(delay_seconds: float, levels: int, destination_queue: str) -> str:
    """The routing key that makes the chain hold a message ``delay_seconds`` then return it to its queue."""
    delay_ms = quantise_ms(delay_seconds, levels)
    bits = ".".join("1" if delay_ms >> k & 1 else "0" for k in range(levels))
    return f"{bits}.{destination_queue}"
