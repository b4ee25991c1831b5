"""Tenant routing in the plan: a tenant's endpoint binds on the tenants exchange only, a platform endpoint on the
events exchange (and, with ``all_tenants``, on the tenants exchange with ``*`` for the tenant word)."""

from __future__ import annotations

from typing import Any

import pytest

from warren.topology import names
from warren.topology.config import ConfigError, Endpoint, WarrenConfig
from warren.topology.plan import Binding
from warren.topology.planner import endpoint_plan, plan_topology
from warren.topology.topics import topic_matches

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
P = "warren"


def config(*endpoints: dict[str, Any]) -> WarrenConfig:
    eps = [{"url": "https://hooks.example/in", "secret": SECRET, "events": ["order.*"], **e} for e in endpoints]
    return WarrenConfig(endpoints=eps)


def feeds(plan_bindings: tuple[Binding, ...], endpoint: str) -> set[tuple[str, str]]:
    ex = names.endpoint_exchange(P, endpoint)
    return {(b.source, b.routing_key) for b in plan_bindings if b.destination == ex}


def test_each_kind_of_endpoint_binds_where_its_events_are_published() -> None:
    # Given a tenant's endpoint, a platform endpoint, and a platform endpoint that asks for every tenant
    plan = plan_topology(
        config({"name": "acme-hooks", "tenant": "acme"}, {"name": "ops"}, {"name": "audit", "all_tenants": True})
    )
    events, tenants = names.events_exchange(P), names.tenants_exchange(P)
    # Then the tenant's endpoint is fed by its tenant's word only, the platform one as before tenants existed
    assert feeds(plan.bindings, "acme-hooks") == {(tenants, "acme.order.*")}
    assert feeds(plan.bindings, "ops") == {(events, "order.*")}
    assert feeds(plan.bindings, "audit") == {(events, "order.*"), (tenants, "*.order.*")}
    assert plan.exchange(tenants).type == "topic"


@pytest.mark.parametrize(
    ("tenant", "pattern", "routing_key", "delivered"),
    [
        ("acme", "order.*", "acme.order.paid", True),
        ("acme", "order.*", "globex.order.paid", False),
        ("acme", "#", "acme.order.paid", True),
        ("acme", "#", "acme-2.order.paid", False),
        ("*", "order.*", "globex.order.paid", True),
        ("*", "#", "acme.x", True),
    ],
)
def test_the_tenant_word_isolates_one_tenant_whatever_the_pattern(
    tenant: str, pattern: str, routing_key: str, delivered: bool
) -> None:
    # A tenant is one word: '#' after it cannot reach into another tenant's keys
    assert topic_matches(names.tenant_routing_key(tenant, pattern), routing_key) is delivered


def test_an_endpoint_plan_is_exactly_its_share_of_the_whole_plan() -> None:
    cfg = config({"name": "acme-hooks", "tenant": "acme"}, {"name": "billing", "ordering": "key", "partitions": 3})
    whole = plan_topology(cfg)
    for endpoint in cfg.endpoints:
        alone = endpoint_plan(cfg, endpoint)
        assert alone.queues == whole.endpoint_queues(endpoint.name)
        assert all(e in whole.exchanges for e in alone.exchanges) and all(b in whole.bindings for b in alone.bindings)
        assert names.endpoint_exchange(P, endpoint.name) in {e.name for e in alone.exchanges}


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"tenant": "Acme"}, "tenant"),
        ({"tenant": "ac.me"}, "tenant"),
        ({"tenant": "*"}, "tenant"),
        ({"tenant": ""}, "tenant"),
        ({"tenant": "acme", "all_tenants": True}, "all_tenants applies only"),
    ],
)
def test_bad_tenants_are_refused_naming_the_field(tmp_path: Any, fields: dict[str, Any], problem: str) -> None:
    lines = [f"{k} = {v!r}".replace("True", "true") for k, v in fields.items()]
    file = tmp_path / "warren.toml"
    file.write_text(
        "[[endpoints]]\nname = 'a'\nurl = 'https://hooks.example/in'\n"
        f"secret = '{SECRET}'\nevents = ['x']\n" + "\n".join(lines) + "\n"
    )
    from warren.topology.config import load_config

    with pytest.raises(ConfigError) as caught:
        load_config(file)
    assert "endpoints[0] ('a')" in str(caught.value) and problem in str(caught.value)


@pytest.mark.parametrize(
    ("tenant", "all_tenants", "event_tenant", "receives"),
    [
        ("acme", False, "acme", True),  # its own tenant's event
        ("acme", False, "globex", False),  # another tenant's: never
        ("acme", False, None, False),  # a tenant-less (platform) event: never to a tenant's endpoint
        (None, False, None, True),  # a platform endpoint: tenant-less events
        (None, False, "acme", False),  # ...and no tenant's, unless it asks
        (None, True, "acme", True),  # all_tenants: every tenant's
        (None, True, None, True),  # ...and the tenant-less ones
    ],
)
def test_an_endpoint_receives_only_the_tenants_it_serves(
    tenant: str | None, all_tenants: bool, event_tenant: str | None, receives: bool
) -> None:
    endpoint = Endpoint.model_validate(
        {"name": "e", "url": "http://127.0.0.1:9/e", "secret": SECRET, "events": ["#"], "tenant": tenant,
         "all_tenants": all_tenants}
    )  # fmt: skip
    assert endpoint.receives_tenant(event_tenant) is receives
