"""The routing stage's index: the same answer RabbitMQ's bindings would give, fast with many endpoints."""

from __future__ import annotations

import random
import time
from typing import Any

import pytest

from warren.consumers.lane_index import SubscriptionIndex
from warren.topology import names
from warren.topology.config import Endpoint
from warren.topology.planner import subscription_bindings
from warren.topology.topics import topic_matches

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
P = "warren"


def endpoint(name: str, events: list[str], **fields: Any) -> Endpoint:
    return Endpoint(name=name, url="https://hooks.example/in", secret=SECRET, events=events, home="lane", **fields)


def routed_by_bindings(endpoints: list[Endpoint], tenant: str | None, event_type: str) -> list[str]:
    """What a dedicated endpoint's bindings would route: the reference the index must agree with."""
    exchange = names.tenants_exchange(P) if tenant else names.events_exchange(P)
    key = names.tenant_routing_key(tenant, event_type) if tenant else event_type
    return sorted(
        e.name
        for e in endpoints
        if any(b.source == exchange and topic_matches(b.routing_key, key) for b in subscription_bindings(P, e))
    )


def names_of(found: list[Endpoint]) -> list[str]:
    return [e.name for e in found]


def test_exact_types_and_wildcards() -> None:
    index = SubscriptionIndex(
        [
            endpoint("exact", ["order.paid"]),
            endpoint("star", ["order.*"]),
            endpoint("hash", ["#"]),
            endpoint("deep", ["order.#"]),
            endpoint("other", ["user.created"]),
        ]
    )
    assert names_of(index.subscribers(None, "order.paid")) == ["deep", "exact", "hash", "star"]
    assert names_of(index.subscribers(None, "order.paid.late")) == ["deep", "hash"]
    assert names_of(index.subscribers(None, "order")) == ["deep", "hash"]
    assert names_of(index.subscribers(None, "user.created")) == ["hash", "other"]
    assert names_of(index.subscribers(None, "invoice.sent")) == ["hash"]


def test_tenant_rules_are_those_of_receives_tenant() -> None:
    index = SubscriptionIndex(
        [
            endpoint("acme-hooks", ["#"], tenant="acme"),
            endpoint("globex-hooks", ["#"], tenant="globex"),
            endpoint("ops", ["#"]),
            endpoint("audit", ["order.*"], all_tenants=True),
        ]
    )
    # a tenant's event: that tenant's endpoints and the platform's all_tenants ones, never another tenant's
    assert names_of(index.subscribers("acme", "order.paid")) == ["acme-hooks", "audit"]
    assert names_of(index.subscribers("acme", "user.created")) == ["acme-hooks"]
    assert names_of(index.subscribers("initech", "order.paid")) == ["audit"]
    # a tenant-less event: the platform's endpoints only
    assert names_of(index.subscribers(None, "order.paid")) == ["audit", "ops"]


def test_endpoints_are_added_replaced_and_removed() -> None:
    index = SubscriptionIndex([endpoint("a", ["order.*"])])
    index.add(endpoint("a", ["user.created"], tenant="acme"))  # a new configuration replaces the old
    assert index.subscribers(None, "order.paid") == []
    assert names_of(index.subscribers("acme", "user.created")) == ["a"]
    index.remove("a")
    index.remove("never-there")
    assert index.subscribers("acme", "user.created") == [] and len(index) == 0 and "a" not in index


def test_a_closed_endpoint_is_routed_to_no_more_but_stays_known_until_opened_again() -> None:
    # (an ordered endpoint being promoted: warren/broker/ordered_promotion.py)
    index = SubscriptionIndex([endpoint("a", ["order.*"]), endpoint("b", ["#"])])
    index.close("a", True)
    assert names_of(index.subscribers(None, "order.paid")) == ["b"]
    assert "a" in index and index.get("a") is not None
    index.add(endpoint("a", ["order.*", "user.*"]))  # reconfigured while closed: still closed
    assert names_of(index.subscribers(None, "user.created")) == ["b"]
    index.close("a", False)
    assert names_of(index.subscribers(None, "order.paid")) == ["a", "b"]


def test_the_index_agrees_with_the_bindings_on_random_subscriptions() -> None:
    rng = random.Random(34)
    words = ["order", "user", "paid", "created", "x", "*", "#"]
    tenants = [None, "acme", "globex"]
    endpoints = []
    for i in range(300):
        events = [".".join(rng.choice(words) for _ in range(rng.randint(1, 3))) for _ in range(rng.randint(1, 3))]
        tenant = rng.choice(tenants)
        all_tenants = tenant is None and rng.random() < 0.3
        endpoints.append(endpoint(f"ep-{i}", events, tenant=tenant, all_tenants=all_tenants))
    index = SubscriptionIndex(endpoints)
    for _ in range(300):
        event_type = ".".join(rng.choice(words[:5]) for _ in range(rng.randint(1, 4)))
        tenant = rng.choice([*tenants, "initech"])
        assert names_of(index.subscribers(tenant, event_type)) == routed_by_bindings(endpoints, tenant, event_type)


@pytest.mark.timeout(60)
def test_one_tenants_event_among_100000_endpoints_is_routed_fast() -> None:
    # Given 100,000 tenant endpoints (a handful of patterns each) and a few platform ones
    index = SubscriptionIndex(
        [endpoint(f"c-{i}", ["order.paid", "user.*"], tenant=f"t{i}") for i in range(100_000)]
        + [endpoint(f"p-{i}", ["order.#"], all_tenants=True) for i in range(10)]
    )
    # When one tenant's event is routed many times, then each lookup takes well under a millisecond
    started = time.perf_counter()
    for _ in range(1_000):
        found = index.subscribers("t500", "order.paid")
    per_event = (time.perf_counter() - started) / 1_000
    assert len(found) == 11
    assert per_event < 0.001, per_event


def test_answers_kept_between_changes_follow_every_add_remove_and_close() -> None:
    # subscribers() keeps its answers until the index changes: each change is seen by the next event
    index = SubscriptionIndex([endpoint("a", ["order.paid"])])
    assert names_of(index.subscribers(None, "order.paid")) == ["a"]
    index.subscribers(None, "order.paid").clear()  # the caller's own list: the kept answer stays whole
    assert names_of(index.subscribers(None, "order.paid")) == ["a"]
    index.add(endpoint("b", ["order.*"]))
    assert names_of(index.subscribers(None, "order.paid")) == ["a", "b"]
    index.close("b", True)
    assert names_of(index.subscribers(None, "order.paid")) == ["a"]
    index.close("b", False)
    index.add(endpoint("a", ["user.created"]))  # reconfigured
    assert names_of(index.subscribers(None, "order.paid")) == ["b"]
    index.remove("b")
    assert index.subscribers(None, "order.paid") == []
