"""The planner's inbound queues: one per source, its DLQ on the dead exchange, and its way back from delays."""

from __future__ import annotations

import pytest

from warren.topology import names
from warren.topology.config import WarrenConfig
from warren.topology.planner import plan_topology


def config(**retry: object) -> WarrenConfig:
    source: dict[str, object] = {"name": "shop", "verifier": "none", "id_field": "id", "handler": "m:f"}
    if retry:
        source["retry"] = retry
    return WarrenConfig(broker={"prefix": "w"}, inbound=[source])


@pytest.mark.parametrize(
    ("function", "args", "expected"),
    [
        (names.inbound_queue, ("w", "shop"), "w.in.shop"),
        (names.inbound_dlq, ("w", "shop"), "w.in.shop.dlq"),
        (names.inbound_dead_key, ("shop",), "in.shop"),
    ],
)
def test_names(function: object, args: tuple[str, ...], expected: str) -> None:
    assert function(*args) == expected  # type: ignore[operator]


def test_an_inbound_source_gets_a_quorum_queue_and_a_dlq() -> None:
    plan = plan_topology(config())
    queue, dlq = plan.queue("w.in.shop"), plan.queue("w.in.shop.dlq")
    assert queue.arguments["x-queue-type"] == "quorum"
    assert dlq.arguments["x-queue-type"] == "quorum"


def test_the_dlq_is_bound_on_the_dead_exchange_and_retries_come_back_from_the_due_exchange() -> None:
    bindings = {(b.source, b.destination, b.routing_key) for b in plan_topology(config()).bindings}
    assert ("w.dead", "w.in.shop.dlq", "in.shop") in bindings
    assert ("w.delay.due", "w.in.shop", "#.w.in.shop") in bindings


def test_a_source_retry_override_can_lengthen_the_delay_chain() -> None:
    short = plan_topology(config()).delay_levels
    long = plan_topology(config(cap="10h", base="1h")).delay_levels
    assert long > short


def test_no_inbound_sources_no_inbound_queues() -> None:
    plan = plan_topology(WarrenConfig(broker={"prefix": "w"}))
    assert not [q for q in plan.queues if ".in." in q.name]
