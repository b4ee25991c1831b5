"""A lane endpoint no longer served by a worker (removed, moved to queues of its own, or reconfigured) leaves
nothing of itself in the lane code's per-endpoint state: the inline policy (lane_inline.py), the lanes' round
robin (lane_fairness.py, lanes.py) and the router's index (lane_index.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.consumers.test_lane_inline import prove
from tests.consumers.test_lanes_flow import LANES, lane_endpoint
from tests.support.health import wait_until
from tests.support.receiver import Receiver
from warren.broker.events import Event
from warren.consumers.lane_fairness import DeficitRoundRobin
from warren.consumers.lane_inline import InlinePolicy
from warren.consumers.worker import Worker

pytestmark = pytest.mark.timeout(60)


def test_the_inline_policy_forgets_a_proven_and_a_barred_endpoint() -> None:
    policy = InlinePolicy(window=64, slow=1.0, bar=30.0)
    for k in range(16):  # its lane-mates' deliveries take 10 ms
        policy.began(f"fast-{k}")
        policy.ended(f"fast-{k}", 0.01, 0.0)
    # Given one endpoint proven fast, and one barred after a slow inline delivery, with another still in flight
    prove(policy, "kept", "barred")
    policy.began("barred", 0.0)
    policy.began("barred", 0.0)
    policy.ended("barred", 2.0, 2.0)
    assert policy.barred("barred", 3.0) and policy.may("kept", 8, 3.0)
    # When the barred one is forgotten
    policy.forget("barred")
    # Then nothing of it is kept: neither proven nor barred (served again, it has a trial as a new endpoint has),
    # and its delivery that ends later leaves no state
    assert not policy.barred("barred", 3.0) and policy.on_trial("barred") and policy.may("barred", 8, 3.0)
    assert "barred" not in policy._proven and "barred" not in policy._states and "barred" not in policy._tried
    policy.ended("barred", 2.5, 2.5)
    assert "barred" not in policy._states and policy.in_flight == 0
    # and the other is as it was
    assert policy.may("kept", 8, 3.0)
    # and served again, its trial made, it is proven again through its lane before it has another inline delivery
    policy.began("barred", 3.0)
    assert policy.refusal("barred", 8, 3.1) == "unproven"
    prove(policy, "barred")
    assert policy.may("barred", 8, 3.1)


def test_the_round_robin_forgets_an_endpoints_mean_cost() -> None:
    order: DeficitRoundRobin[int] = DeficitRoundRobin(budget=4, quantum=0.01)
    order.push("gone", 1, 1)
    assert order.pop() == ("gone", 1)
    order.finished("gone", 2.0)
    assert order.cost("gone") == 2.0
    order.forget("gone")
    assert order.cost("gone") == 0.01 and "gone" not in order._costs


async def test_a_lane_endpoint_no_longer_served_is_forgotten_by_the_lanes_the_router_and_the_inline_path(
    endpoint_config: Any, receiver: Receiver, publish: Any
) -> None:
    # Given two lane endpoints on one worker whose first events went through their lanes (their trials made
    # already), later ones inline
    config = await endpoint_config(
        [lane_endpoint(receiver, "gone"), lane_endpoint(receiver, "stays")], lanes={"count": LANES}
    )
    first = [Event(type="order.paid", data={"n": i}) for i in range(4)]
    then = [Event(type="order.paid", data={"n": i}) for i in range(4, 8)]
    async with Worker(config) as worker:
        assert worker.lanes is not None and worker.lanes.router.inline is not None
        stage, inline = worker.lanes, worker.lanes.router.inline
        inline.policy._tried.update({"gone", "stays"})
        await publish(config, first)
        await receiver.wait_for(lambda r: all(len(r.ok_ids(f"/hook/{n}")) == 4 for n in ("gone", "stays")), 20)
        await wait_until(lambda: {"gone", "stays"} <= inline.policy._proven, 10, "seen answering fast")
        await publish(config, then)
        await receiver.wait_for(lambda r: all(len(r.ok_ids(f"/hook/{n}")) == 8 for n in ("gone", "stays")), 20)
        costs = [lane.order._costs for lane in stage.consumer.lanes]
        assert any("gone" in c for c in costs) and inline.started["gone"] >= 1
        # When the worker stops serving one of them (what a removal or a move announces)
        await worker.unserve_endpoint("gone")
        # Then the lanes, the router's index and the inline path keep nothing of it
        assert "gone" not in stage.index and "gone" not in inline.policy._proven
        assert "gone" not in inline.policy._states and "gone" not in inline.started
        assert not any("gone" in c for c in costs) and "gone" not in inline.policy._tried
        assert inline.policy.on_trial("gone")  # served again, it would have a trial as a new endpoint has
        # and the other is served as before
        assert "stays" in stage.index and "stays" in inline.policy._proven and any("stays" in c for c in costs)
