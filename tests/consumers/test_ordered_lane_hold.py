"""A copy of an ordered lane endpoint that its gate refused waits in its FIFO (and is parked) while its hold is
within ``delivery.ordered_hold_limit``: the whole lane goes back only once the hold limit is reached
(warren/consumers/ordered_lanes.py ``OrderedLaneRunner._give_back``). It used to go back one second *before* the
limit, so with a hold limit under a second every refused copy handed its whole lane back, over and over, and was
never parked."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from tests.consumers.test_ordered_lanes import all_delivered, keyed, ordered_endpoint, violations_at
from tests.consumers.test_ordered_parks import LANES, wait_parked
from tests.support.receiver import Receiver
from tests.support.topology import declare
from warren.consumers.hooks import DeliveryHooks, EndpointBlocked
from warren.consumers.worker import Worker
from warren.topology.config import WarrenConfig
from warren.transport.base import SendResult

pytestmark = pytest.mark.timeout(60)


class Refusing:
    """A gate that refuses every attempt of one endpoint, as an open circuit does, while the runner's own flags
    never learn of it: each copy reaches the runner and is refused there (``_give_back``)."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint

    async def acquire(self, endpoint: str) -> None:
        if endpoint == self.endpoint:
            raise EndpointBlocked("refused by the test's gate")

    def release(self, endpoint: str, result: SendResult | None) -> None:
        return None


async def test_a_refused_copy_within_a_sub_second_hold_limit_is_parked_without_handing_its_lane_back(
    make_config: Any, receiver: Receiver, publish: Any
) -> None:
    # Given an ordered lane endpoint whose gate refuses every attempt, a hold limit of 900 ms, and a lane-mate
    config: WarrenConfig = make_config(
        [ordered_endpoint(receiver, "held", circuit={"enabled": False}), ordered_endpoint(receiver, "mate")],
        lanes=LANES,
        retry={"base": "50ms", "cap": "200ms", "jitter": "none", "max_attempts": 1000},
        delivery={"ordered_hold_limit": "900ms"},
    )
    await declare(config)
    settled: Counter[tuple[str, str]] = Counter()
    hooks = DeliveryHooks(gates=[Refusing("held")])
    hooks.settlements.append(lambda endpoint, how: settled.update([(endpoint, how)]))
    events = keyed([f"k{i}" for i in range(5)], 4)
    async with Worker(config, hooks=hooks):
        # When its copies come
        await publish(config, events)
        # Then each refused copy is parked (before, it handed its whole lane back instead, over and over) and the
        # lane-mate gets every event
        await receiver.wait_for(all_delivered(events, ["mate"]), 30)
        await wait_parked(config, 10)
        await receiver.wait_for(lambda r: settled[("held", "parked")] >= 1, 10)
    # and the lane was never handed back for them: none of its copies was held near the hold limit
    assert settled[("held", "handed-back")] == 0, settled
    assert not [r for r in receiver.received if r.path == "/hook/held"]
    assert violations_at(receiver, ["mate"]) == []
