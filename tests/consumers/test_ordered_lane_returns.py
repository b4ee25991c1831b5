"""An ordered lane's hand-backs are bounded as a dedicated ordered endpoint's are (tests/consumers/test_returns.py):
its head handed back to the lane 30 times, past 4.x's default delivery limit of 20, is delivered on attempt 31
and the next event of its key after it; and past ``delivery.max_handbacks`` it is dead-lettered into its
lane's DLQ with the reason, its key going on, instead of circulating for ever."""

from __future__ import annotations

import logging
import re
from typing import Any

import orjson
import pytest

from tests.consumers.test_ordered_lanes import ordered_endpoint
from tests.support.dead_letters import drain
from tests.support.receiver import Receiver, Reply
from tests.support.topology import declare
from warren.broker.events import Event
from warren.consumers.worker import Worker
from warren.topology import names
from warren.topology.config import WarrenConfig

pytestmark = pytest.mark.timeout(120)

FAILURES = 30  # well past the 20 returns 4.x allows by default
LANES = {"count": 1, "ordered_count": 1, "route_partitions": 1, "prefetch": 8, "route_prefetch": 8}


def failing_head(calls: list[int], failures: int) -> Any:
    def reply(_: Receiver, __: Any, body: bytes) -> Reply:
        calls.append(orjson.loads(body)["sequence"])
        return Reply(503) if calls[-1] == 0 and calls.count(0) <= failures else Reply(200)

    return reply


async def deployment(make_config: Any, receiver: Receiver, home: str = "lane", **delivery: Any) -> WarrenConfig:
    endpoint = ordered_endpoint(receiver, "held", circuit={"enabled": False})
    if home != "lane":  # a dedicated ordered endpoint: a partition queue of its own
        del endpoint["home"]
        endpoint["partitions"] = 1
    config: WarrenConfig = make_config(
        [endpoint],
        lanes=LANES,
        retry={"base": "10ms", "cap": "10ms", "max_attempts": FAILURES + 1, "jitter": "none"},
        delivery={"ordered_hold_limit": "1ms", **delivery},
    )
    await declare(config)
    return config


async def test_an_ordered_lane_head_handed_back_on_every_retry_is_delivered_on_attempt_31(
    make_config: Any, receiver: Receiver, publish: Any
) -> None:
    # Given an ordered lane endpoint whose hold limit (1 ms) hands its lane back at every retry, and a receiver
    # that fails E1 30 times
    calls: list[int] = []
    receiver.behaviour = failing_head(calls, FAILURES)
    config = await deployment(make_config, receiver)
    async with Worker(config):
        # When E1 and E2 of one key are published
        await publish(config, [Event(type="x.y", data={}, key="k", sequence=i) for i in range(2)])
        await receiver.wait_for(lambda r: len(r.ok_ids()) == 2, 90)
    # Then E1 was delivered on its 31st attempt and E2 after it: no gap in the key, nothing dead-lettered
    assert [r.json["sequence"] for r in receiver.received] == [0] * (FAILURES + 1) + [1]
    assert await drain(config, names.lane_dlq(config.broker.prefix, 0)) == []


@pytest.mark.parametrize("home", ["lane", "partition"])
async def test_an_ordered_lane_head_past_max_handbacks_is_dead_lettered_and_its_key_goes_on(
    make_config: Any, receiver: Receiver, publish: Any, caplog: pytest.LogCaptureFixture, home: str
) -> None:
    # Given the same endpoint (or a dedicated ordered one, on a partition of its own) with delivery.max_handbacks
    # = 5, and a receiver failing E1 for ever
    caplog.set_level(logging.WARNING, "warren.worker")
    calls: list[int] = []
    receiver.behaviour = failing_head(calls, 10**6)
    config = await deployment(make_config, receiver, home, max_handbacks=5)
    async with Worker(config):
        # When E1 and E2 of one key are published
        await publish(config, [Event(type="x.y", data={}, key="k", sequence=i) for i in range(2)])
        await receiver.wait_for(lambda r: any(x.json["sequence"] == 1 and x.status == 200 for x in r.received), 60)
    # Then E1 was tried a bounded number of times, then dead-lettered into its lane's DLQ with the reason
    assert 5 <= calls.count(0) <= 7, calls
    prefix = config.broker.prefix
    letters = await drain(config, names.lane_dlq(prefix, 0) if home == "lane" else names.dlq(prefix, "held"))
    assert len(letters) == 1
    headers = letters[0].headers or {}
    assert headers.get("warren-endpoint") == "held"
    reason = str(headers.get("warren-dead-reason"))
    assert "handed back" in reason, headers
    # and the hand-backs it names are the ones the worker made, one after each attempt but the last: a return that
    # only waited for the next attempt (the reopened lane faster than the 10 ms retry) spends none of them
    logged = caplog.text.count("hold limit reached; handing")
    named = re.search(r"handed back (\d+) times", reason)
    assert named is not None, reason
    assert int(named.group(1)) == logged == calls.count(0) - 1, (reason, logged, calls)
