"""Drift detection and plugin checks as pure functions, on management API records written by hand."""

from __future__ import annotations

from typing import Any

import pytest

from warren.broker.applier import plugin_problems
from warren.broker.drift import (
    ABSENT,
    Difference,
    compare,
    compare_bindings,
    compare_exchange,
    compare_queue,
    find_leftovers,
)
from warren.topology.config import WarrenConfig
from warren.topology.plan import Binding, Exchange, Queue
from warren.topology.planner import plan_topology

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def _config(*endpoints: dict[str, Any], cap: str = "1s", lanes: int = 0) -> WarrenConfig:
    return WarrenConfig(
        broker={"prefix": "w"},
        retry={"base": "100ms", "cap": cap},
        lanes={"count": lanes},
        endpoints=[{"url": "https://example.com/h", "secret": SECRET, **e} for e in endpoints],
    )


def _queue_record(queue: Queue, **changes: Any) -> dict[str, Any]:
    """The management API's record of ``queue`` as declared, with ``changes`` applied."""
    record = {
        "name": queue.name,
        "durable": True,
        "auto_delete": False,
        "exclusive": False,
        "type": queue.arguments.get("x-queue-type", "classic"),
        "arguments": dict(queue.arguments),
    }
    record.update(changes)
    return record


def _exchange_record(exchange: Exchange, **changes: Any) -> dict[str, Any]:
    record = {
        "name": exchange.name,
        "type": exchange.type,
        "durable": True,
        "auto_delete": False,
        "internal": False,
        "arguments": dict(exchange.arguments),
    }
    record.update(changes)
    return record


def _binding_record(binding: Binding, **changes: Any) -> dict[str, Any]:
    record = {
        "source": binding.source,
        "destination": binding.destination,
        "destination_type": binding.destination_type,
        "routing_key": binding.routing_key,
        "arguments": dict(binding.arguments),
    }
    record.update(changes)
    return record


def _as_declared(plan: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    return (
        [_exchange_record(e) for e in plan.exchanges],
        [_queue_record(q) for q in plan.queues],
        [_binding_record(b) for b in plan.bindings],
    )


def test_an_empty_broker_needs_everything_created() -> None:
    plan = plan_topology(_config({"name": "acme", "events": ["a.*"]}))
    checks = compare(plan, [], [], [])
    assert len(checks) == len(plan.exchanges) + len(plan.queues) + len(plan.bindings)
    assert {c.status for c in checks} == {"create"}


def test_a_broker_holding_the_plan_is_the_same_everywhere() -> None:
    plan = plan_topology(
        _config({"name": "acme", "events": ["a.*"]}, {"name": "bill", "events": ["o.#"], "ordering": "key"})
    )
    exchanges, queues, bindings = _as_declared(plan)
    assert {c.status for c in compare(plan, exchanges, queues, bindings)} == {"same"}
    assert find_leftovers(plan, "w", exchanges, queues, bindings) == []


def test_every_differing_queue_argument_is_listed_with_both_values() -> None:
    queue = Queue("w.ep.acme.q", {"x-queue-type": "quorum"}, endpoint="acme")
    record = _queue_record(queue, type="classic", arguments={"x-queue-type": "classic", "x-message-ttl": 5000})
    check = compare_queue(queue, record)
    assert check.status == "differs"
    assert set(check.differences) == {
        Difference("x-message-ttl", 5000, ABSENT),
        Difference("x-queue-type", "classic", "quorum"),
    }
    assert "drain" in check.hint and "acme" in check.hint
    assert check.differences[0].describe() == "x-message-ttl is 5000 on the broker, absent in the plan"


def test_a_queue_declared_without_a_type_is_classic() -> None:
    queue = Queue("w.ep.acme.q", {"x-queue-type": "classic"})
    assert compare_queue(queue, _queue_record(queue, arguments={})).status == "same"


def test_true_and_one_are_different_arguments() -> None:
    queue = Queue("w.ep.b.p00", {"x-queue-type": "quorum", "x-single-active-consumer": True})
    record = _queue_record(queue, arguments={"x-queue-type": "quorum", "x-single-active-consumer": 1})
    assert compare_queue(queue, record).status == "differs"


def test_non_durable_queue_differs() -> None:
    queue = Queue("w.ep.acme.dlq", {"x-queue-type": "classic"})
    check = compare_queue(queue, _queue_record(queue, durable=False))
    assert check.differences == (Difference("durable", False, True),)


def test_exchange_type_and_arguments_differ() -> None:
    exchange = Exchange("w.ep.bill", "x-consistent-hash", {"hash-header": "warren-key"})
    check = compare_exchange(exchange, _exchange_record(exchange, type="fanout", arguments={}))
    assert set(check.differences) == {
        Difference("type", "fanout", "x-consistent-hash"),
        Difference("hash-header", ABSENT, "warren-key"),
    }
    assert "drain" in check.hint


def test_bindings_compare_exactly_on_key_and_arguments() -> None:
    planned = [Binding("w.events", "w.ep.acme", "exchange", "a.*"), Binding("w.ep.x", "w.ep.x.p00", "queue", "1")]
    existing = [
        _binding_record(planned[0]),
        _binding_record(planned[1], routing_key="2"),
    ]
    assert [c.status for c in compare_bindings(planned, existing)] == ["same", "create"]
    with_args = [_binding_record(planned[0], arguments={"x-match": "all"})]
    assert compare_bindings(planned[:1], with_args)[0].status == "create"


def test_removed_endpoint_and_stale_delay_level_are_leftovers() -> None:
    # Given a broker declared for two endpoints and a 1 h cap
    old = plan_topology(_config({"name": "acme", "events": ["a.*"]}, {"name": "gone", "events": ["g.*"]}, cap="1h"))
    exchanges, queues, bindings = _as_declared(old)
    foreign = {"name": "w.control", "type": "fanout", "durable": True, "arguments": {}}
    # When the configuration drops one endpoint and the cap shrinks to 1 s
    new = plan_topology(_config({"name": "acme", "events": ["a.*"]}))
    leftovers = find_leftovers(new, "w", [*exchanges, foreign], queues, bindings)
    # Then the endpoint's objects and the unneeded delay levels are leftovers, and nothing else is
    by_name = {x.name: x for x in leftovers}
    assert {"w.ep.gone", "w.ep.gone.q", "w.ep.gone.dlq"} <= set(by_name)
    assert by_name["w.ep.gone.q"].endpoint == "gone"
    assert "no longer configured" in by_name["w.ep.gone"].reason
    levels = {x.name for x in leftovers if ".delay." in x.name}
    assert levels == {f"w.delay.l{k:02d}{s}" for k in range(new.delay_levels, old.delay_levels) for s in ("", ".q")}
    assert "w.control" not in by_name
    assert all(x.kind != "binding" for x in leftovers), "bindings to leftovers go with them"


def test_a_dropped_event_pattern_is_a_leftover_binding() -> None:
    old = plan_topology(_config({"name": "acme", "events": ["a.*", "b.*"]}))
    exchanges, queues, bindings = _as_declared(old)
    new = plan_topology(_config({"name": "acme", "events": ["a.*"]}))
    leftovers = find_leftovers(new, "w", exchanges, queues, bindings)
    assert [(x.kind, x.source, x.destination, x.routing_key) for x in leftovers] == [
        ("binding", "w.events", "w.ep.acme", "b.*")
    ]


def test_the_workers_own_queues_are_not_leftovers() -> None:
    # Given a broker holding the plan of an ordered endpoint, and the queues two running workers declared
    plan = plan_topology(_config({"name": "ledger", "events": ["b.#"], "ordering": "key", "partitions": 2}))
    exchanges, queues, bindings = _as_declared(plan)
    runtime = [
        {"name": "w.ep.ledger.p00.owner", "durable": False, "auto_delete": True, "exclusive": True},
        {"name": "w.ep.ledger.p01.owner", "durable": False, "auto_delete": True, "exclusive": True},
        {"name": "w.ep.ledger.roster", "durable": False, "auto_delete": True, "exclusive": False},
        # whatever flags a later release gives the roster, its name alone keeps it apart
        {"name": "w.ep.ledger.roster", "durable": True, "auto_delete": False, "exclusive": False},
        {"name": "w.ep.ledger.p07", "durable": True, "auto_delete": False, "exclusive": False},
    ]
    # When leftovers are looked for
    leftovers = find_leftovers(plan, "w", exchanges, [*queues, *runtime], bindings)
    # Then only the partition beyond the plan is one: claims and rosters belong to the running workers
    assert [x.name for x in leftovers] == ["w.ep.ledger.p07"]


def test_an_operators_own_binding_between_planned_exchanges_is_not_a_leftover() -> None:
    # Given the recipe of docs/health.md: the operator exchange bound to an endpoint's exchange
    plan = plan_topology(_config({"name": "ops", "events": ["ops.#"]}, {"name": "acme", "events": ["a.*"]}))
    exchanges, queues, bindings = _as_declared(plan)
    recipe = {"source": "w.operator", "destination": "w.ep.ops", "destination_type": "exchange", "routing_key": "#"}
    # When leftovers are looked for
    leftovers = find_leftovers(plan, "w", exchanges, queues, [*bindings, recipe])
    # Then the binding the plan never makes between those two is none of setup's business
    assert "w.operator" in {e.name for e in plan.exchanges} and leftovers == []


@pytest.mark.parametrize(
    ("ordering", "available", "expected"),
    [
        ("key", {"topic", "direct", "fanout", "x-consistent-hash"}, 0),
        ("key", {"topic", "direct", "fanout"}, 1),
        ("none", {"topic", "direct", "fanout"}, 0),
    ],
)
def test_plugin_problems_name_the_plugin_and_the_command(ordering: str, available: set[str], expected: int) -> None:
    plan = plan_topology(_config({"name": "bill", "events": ["o.*"], "ordering": ordering}))
    problems = plugin_problems(plan, available)
    assert len(problems) == expected
    for problem in problems:
        assert "rabbitmq-plugins enable rabbitmq_consistent_hash_exchange" in problem
        assert "w.ep.bill" in problem


def test_without_a_plan_every_plugin_type_is_required() -> None:
    assert plugin_problems(None, {"topic"}) and not plugin_problems(None, {"x-consistent-hash"})


def test_a_delay_level_is_named_in_ascii_digits() -> None:
    # Given a queue in the delay namespace named with two ARABIC-INDIC DIGIT NINEs (\d read them as level 99)
    plan = plan_topology(_config({"name": "acme", "events": ["a.*"]}))
    exchanges, queues, bindings = _as_declared(plan)
    odd = {**queues[0], "name": "w.delay.l\u0669\u0669.q"}
    # Then it is a leftover that is not in the plan, never called a delay level
    [leftover] = find_leftovers(plan, "w", exchanges, [*queues, odd], bindings)
    assert (leftover.name, leftover.reason) == ("w.delay.l\u0669\u0669.q", "not in the plan")


def test_lanes_beyond_a_lowered_count_are_leftovers_and_the_rest_are_not() -> None:
    # Given a broker declared with 4 lanes (and a lane-mate namespace that only looks alike)
    old = plan_topology(_config({"name": "acme", "events": ["a.*"]}, lanes=4))
    exchanges, queues, bindings = _as_declared(old)
    lookalike = {**queues[0], "name": "wx.lane.3"}
    # When the count is lowered to 2
    new = plan_topology(_config({"name": "acme", "events": ["a.*"]}, lanes=2))
    leftovers = find_leftovers(new, "w", exchanges, [*queues, lookalike], bindings)
    # Then lanes 2 and 3 and their DLQs are leftovers, each saying why; the routing queue stays
    by_name = {x.name: x for x in leftovers}
    assert set(by_name) == {"w.lane.2", "w.lane.2.dlq", "w.lane.3", "w.lane.3.dlq"}
    assert "beyond [lanes] count = 2" in by_name["w.lane.3"].reason
    assert all(x.endpoint is None for x in leftovers)


def test_turning_lanes_off_leaves_the_lanes_and_the_routing_queue_as_leftovers() -> None:
    old = plan_topology(_config({"name": "acme", "events": ["a.*"]}, lanes=2))
    exchanges, queues, bindings = _as_declared(old)
    new = plan_topology(_config({"name": "acme", "events": ["a.*"]}))
    by_name = {x.name: x for x in find_leftovers(new, "w", exchanges, queues, bindings)}
    routing = {"w.route.hash", "w.route.dlq", *(f"w.route.p{i}" for i in range(4))}
    lanes = {"w.lane.0", "w.lane.0.dlq", "w.lane.1", "w.lane.1.dlq", *(f"w.lane.o{i}" for i in range(4))}
    # and the delay levels the lanes' own waits needed above the 1 s cap's 10 (LANE_DELAY_REACH: 16 levels)
    reach = {name for level in range(10, 16) for name in (f"w.delay.l{level:02d}", f"w.delay.l{level:02d}.q")}
    assert set(by_name) == routing | lanes | reach
    assert "lanes are off" in by_name["w.route.p0"].reason and "lanes are off" in by_name["w.route.hash"].reason
    assert "beyond [lanes] count = 0" in by_name["w.lane.1"].reason
    assert "ordered lane" in by_name["w.lane.o3"].reason


def test_an_earlier_releases_single_routing_queue_is_a_leftover_to_prune_once_empty() -> None:
    plan = plan_topology(_config({"name": "acme", "events": ["a.*"]}, lanes=2))
    exchanges, queues, bindings = _as_declared(plan)
    old = {"name": "w.route", "durable": True, "auto_delete": False, "exclusive": False, "arguments": {}}
    [leftover] = find_leftovers(plan, "w", exchanges, [*queues, old], bindings)
    assert leftover.name == "w.route" and "earlier release" in leftover.reason
    [beyond] = find_leftovers(plan, "w", exchanges, [*queues, {**old, "name": "w.route.p9"}], bindings)
    assert "beyond [lanes] route_partitions" in beyond.reason
    runtime = [{**old, "name": n} for n in ("w.route.roster", "w.route.p1.owner", "w.lane.o2.owner")]
    assert find_leftovers(plan, "w", exchanges, [*queues, *runtime], bindings) == []


def test_a_demoted_endpoints_retry_binding_is_no_leftover_until_its_time_has_passed() -> None:
    plan = plan_topology(_config({"name": "acme", "events": ["a.*"]}, lanes=2))
    exchanges, queues, bindings = _as_declared(plan)
    turned = {
        "source": "w.delay.due",
        "destination": "w.lane.1",
        "destination_type": "queue",
        "routing_key": "#.w.ep.gone.q",
        "arguments": {"x-warren-until": 10_000},
    }
    assert find_leftovers(plan, "w", exchanges, queues, [*bindings, turned], now_ms=9_999) == []
    [leftover] = find_leftovers(plan, "w", exchanges, queues, [*bindings, turned], now_ms=10_000)
    assert (leftover.kind, leftover.destination, leftover.routing_key) == ("binding", "w.lane.1", "#.w.ep.gone.q")
