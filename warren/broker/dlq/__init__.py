"""Dead-letter queues for operators: read them without taking anything, replay them, purge them.

- ``letters``   one dead letter as read from its headers (pure)
- ``selection`` filters: type pattern, dead-time window, ids, limit (pure)
- ``browse``    non-destructive reading (unacked consume, then the channel returns everything)
- ``move``      filtered replay: publish with a confirm, then ack the DLQ copy
- ``shovel``    whole-queue replay inside RabbitMQ by a dynamic shovel
- ``purge``     emptying a DLQ (or taking one lane endpoint's letters out of its lane's DLQ)
- ``recover``   what failed since a moment, replayed (the admin API's and ``warren endpoint recover``'s)
"""

from __future__ import annotations

from warren.broker.dlq.browse import MAX_SCAN, browse, delivery_limit
from warren.broker.dlq.letters import DeadLetter
from warren.broker.dlq.move import MoveReport, dlq_route, move_selected
from warren.broker.dlq.purge import purge_dlq, purge_selected
from warren.broker.dlq.recover import recover
from warren.broker.dlq.selection import Selection, parse_moment, select
from warren.broker.dlq.shovel import ShovelReport, replay_by_shovel

__all__ = [
    "MAX_SCAN",
    "DeadLetter",
    "MoveReport",
    "Selection",
    "ShovelReport",
    "browse",
    "delivery_limit",
    "dlq_route",
    "move_selected",
    "parse_moment",
    "purge_dlq",
    "purge_selected",
    "recover",
    "replay_by_shovel",
    "select",
]
