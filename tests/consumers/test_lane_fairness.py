"""Fairness inside a lane, the pure policy (warren/consumers/lane_fairness.py): shares of the window, the park
delay, and deficit round robin billed in delivery time, driven by a simulated clock."""

from __future__ import annotations

import heapq
from collections import Counter

import pytest

from warren.consumers.lane_fairness import DeficitRoundRobin, held_park_delay, may_hold, park_delay, window_share

pytestmark = pytest.mark.timeout(30)


def test_the_window_is_shared_among_busy_endpoints_never_more_than_half_nor_twice_the_concurrency() -> None:
    assert window_share(64, 0, 16) == 32  # alone: half the window, so that a newcomer finds room
    assert window_share(64, 1, 16) == 32
    assert window_share(64, 3, 16) == 16
    assert window_share(64, 0, 4) == 8  # twice its concurrency
    assert window_share(64, 200, 16) == 1  # at least one
    assert window_share(1, 0, 16) == 1


def test_a_slow_endpoints_surplus_is_parked_for_about_the_time_it_needs_within_bounds() -> None:
    assert park_delay(1.0, 30.0, 0.01, 32, 16) == 1.0  # fast: back after the least delay
    assert park_delay(1.0, 30.0, 0.5, 8, 2) == 2.0  # four rounds of its two slots at 0.5 s
    assert park_delay(1.0, 30.0, 10.0, 32, 16) == 20.0
    assert park_delay(1.0, 30.0, 10.0, 64, 4) == 30.0  # at most the limit


def test_each_endpoint_is_served_in_its_fifo_order_and_capped_at_its_concurrency() -> None:
    drr: DeficitRoundRobin[str] = DeficitRoundRobin(budget=100)
    for i in range(5):
        drr.push("a", f"a{i}", limit=2)
    started = [drr.pop(), drr.pop(), drr.pop()]
    assert started == [("a", "a0"), ("a", "a1"), None]  # its concurrency is 2
    drr.finished("a", 0.01)
    assert drr.pop() == ("a", "a2")
    assert drr.started("a") == 2 and drr.waiting("a") == 2


def test_the_lanes_budget_bounds_what_is_in_flight_across_endpoints() -> None:
    drr: DeficitRoundRobin[int] = DeficitRoundRobin(budget=3)
    for name in "abc":
        for i in range(3):
            drr.push(name, i, limit=10)
    first = [drr.pop() for _ in range(4)]
    assert first[3] is None and drr.in_flight == 3
    assert sorted(n for n, _ in filter(None, first)) == ["a", "b", "c"]  # round robin: one each, equal costs
    drr.finished("a", 0.01)
    assert drr.pop() is not None and drr.pop() is None


def test_a_dropped_item_never_starts_and_an_idle_endpoint_keeps_no_credit() -> None:
    drr: DeficitRoundRobin[str] = DeficitRoundRobin(budget=10)
    drr.push("a", "x", limit=1)
    drr.push("a", "y", limit=1)
    assert drr.drop("a", "x") and not drr.drop("a", "x")
    assert drr.pop() == ("a", "y")
    assert drr.pop() is None and drr.waiting("a") == 0
    drr.finished("a", 0.5)
    assert drr.cost("a") == 0.5  # a first delivery's time is its cost; later ones are averaged in
    drr.push("a", "z", limit=1)
    drr.finished("a", 0.0)  # (its in-flight count stays at zero, never negative)
    assert drr.cost("a") == pytest.approx(0.8 * 0.5 + 0.2 * 0.001)


def simulate(costs: dict[str, float], budget: int, limits: dict[str, int], seconds: float) -> Counter[str]:
    """Every endpoint always has work waiting; each delivery of ``name`` takes ``costs[name]`` seconds.

    Returns the seconds of in-flight time each endpoint got on the lane within ``seconds``.
    """
    drr: DeficitRoundRobin[int] = DeficitRoundRobin(budget=budget)
    for name in costs:
        for i in range(budget):
            drr.push(name, i, limit=limits.get(name, budget))
    busy: Counter[str] = Counter()
    running: list[tuple[float, str]] = []
    now = 0.0
    while now < seconds:
        while (turn := drr.pop()) is not None:
            name = turn[0]
            heapq.heappush(running, (now + costs[name], name))
        done_at, name = heapq.heappop(running)
        busy[name] += costs[name]
        now = done_at
        drr.finished(name, costs[name])
        drr.push(name, 0, limit=limits.get(name, budget))  # its backlog never runs dry
    return busy


def test_a_slow_endpoint_gets_the_same_share_of_the_lanes_time_not_of_its_turns() -> None:
    # Given a lane with 8 delivery slots, a healthy endpoint answering in 10 ms, and one timing out after 2 s
    busy = simulate({"healthy": 0.01, "slow": 2.0}, budget=8, limits={}, seconds=120)
    # Then each gets about half of the lane's in-flight time: the slow one holds ~4 slots, not all 8
    share = busy["slow"] / (busy["slow"] + busy["healthy"])
    assert 0.4 <= share <= 0.6, busy
    # and the healthy one delivers ~200 times as many messages as the slow one
    delivered_healthy, delivered_slow = busy["healthy"] / 0.01, busy["slow"] / 2.0
    assert delivered_healthy >= 100 * delivered_slow, (delivered_healthy, delivered_slow)


def test_many_endpoints_of_different_costs_split_the_lanes_time_evenly() -> None:
    costs = {"a": 0.01, "b": 0.1, "c": 1.0, "d": 4.0}
    busy = simulate(costs, budget=16, limits={}, seconds=200)
    total = sum(busy.values())
    for name in costs:
        assert 0.15 <= busy[name] / total <= 0.35, busy


def test_an_endpoint_capped_by_its_concurrency_leaves_the_rest_to_the_others() -> None:
    # Given a slow endpoint allowed 1 delivery at a time on a lane of 8
    busy = simulate({"healthy": 0.01, "slow": 1.0}, budget=8, limits={"slow": 1}, seconds=100)
    # Then it holds at most its one slot, and the healthy one has the other seven
    assert busy["slow"] <= 100 + 1.0
    assert busy["healthy"] >= 6.5 * 100, busy


def test_beyond_its_share_an_endpoint_holds_more_only_while_it_is_not_slow() -> None:
    def hold(held: int, share: int = 8, concurrency: int = 16, each: float = 0.05, typical: float = 0.05) -> bool:
        return may_hold(held, share, 64, concurrency, each, wait=1.0, typical=typical)

    assert hold(3, share=4, each=30.0)  # within its share: always
    # Beyond it, a fast endpoint keeps what it would finish before a parked message came back
    assert hold(20, each=0.05, typical=0.001)
    # but never past twice its concurrency, nor three quarters of the window
    assert not hold(32, each=0.001)
    assert not hold(48, concurrency=64, each=0.001)
    # A slow one among fast lane-mates (or one whose oldest delivery has been in flight long) has its surplus
    # parked
    assert not hold(8, each=1.5, typical=0.01)
    assert not hold(17, each=0.6, typical=0.01)  # two rounds of its concurrency: 1.2 s
    # while on a lane where every endpoint is slow together (a loaded receiver), parking would only add work
    assert hold(17, each=0.6, typical=0.4)


def test_a_held_endpoints_messages_are_parked_longer_each_time_in_a_row() -> None:
    delays = [held_park_delay(5.0, 30.0, n) for n in range(6)]
    assert delays == [5.0, 10.0, 20.0, 30.0, 30.0, 30.0]
    assert held_park_delay(5.0, 30.0, 10**9) == 30.0  # however often
