"""A queue a worker consumes that is deleted under it (an operator, `warren setup --prune`, a test) and declared
again (`warren setup`) is consumed again without a restart or a reconnect: RabbitMQ cancels its consumer
(basic.cancel), the worker logs it and consumes the queue again once it exists."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from tests.consumers.test_lane_route_failures import delete_queue
from tests.consumers.test_lanes_flow import LANES, lane_endpoint, on_lane
from tests.support.health import wait_until
from tests.support.receiver import Receiver
from tests.support.topology import declare
from warren.broker.events import Event
from warren.consumers.worker import Worker
from warren.topology import names
from warren.topology.config import WarrenConfig

pytestmark = pytest.mark.timeout(90)


def _logged(caplog: pytest.LogCaptureFixture, text: str) -> bool:
    return any(text in record.getMessage() for record in caplog.records)


async def _deleted_and_declared_again(
    config: WarrenConfig, queue: str, receiver: Receiver, publish: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Under a running worker: an event delivered, ``queue`` deleted and declared again (as `warren setup` does);
    then an event published after that is delivered by the same worker, and both moments are logged."""
    caplog.set_level(logging.INFO)
    first, later = Event(type="order.paid", data={"n": 1}), Event(type="order.paid", data={"n": 2})
    async with Worker(config):
        await publish(config, [first])
        await receiver.wait_for(lambda r: first.id in r.ok_ids(), 15)
        # When the queue is deleted under it: the worker says so, naming the queue, and warns while it is missing
        await delete_queue(config.broker.url, queue)
        await wait_until(lambda: _logged(caplog, f"{queue} is missing"), 20, "warned")
        # And declared again
        await declare(config)
        # Then an event published after that is delivered, with no restart or reconnect, and its return logged
        await publish(config, [later])
        await receiver.wait_for(lambda r: later.id in r.ok_ids(), 20)
        await wait_until(lambda: _logged(caplog, f"consuming {queue} again"), 10, "its return logged")
    assert not _logged(caplog, "Reconnecting")


async def test_a_lane_deleted_and_declared_again_under_a_running_worker_is_consumed_again(
    endpoint_config: Any, receiver: Receiver, publish: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # A lane endpoint on the copy path: every event through its lane
    name = on_lane(1, 1, "tail")[0]
    config = await endpoint_config([lane_endpoint(receiver, name)], lanes={"count": LANES, "inline": False})
    await _deleted_and_declared_again(config, names.lane_queue(config.broker.prefix, 1), receiver, publish, caplog)


async def test_a_route_partition_deleted_and_declared_again_is_consumed_again(
    endpoint_config: Any, receiver: Receiver, publish: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # A lane endpoint behind one route partition (its first attempt inline: the partition is the only queue)
    config = await endpoint_config([lane_endpoint(receiver, "tail")], lanes={"count": LANES, "route_partitions": 1})
    await _deleted_and_declared_again(config, names.route_partition(config.broker.prefix, 0), receiver, publish, caplog)


async def test_a_dedicated_endpoints_queue_deleted_and_declared_again_is_consumed_again(
    endpoint_config: Any, receiver: Receiver, publish: Any, caplog: pytest.LogCaptureFixture
) -> None:
    config = await endpoint_config([{"name": "acme", "events": ["order.*"]}])
    await _deleted_and_declared_again(config, names.work_queue(config.broker.prefix, "acme"), receiver, publish, caplog)


async def test_an_ordered_endpoints_partition_deleted_and_declared_again_is_consumed_again(
    endpoint_config: Any, receiver: Receiver, publish: Any, caplog: pytest.LogCaptureFixture
) -> None:
    config = await endpoint_config([{"name": "books", "events": ["order.*"], "ordering": "key", "partitions": 1}])
    queue = names.partition_queue(config.broker.prefix, "books", 0)
    await _deleted_and_declared_again(config, queue, receiver, publish, caplog)


async def test_an_ordered_lane_deleted_and_declared_again_is_consumed_again(
    endpoint_config: Any, receiver: Receiver, publish: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # An ordered lane endpoint on the one ordered lane
    config = await endpoint_config(
        [lane_endpoint(receiver, "ledger", ordering="key")], lanes={"count": LANES, "ordered_count": 1}
    )
    queue = names.ordered_lane_queue(config.broker.prefix, 0)
    await _deleted_and_declared_again(config, queue, receiver, publish, caplog)
