"""The planner: configuration in, an immutable plan out, with the objects and arguments the design needs."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from warren.topology import names
from warren.topology.config import WarrenConfig
from warren.topology.delays import level_count
from warren.topology.plan import Plan
from warren.topology.planner import DELIVERY_LIMIT, HASH_HEADER, plan_topology

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
P = "warren"


def config(*endpoints: dict[str, Any], **sections: Any) -> WarrenConfig:
    eps = [{"url": "https://hooks.example/in", "secret": SECRET, "events": ["message.*"], **e} for e in endpoints]
    return WarrenConfig(endpoints=eps, **sections)


def backstop(dead_key: str) -> dict[str, Any]:
    """The arguments every consumed quorum queue carries: Warren's delivery limit and the route to its DLQ."""
    return {
        "x-delivery-limit": DELIVERY_LIMIT,
        "x-dead-letter-exchange": names.dead_exchange(P),
        "x-dead-letter-routing-key": dead_key,
        "x-dead-letter-strategy": "at-least-once",
        "x-overflow": "reject-publish",
    }


ACME = {"name": "acme", "events": ["message.*", "user.created"]}
BILLING = {"name": "billing", "events": ["order.paid"], "ordering": "key", "partitions": 8}


@pytest.fixture
def plan() -> Plan:
    return plan_topology(config(ACME, BILLING, retry={"base": "2s", "cap": "1h"}))


def test_the_plan_is_deterministic_and_immutable(plan: Plan) -> None:
    # Given the same configuration twice, when planned, then the plans are equal (setup relies on it)
    assert plan_topology(config(ACME, BILLING, retry={"base": "2s", "cap": "1h"})) == plan
    # and neither the plan nor an object's arguments can be changed
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.delay_levels = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        plan.queues[0].arguments["x-queue-type"] = "classic"  # type: ignore[index]


def test_every_name_is_unique_and_every_binding_joins_planned_objects(plan: Plan) -> None:
    exchanges = [e.name for e in plan.exchanges]
    queues = [q.name for q in plan.queues]
    assert len(set(exchanges)) == len(exchanges) and len(set(queues)) == len(queues)
    for binding in plan.bindings:
        assert binding.source in exchanges
        assert binding.destination in (queues if binding.destination_type == "queue" else exchanges)
    keys = [(b.source, b.destination, b.routing_key) for b in plan.bindings]
    assert len(set(keys)) == len(keys)


def test_the_events_exchange_is_a_topic_bound_to_each_endpoint_by_its_patterns(plan: Plan) -> None:
    assert plan.exchange(names.events_exchange(P)).type == "topic"
    e2e = {(b.destination, b.routing_key) for b in plan.bindings if b.source == names.events_exchange(P)}
    assert e2e == {
        ("warren.ep.acme", "message.*"),
        ("warren.ep.acme", "user.created"),
        ("warren.ep.billing", "order.paid"),
    }
    assert all(b.destination_type == "exchange" for b in plan.bindings if b.source == names.events_exchange(P))


def test_an_unordered_endpoint_has_one_work_queue_behind_a_fanout(plan: Plan) -> None:
    assert plan.exchange("warren.ep.acme").type == "fanout"
    work = plan.queue("warren.ep.acme.q")
    assert work.endpoint == "acme" and work.role == "work"
    assert dict(work.arguments) == {"x-queue-type": "quorum", **backstop("acme")}
    assert [q.name for q in plan.endpoint_queues("acme")] == ["warren.ep.acme.q", "warren.ep.acme.dlq"]
    # The delay chain brings retried messages back by routing key (the key ends with the queue's name)
    back = [b for b in plan.bindings if b.source == names.delay_due_exchange(P) and b.destination == work.name]
    assert [b.routing_key for b in back] == ["#.warren.ep.acme.q"]


def test_an_ordered_endpoint_hashes_a_header_onto_n_single_active_consumer_partitions(plan: Plan) -> None:
    # Given an endpoint with ordering = "key" and 8 partitions
    exchange = plan.exchange("warren.ep.billing")
    # Then its exchange is a consistent-hash exchange hashing the key header, never the routing key
    assert exchange.type == "x-consistent-hash"
    assert dict(exchange.arguments) == {"hash-header": HASH_HEADER}
    # And it has 8 partition queues, each single-active-consumer, bound with equal weight
    partitions = [q for q in plan.endpoint_queues("billing") if q.role.startswith("partition")]
    assert [q.name for q in partitions] == [f"warren.ep.billing.p{i:02d}" for i in range(8)]
    for queue in partitions:
        assert dict(queue.arguments) == {
            "x-queue-type": "quorum",
            "x-single-active-consumer": True,
            **backstop("billing"),
        }
    weights = {b.destination: b.routing_key for b in plan.bindings if b.source == exchange.name}
    assert weights == {q.name: "1" for q in partitions}
    # Ordered endpoints retry in the worker: no way back from the delay chain into a partition
    assert not [b for b in plan.bindings if b.source == names.delay_due_exchange(P) and "billing" in b.destination]


def test_the_hash_header_is_the_key_header_the_publisher_sets() -> None:
    from warren.broker.wire import H_KEY

    assert HASH_HEADER == H_KEY


def test_ordered_endpoint_defaults_to_four_partitions() -> None:
    plan = plan_topology(config({"name": "billing", "ordering": "key"}))
    assert len([q for q in plan.endpoint_queues("billing") if q.role.startswith("partition")]) == 4


@pytest.mark.parametrize(
    ("retry", "longest_seconds"),
    [
        ({"base": "2s", "cap": "1h"}, 3600.0),
        ({"base": "100ms", "cap": "1s"}, 1.0),
        ({"base": "200ms", "cap": "2s"}, 2.0),
        ({"schedule": ["10s", "1m", "5m", "30m", "2h"]}, 7200.0),
    ],
)
def test_delay_levels_reach_the_longest_delay(retry: dict[str, Any], longest_seconds: float) -> None:
    # Given a retry policy whose longest wait is longest_seconds
    plan = plan_topology(config(ACME, retry=retry))
    # Then there are just enough levels: their TTLs add up to at least the longest delay, one fewer would not
    ttls = [int(plan.queue(names.delay_queue(P, k)).arguments["x-message-ttl"]) for k in range(plan.delay_levels)]
    assert ttls == [1 << k for k in range(plan.delay_levels)]
    assert sum(ttls) >= longest_seconds * 1000 > sum(ttls[:-1])
    assert plan.delay_levels == level_count(longest_seconds)


def test_a_per_endpoint_retry_override_can_lengthen_the_chain() -> None:
    short = plan_topology(config(ACME, retry={"cap": "1s"}))
    longer = plan_topology(config({**ACME, "retry": {"cap": "1h"}}, retry={"cap": "1s"}))
    assert longer.delay_levels == level_count(3600.0) > short.delay_levels


def test_delay_queues_chain_down_and_dead_letter_at_least_once(plan: Plan) -> None:
    for level in range(plan.delay_levels):
        queue = plan.queue(names.delay_queue(P, level))
        below = names.delay_exchange(P, level - 1) if level else names.delay_due_exchange(P)
        assert dict(queue.arguments) == {
            "x-queue-type": "quorum",
            "x-delivery-limit": DELIVERY_LIMIT,
            "x-message-ttl": 1 << level,
            "x-dead-letter-exchange": below,
            "x-dead-letter-strategy": "at-least-once",
            "x-overflow": "reject-publish",
        }
        # Word `level` of the key decides: 1 waits in this level's queue, 0 goes straight down
        keys = {(b.destination, b.routing_key) for b in plan.bindings if b.source == names.delay_exchange(P, level)}
        skip = "*." * level
        assert keys == {(queue.name, f"{skip}1.#"), (below, f"{skip}0.#")}


def test_dlqs_have_warrens_delivery_limit_and_no_ttl(plan: Plan) -> None:
    for endpoint in ("acme", "billing"):
        dlq = plan.queue(names.dlq(P, endpoint))
        assert dlq.endpoint == endpoint
        assert dlq.arguments["x-delivery-limit"] == DELIVERY_LIMIT
        assert "x-message-ttl" not in dlq.arguments
        assert "x-expires" not in dlq.arguments
        assert "x-dead-letter-exchange" not in dlq.arguments
    dead = [(b.routing_key, b.destination) for b in plan.bindings if b.source == names.dead_exchange(P)]
    assert plan.exchange(names.dead_exchange(P)).type == "direct"
    assert dead == [("acme", "warren.ep.acme.dlq"), ("billing", "warren.ep.billing.dlq")]


def test_classic_queue_type_is_used_everywhere_and_drops_quorum_only_arguments() -> None:
    plan = plan_topology(config(ACME, BILLING, broker={"queue_type": "classic"}))
    # (except the state and endpoints streams: streams whatever the queue type, for their non-destructive reads)
    streams = {names.state_queue(P), names.endpoints_stream(P)}
    assert {q.arguments["x-queue-type"] for q in plan.queues if q.name not in streams} == {"classic"}
    assert {plan.queue(s).arguments["x-queue-type"] for s in streams} == {"stream"}
    delay = plan.queue(names.delay_queue(P, 0))
    assert "x-dead-letter-strategy" not in delay.arguments and "x-overflow" not in delay.arguments
    assert delay.arguments["x-dead-letter-exchange"] == names.delay_due_exchange(P)
    assert plan.queue("warren.ep.billing.p00").arguments["x-single-active-consumer"] is True


def test_the_prefix_names_every_object() -> None:
    plan = plan_topology(config(ACME, BILLING, broker={"prefix": "tenant-7"}))
    assert all(e.name.startswith("tenant-7.") for e in plan.exchanges)
    assert all(q.name.startswith("tenant-7.") for q in plan.queues)


def test_no_endpoints_still_plans_the_shared_objects() -> None:
    plan = plan_topology(config())
    assert {names.events_exchange(P), names.dead_exchange(P), names.delay_due_exchange(P)} <= {
        e.name for e in plan.exchanges
    }
    assert all(q.endpoint is None for q in plan.queues)


def test_every_quorum_queue_declares_warrens_delivery_limit() -> None:
    # Given endpoints of both orderings and an inbound source
    plan = plan_topology(
        config(ACME, BILLING, inbound=[{"name": "stripe", "verifier": "none", "id_field": "id", "handler": "m:f"}])
    )
    # Then no quorum queue is left to the broker's default limit (20 on RabbitMQ 4.x): each names Warren's,
    # the largest the argument holds (-1 would drop at the first return on 3.10)
    quorum = [q for q in plan.queues if q.arguments["x-queue-type"] == "quorum"]
    assert len(quorum) == len(plan.queues) - 2  # all but the state and endpoints streams
    assert {q.arguments["x-delivery-limit"] for q in quorum} == {2**31 - 1}


def test_every_consumed_queue_dead_letters_at_least_once_into_its_own_dlq() -> None:
    # Given the queues workers and the inbox consume: work, partitions, inbound
    plan = plan_topology(
        config(ACME, BILLING, inbound=[{"name": "stripe", "verifier": "none", "id_field": "id", "handler": "m:f"}])
    )
    consumed = [q for q in plan.queues if q.role in ("work", "inbound stripe") or q.role.startswith("partition")]
    assert len(consumed) == 1 + 8 + 1
    dead_routes = {b.routing_key: b.destination for b in plan.bindings if b.source == names.dead_exchange(P)}
    for queue in consumed:
        # Then each has the backstop route, at least once (which needs reject-publish), ...
        key = str(queue.arguments["x-dead-letter-routing-key"])
        assert {k: v for k, v in queue.arguments.items() if k in backstop(key)} == backstop(key)
        # ... and its key lands in that queue's own DLQ
        expected = names.inbound_dlq(P, "stripe") if queue.endpoint is None else names.dlq(P, queue.endpoint)
        assert dead_routes[key] == expected
    # And the DLQs themselves dead-letter nowhere (a route from a DLQ could only loop or drop)
    assert all("x-dead-letter-exchange" not in q.arguments for q in plan.queues if q.name.endswith(".dlq"))


def test_classic_queues_get_no_delivery_limit_or_backstop() -> None:
    plan = plan_topology(config(ACME, BILLING, broker={"queue_type": "classic"}))
    assert not [q for q in plan.queues if "x-delivery-limit" in q.arguments]
    assert plan.queue("warren.ep.acme.q").arguments == {"x-queue-type": "classic"}
