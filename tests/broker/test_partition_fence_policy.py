"""When a promotion needs a fence through the routing stage, or an ordered one through the ordered lanes (pure:
warren/broker/partition_fence.py, warren/broker/ordered_promotion.py)."""

from __future__ import annotations

from warren.broker.amqp.probe import QueueDepth
from warren.broker.ordered_promotion import lanes_to_fence
from warren.broker.partition_fence import FenceOutcome, fence_needed


def _depth(ready: int, consumers: int) -> QueueDepth:
    return QueueDepth("p", ready, consumers)


def test_no_fence_while_the_routing_stage_holds_nothing_and_nobody_consumes_it() -> None:
    assert not fence_needed({"p0": _depth(0, 0), "p1": _depth(0, 0)})
    assert not fence_needed({"p0": None, "p1": _depth(0, 0)})  # a partition missing holds nothing
    assert not fence_needed({})


def test_a_fence_when_an_event_waits_or_a_router_may_hold_one_unacked() -> None:
    assert fence_needed({"p0": _depth(0, 0), "p1": _depth(3, 0)})  # waiting for a router
    assert fence_needed({"p0": _depth(0, 1), "p1": _depth(0, 0)})  # a consumer's unacked are not counted


def test_an_outcome_is_complete_only_with_every_partitions_answer() -> None:
    outcome = FenceOutcome(("p0", "p1", "p2"), frozenset({"p0", "p2"}))
    assert not outcome.complete
    assert outcome.missing == ["p1"]
    assert FenceOutcome(("p0",), frozenset({"p0"})).complete
    assert FenceOutcome(("p0", "p1"), frozenset({"p0", "p1"}), needed=False).complete


def test_an_ordered_promotion_fences_every_ordered_lane_unless_none_may_hold_a_copy() -> None:
    idle, busy = {"o0": _depth(0, 0), "o1": _depth(0, 0), "o2": None}, {"o0": _depth(0, 1), "o1": _depth(0, 0)}
    assert lanes_to_fence(idle, None) == ()  # nothing anywhere: nothing to wait for
    assert lanes_to_fence(busy, None) == ("o0", "o1")  # a consumer may hold copies unacked: every lane
    assert lanes_to_fence(idle, _depth(0, 0)) == ("o0", "o1")  # a park queue: its copies are drained first
