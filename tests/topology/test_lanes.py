"""Lanes in the configuration and the plan: off by default, a fixed set of shared queues when on, nothing per
lane endpoint (docs/architecture.md, "Lanes")."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from typing import Any

import pytest

from warren.topology import names
from warren.topology.config import ConfigError, WarrenConfig
from warren.topology.plan import Plan
from warren.topology.planner import DELIVERY_LIMIT, endpoint_plan, plan_topology

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
P = "warren"


def config(*endpoints: dict[str, Any], **sections: Any) -> WarrenConfig:
    eps = [{"url": "https://hooks.example/in", "secret": SECRET, "events": ["message.*"], **e} for e in endpoints]
    return WarrenConfig(endpoints=eps, **sections)


def lane_endpoints(count: int) -> list[dict[str, Any]]:
    return [{"name": f"tail-{i}", "home": "lane"} for i in range(count)]


def test_lane_names() -> None:
    assert names.lane_queue(P, 3) == "warren.lane.3"
    assert names.lane_dlq(P, 3) == "warren.lane.3.dlq"
    assert names.lane_dead_key(3) == "lane.3"
    assert names.route_queue(P) == "warren.route"
    assert names.route_exchange(P) == "warren.route.hash"
    assert names.route_partition(P, 2) == "warren.route.p2"
    assert names.ordered_lane_queue(P, 1) == "warren.lane.o1"
    assert names.is_runtime_queue(P, "warren.route.roster") and names.is_runtime_queue(P, "warren.lane.o1.owner")
    assert not names.is_runtime_queue(P, "warren.route.p1") and not names.is_runtime_queue(P, "warren.lane.o1")
    park = names.ordered_park_queue(P, "ledger")  # a held ordered lane endpoint's, and its drain lock
    assert names.is_runtime_queue(P, park) and names.is_runtime_queue(P, f"{park}.drain")


def test_lane_of_is_stable_across_processes() -> None:
    # Given a name hashed here and in a fresh interpreter (another hash salt), then both agree
    here = [names.lane_of(f"ep-{i}", 16) for i in range(50)]
    code = "from warren.topology.names import lane_of; print([lane_of(f'ep-{i}', 16) for i in range(50)])"
    there = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert str(here) == there.strip()
    # and it is pinned: a change of hash would move every lane endpoint's messages to another lane
    assert names.lane_of("acme", 16) == names.lane_of("acme", 16)
    assert 0 <= names.lane_of("acme", 1) == 0


def test_lane_of_spreads_endpoints_evenly() -> None:
    # Given 16,000 endpoint names on 16 lanes, then every lane gets about a sixteenth (within 10%)
    counts = Counter(names.lane_of(f"customer-{i}", 16) for i in range(16_000))
    assert set(counts) == set(range(16))
    assert all(900 <= n <= 1100 for n in counts.values()), counts


def test_lane_of_needs_a_lane() -> None:
    with pytest.raises(ValueError, match="at least one lane"):
        names.lane_of("acme", 0)


def test_lanes_are_off_by_default_and_the_plan_is_unchanged() -> None:
    plain = config({"name": "acme"})
    assert plain.lanes.count == 0 and plain.endpoints[0].home == "dedicated"
    plan = plan_topology(plain)
    assert not [q for q in plan.queues if ".lane." in q.name or ".route" in q.name]


def test_a_lane_endpoint_needs_lanes() -> None:
    with pytest.raises(ValueError, match=r"tail-0 have home = 'lane' but lanes are off: set \[lanes\] count"):
        config(*lane_endpoints(1))


def test_an_ordered_lane_endpoint_is_accepted_and_its_keys_spread_over_the_ordered_lanes() -> None:
    loaded = config({"name": "billing", "home": "lane", "ordering": "key"}, lanes={"count": 4})
    assert loaded.endpoints[0].home == "lane" and loaded.lanes.ordered_count == 4
    assert loaded.lanes.route_partitions == 4
    spread = {names.ordered_lane_of("billing", f"k{i}", 4) for i in range(64)}
    assert spread == {0, 1, 2, 3}
    assert names.ordered_lane_of("billing", "k1", 4) == names.ordered_lane_of("billing", "k1", 4)


def test_the_lanes_section_is_read_from_the_file(tmp_path: Any) -> None:
    from warren.topology.config import load_config

    file = tmp_path / "warren.toml"
    file.write_text("[lanes]\ncount = 8\nprefetch = 32\n")
    loaded = load_config(file)
    assert (loaded.lanes.count, loaded.lanes.prefetch) == (8, 32)
    file.write_text("[lanes]\ncount = -1\n")
    with pytest.raises(ConfigError, match=r"lanes\.count"):
        load_config(file)


@pytest.fixture
def plan() -> Plan:
    return plan_topology(config({"name": "acme"}, *lane_endpoints(3), lanes={"count": 4}))


def test_the_plan_declares_the_lanes_their_dlqs_and_the_router_and_its_dlq(plan: Plan) -> None:
    for lane in range(4):
        queue = plan.queue(names.lane_queue(P, lane))
        # a lane is consumed like a work queue: the delivery limit's backstop routes to its own DLQ
        assert dict(queue.arguments) == {
            "x-queue-type": "quorum",
            "x-delivery-limit": DELIVERY_LIMIT,
            "x-dead-letter-exchange": names.dead_exchange(P),
            "x-dead-letter-routing-key": f"lane.{lane}",
            "x-dead-letter-strategy": "at-least-once",
            "x-overflow": "reject-publish",
        }
        dead = plan.queue(names.lane_dlq(P, lane))
        assert "x-dead-letter-exchange" not in dead.arguments and "x-message-ttl" not in dead.arguments
        into_lane = {(b.source, b.routing_key) for b in plan.bindings if b.destination == queue.name}
        assert into_lane == {(names.delay_due_exchange(P), f"#.{queue.name}")}
        into_dead = {(b.source, b.routing_key) for b in plan.bindings if b.destination == dead.name}
        assert into_dead == {(names.dead_exchange(P), f"lane.{lane}")}
    # the router's input: a consistent-hash exchange on warren-key, fed every event of both exchanges, over
    # route partitions (single active consumer; events sent round again come back to their partition through
    # the delay chain); like a lane, the delivery limit's backstop routes to its own DLQ
    hashed = next(e for e in plan.exchanges if e.name == names.route_exchange(P))
    assert hashed.type == "x-consistent-hash" and dict(hashed.arguments) == {"hash-header": "warren-key"}
    into_hash = {(b.source, b.routing_key) for b in plan.bindings if b.destination == hashed.name}
    assert into_hash == {(names.events_exchange(P), "#"), (names.tenants_exchange(P), "#")}
    for index in range(4):
        route = names.route_partition(P, index)
        assert dict(plan.queue(route).arguments) == {
            "x-queue-type": "quorum",
            "x-delivery-limit": DELIVERY_LIMIT,
            "x-single-active-consumer": True,
            "x-dead-letter-exchange": names.dead_exchange(P),
            "x-dead-letter-routing-key": "route.stage",
            "x-dead-letter-strategy": "at-least-once",
            "x-overflow": "reject-publish",
        }
        into_route = {(b.source, b.routing_key) for b in plan.bindings if b.destination == route}
        assert into_route == {(hashed.name, "1"), (names.delay_due_exchange(P), f"#.{route}")}
    assert not [q for q in plan.queues if q.name == names.route_queue(P)]
    # ordered lanes: single active consumer, no binding (the router publishes to them by name)
    for index in range(4):
        ordered = plan.queue(names.ordered_lane_queue(P, index))
        assert ordered.arguments["x-single-active-consumer"] is True
        assert not [b for b in plan.bindings if b.destination == ordered.name]
    route_dlq = plan.queue(names.route_dlq(P))
    assert "x-dead-letter-exchange" not in route_dlq.arguments and "x-message-ttl" not in route_dlq.arguments
    into_route_dlq = {(b.source, b.routing_key) for b in plan.bindings if b.destination == route_dlq.name}
    assert into_route_dlq == {(names.dead_exchange(P), "route.stage")}


def test_lane_endpoints_own_nothing_on_the_broker(plan: Plan) -> None:
    # Given 3 lane endpoints beside a dedicated one, then only the dedicated one has objects of its own
    owned = [q.name for q in plan.queues if q.endpoint]
    assert owned == [names.work_queue(P, "acme"), names.dlq(P, "acme")]
    assert not [e for e in plan.exchanges if e.name.startswith(f"{P}.ep.tail-")]
    assert not [b for b in plan.bindings if "tail-" in b.source + b.destination + b.routing_key]
    # and a live apply of one declares nothing
    lane_endpoint = config(*lane_endpoints(1), lanes={"count": 4}).endpoints[0]
    alone = endpoint_plan(config(lanes={"count": 4}), lane_endpoint)
    assert (alone.exchanges, alone.queues, alone.bindings) == ((), (), ())


def test_the_object_count_does_not_grow_with_lane_endpoints() -> None:
    def counts(n: int) -> tuple[int, int, int]:
        plan = plan_topology(config({"name": "acme"}, *lane_endpoints(n), lanes={"count": 16}))
        return len(plan.exchanges), len(plan.queues), len(plan.bindings)

    assert counts(2) == counts(2_000)
