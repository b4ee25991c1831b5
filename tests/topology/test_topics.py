"""Topic matching as a RabbitMQ topic exchange does it: the ingest API's type filter and the DLQ's --type."""

from __future__ import annotations

import pytest

from warren.topology.topics import topic_matches


@pytest.mark.parametrize(
    ("pattern", "key", "matches"),
    [
        ("order.created", "order.created", True),
        ("order.*", "order.created", True),
        ("order.*", "order.created.v2", False),
        ("order.*", "order", False),
        ("order.#", "order", True),
        ("order.#", "order.a.b.c", True),
        ("#", "anything.at.all", True),
        ("#.paid", "order.paid", True),
        ("#.paid", "paid", True),
        ("#.paid", "order.paid.late", False),
        ("*.*", "a.b", True),
        ("*.*", "a", False),
        ("a.#.z", "a.z", True),
        ("a.#.z", "a.b.c.z", True),
        ("a.#.z", "a.b.c", False),
        ("*.paid", "invoice.paid", True),
        ("order.paid", "order.refunded", False),
    ],
)
def test_topic_matches_like_a_rabbitmq_topic_exchange(pattern: str, key: str, matches: bool) -> None:
    assert topic_matches(pattern, key) is matches
