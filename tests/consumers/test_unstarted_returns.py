"""Messages waiting behind an ordered head go back with its partition (or ordered lane) each time the head is handed
back, and RabbitMQ counts each such return in their ``x-delivery-count`` (3.10 and 4.x alike). Those returns are no
hand-backs of theirs: the runner remembers the messages it returned without ever starting them
(warren/consumers/held_attempts.py, ``not_started``), so ``delivery.max_handbacks`` does not count them; and the
queues' own delivery limit (2^31-1, docs/architecture.md "Delivery limits") keeps RabbitMQ 4.x's default of 20
from dropping a message that waited through more returns than that."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from tests.consumers.test_ordered_lane_returns import deployment
from tests.support.dead_letters import drain
from tests.support.receiver import Receiver, Reply
from warren.broker.events import Event
from warren.consumers.delivery import delivery_count
from warren.consumers.endpoint_runner import EndpointRunner
from warren.consumers.worker import Worker
from warren.topology import names

pytestmark = pytest.mark.timeout(120)

HEAD_FAILURES = 6  # each one handed back, then returned a few times more to wait for its next attempt


@pytest.mark.parametrize("home", ["lane", "partition"])
async def test_a_message_that_waited_behind_a_head_handed_back_many_times_keeps_its_own_handbacks(
    make_config: Any, receiver: Receiver, publish: Any, monkeypatch: pytest.MonkeyPatch, home: str
) -> None:
    # Given an ordered endpoint (on an ordered lane, or a dedicated one on a partition) whose retries (1 s, without
    # jitter, whose draws can be near 0) are much longer than its hold limit (100 ms), with
    # delivery.max_handbacks = 10, and a receiver that fails E1 6 times and E2 once (each of E1's waits returns
    # E2 with it about once a hold limit: jittered 500 ms retries gave only 19 returns of E2 on a slow, loaded
    # machine, where this test needs more than 20)
    calls: list[int] = []

    def reply(_: Receiver, __: Any, body: bytes) -> Reply:
        calls.append(orjson.loads(body)["sequence"])
        failures = HEAD_FAILURES if calls[-1] == 0 else 1
        return Reply(503) if calls.count(calls[-1]) <= failures else Reply(200)

    receiver.behaviour = reply
    config = await deployment(make_config, receiver, home, max_handbacks=10, ordered_hold_limit="100ms")
    config = config.model_copy(
        update={
            "retry": config.retry.model_copy(update={"base": 1.0, "cap": 1.0, "jitter": "none", "max_attempts": 10})
        }
    )
    # (what RabbitMQ counted for each event when the runner decided about it)
    counted: dict[str, int] = {}
    real = EndpointRunner._context

    def watched(self: EndpointRunner, result: Any, attempt: int, delivery: Any, at_ms: int, message: Any, *a: Any):
        count = delivery_count(message.headers or {}, message.redelivered)
        counted[delivery.event_id] = max(count, counted.get(delivery.event_id, 0))
        return real(self, result, attempt, delivery, at_ms, message, *a)

    monkeypatch.setattr(EndpointRunner, "_context", watched)
    events = [Event(type="x.y", data={}, key="k", sequence=i) for i in range(2)]
    async with Worker(config):
        # When E1 and E2 of one key are published
        await publish(config, events)
        await receiver.wait_for(lambda r: len(r.ok_ids()) == 2, 40)
    # Then E1 was delivered on its 7th attempt, and E2 after it on its 2nd: its one failure handed it back once,
    # although RabbitMQ had counted more than 20 returns of it (E1's, which it waited behind) by then
    assert calls == [0] * (HEAD_FAILURES + 1) + [1, 1], calls
    assert counted[events[1].id] > 20, counted
    # and nothing was dead-lettered, by the worker (max_handbacks) or by RabbitMQ (a delivery limit)
    prefix = config.broker.prefix
    assert await drain(config, names.lane_dlq(prefix, 0) if home == "lane" else names.dlq(prefix, "held")) == []
