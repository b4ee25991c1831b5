"""bench/partition.py's judgement of a fault run: each broken promise named, duplicates held to their bound."""

from __future__ import annotations

from typing import Any

from bench.partition import DUPLICATES, ENDPOINTS, broken_promises, duplicate_bound


def run(fault: str = "oneway", version: str = "4.0.5", **duplicates: int) -> dict[str, Any]:
    """A run's figures with every promise kept, except the duplicates given per endpoint."""
    figures: dict[str, Any] = {"fault": fault, "events": 2000, "rabbitmq_version": version}
    figures.update(confirmed=1900, not_stored=100, left_in_queues={}, workers_alive=True)
    for endpoint in ENDPOINTS:
        figures[endpoint] = {"delivered": 1900, "lost": 0, "duplicates": duplicates.get(endpoint, 32)}
    figures["ordered"].update(order_violations=0, overlaps=0)
    return figures


def test_a_run_that_kept_every_promise_breaks_none() -> None:
    assert broken_promises(run()) == []


def test_the_retrying_endpoints_repeat_after_a_one_way_fault_on_4_0_is_held_to_one_more_copy_of_each() -> None:
    # The runs of 2026-12-07 on RabbitMQ 4.0.5 (docs/cluster.md, "One-way faults on 4.0.5")
    for seen in (2849, 3300, 3326):
        assert broken_promises(run(flaky=seen)) == []
    assert broken_promises(run(flaky=4001)) == ["flaky: 4001 duplicates (> 4000)"]


def test_anywhere_else_the_bound_is_the_prefetch_windows() -> None:
    assert duplicate_bound("flaky", run(version="3.10.8")) == DUPLICATES
    assert duplicate_bound("flaky", run(version="4.1.0")) == DUPLICATES  # a later 4.x shows whether it still does
    assert duplicate_bound("flaky", run(fault="pause")) == DUPLICATES
    assert duplicate_bound("unordered", run()) == DUPLICATES
    assert broken_promises(run(version="3.10.8", flaky=2849)) == [f"flaky: 2849 duplicates (> {DUPLICATES})"]
    assert broken_promises(run(unordered=601)) == [f"unordered: 601 duplicates (> {DUPLICATES})"]


def test_every_broken_promise_is_named_with_its_figure() -> None:
    figures = run()
    figures.update(confirmed=1899, left_in_queues={"p.ep.flaky.q": 3}, workers_alive=False)
    figures["lane"]["lost"] = 2
    figures["ordered"]["overlaps"] = 4
    assert broken_promises(figures) == [
        "confirmed 1899 + not stored 100 != 2000",
        "lane: 2 confirmed events never delivered",
        "ordered: 4 overlaps",
        "left in queues: {'p.ep.flaky.q': 3}",
        "a worker died",
    ]
