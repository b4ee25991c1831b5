"""A replayed message starts a fresh attempt budget once: the marker is read, then dropped. Pure."""

from __future__ import annotations

import orjson

from warren.broker import wire
from warren.consumers.delivery import dead_headers, is_replayed, parse_delivery, retry_headers

BODY = orjson.dumps({"id": "evt_1", "type": "a.b", "timestamp": "2024-01-01T00:00:00Z", "data": {}})
DEAD = {
    wire.H_ATTEMPT: 5,
    wire.H_PUBLISHED: 1_000,
    wire.H_FIRST_ATTEMPT: 2_000,
    wire.H_DEAD_REASON: "max_attempts (5) reached",
    wire.H_HISTORY: orjson.dumps([{"at": 2_000, "status": 500, "ms": 3}]).decode(),
}
SHOVELLED = {**DEAD, wire.H_SHOVELLED: [{"shovel-name": "w.replay.acme", "src-queue": "w.ep.acme.dlq"}]}


def test_both_replay_markers_are_recognised() -> None:
    assert is_replayed({**DEAD, wire.H_REPLAYED: 1})
    assert is_replayed(SHOVELLED)
    assert not is_replayed(DEAD)
    # A shovel used for something else (moving live queues between brokers) is not a replay
    assert not is_replayed({wire.H_ATTEMPT: 2, wire.H_SHOVELLED: [{}]})


def test_a_shovel_replay_resets_the_budget_and_the_age() -> None:
    delivery = parse_delivery(BODY, "evt_1", SHOVELLED, now_ms=9_000, max_payload=1 << 20)
    assert (delivery.attempts_made, delivery.first_attempt_ms, delivery.published_ms) == (0, None, 9_000)
    assert len(delivery.history) == 1  # the story so far is kept


def test_the_next_attempt_carries_no_marker_so_the_reset_happens_once() -> None:
    delivery = parse_delivery(BODY, "evt_1", SHOVELLED, now_ms=9_000, max_payload=1 << 20)
    retry = retry_headers(SHOVELLED, delivery, attempt_ms=9_000, status=503, error="HTTP 503", duration=0.01)
    assert wire.H_SHOVELLED not in retry and retry[wire.H_ATTEMPT] == 1
    again = parse_delivery(BODY, "evt_1", retry, now_ms=9_500, max_payload=1 << 20)
    assert again.attempts_made == 1 and not is_replayed(retry)
    dead = dead_headers(retry, again, endpoint="acme", reason="x", attempt_ms=9_600, status=500)
    assert wire.H_SHOVELLED not in dead and wire.H_REPLAYED not in dead
