"""Names: one small pure function per kind of object, stable and prefixed."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from warren.topology import names

PREFIX = "warren"


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        (lambda: names.events_exchange(PREFIX), "warren.events"),
        (lambda: names.endpoint_exchange(PREFIX, "acme"), "warren.ep.acme"),
        (lambda: names.work_queue(PREFIX, "acme"), "warren.ep.acme.q"),
        (lambda: names.partition_queue(PREFIX, "billing", 0), "warren.ep.billing.p00"),
        (lambda: names.partition_queue(PREFIX, "billing", 7), "warren.ep.billing.p07"),
        (lambda: names.partition_queue(PREFIX, "billing", 123), "warren.ep.billing.p123"),
        (lambda: names.dlq(PREFIX, "acme"), "warren.ep.acme.dlq"),
        (lambda: names.dead_exchange(PREFIX), "warren.dead"),
        (lambda: names.delay_exchange(PREFIX, 3), "warren.delay.l03"),
        (lambda: names.delay_queue(PREFIX, 21), "warren.delay.l21.q"),
        (lambda: names.delay_due_exchange(PREFIX), "warren.delay.due"),
        (lambda: names.control_exchange(PREFIX), "warren.control"),
        (lambda: names.state_queue(PREFIX), "warren.state"),
        (lambda: names.operator_exchange(PREFIX), "warren.operator"),
        (lambda: names.partition_owner(PREFIX, "billing", 3), "warren.ep.billing.p03.owner"),
        (lambda: names.partition_roster(PREFIX, "billing"), "warren.ep.billing.roster"),
        # tenants (docs/architecture.md, "Tenants"): the tenant first in the routing key
        (lambda: names.tenants_exchange(PREFIX), "warren.tenants"),
        (lambda: names.tenant_routing_key("acme", "order.created"), "acme.order.created"),
        (lambda: names.tenant_routing_key("*", "order.*"), "*.order.*"),
        # inbound sources (docs/receiving.md): a queue, its DLQ, and its key on the dead exchange
        (lambda: names.inbound_queue(PREFIX, "stripe"), "warren.in.stripe"),
        (lambda: names.inbound_dlq(PREFIX, "stripe"), "warren.in.stripe.dlq"),
        (lambda: names.inbound_dead_key("stripe"), "in.stripe"),
        # the attempt log (docs/endpoints.md) and live endpoints (docs/architecture.md, "Live apply")
        (lambda: names.attempts_exchange(PREFIX), "warren.attempts"),
        (lambda: names.attempts_queue(PREFIX), "warren.attempts"),
        (lambda: names.attempts_rejected_queue(PREFIX), "warren.attempts.rejected"),
        (lambda: names.endpoints_exchange(PREFIX), "warren.endpoints"),
        (lambda: names.endpoints_stream(PREFIX), "warren.endpoints.log"),
        # health (docs/health.md): outside {prefix}.ep., so that setup never takes them for an endpoint's
        (lambda: names.health_roster(PREFIX, "acme"), "warren.health.acme.roster"),
        (lambda: names.probe_lock(PREFIX, "acme"), "warren.health.acme.probe"),
    ],
)
def test_each_name_has_its_documented_form(build: Callable[[], str], expected: str) -> None:
    assert build() == expected


@pytest.mark.parametrize(
    "build",
    [
        lambda p: names.events_exchange(p),
        lambda p: names.work_queue(p, "acme"),
        lambda p: names.partition_queue(p, "acme", 2),
        lambda p: names.dlq(p, "acme"),
        lambda p: names.delay_queue(p, 4),
    ],
)
def test_names_are_the_prefix_and_a_fixed_suffix(build: Callable[[str], str]) -> None:
    # Given two prefixes, when a name is built for each, then it starts with its prefix and the rest is the same:
    # nothing else (no clock, no randomness, no other input) goes into a name, so setup finds the same objects
    # again, and deployments sharing a vhost never collide
    a, b = build("tenant-a"), build("tenant-b")
    assert a.startswith("tenant-a.") and b.startswith("tenant-b.")
    assert a.removeprefix("tenant-a") == b.removeprefix("tenant-b")


@pytest.mark.parametrize("endpoint", ["acme", "billing", "a", "my-endpoint_2", "x.y", "p01"])
def test_queue_endpoint_round_trips_work_and_partition_queues(endpoint: str) -> None:
    assert names.queue_endpoint(PREFIX, names.work_queue(PREFIX, endpoint)) == endpoint
    for index in (0, 1, 15, 255):
        assert names.queue_endpoint(PREFIX, names.partition_queue(PREFIX, endpoint, index)) == endpoint


@pytest.mark.parametrize(
    "queue",
    [
        "warren.ep.acme.dlq",  # the DLQ is not a work queue
        "warren.delay.l01.q",
        "warren.events",
        "other.ep.acme.q",  # another deployment's prefix
        "warren.ep..q",
        "warren.ep.acme.px",
        "warren.ep.acme.px1",  # p, then something that is not a number, then digits
        "warren.ep.acme.p",
        "warren.ep.acme",
        "warren.ep.acme.roster",  # the partition roster: not a work queue, though its last word sorts after "q"
        "warren.ep.acme.r",
        "warren.ep.acme.p\u00b2",  # SUPERSCRIPT TWO: isdigit() took it for a partition number
        "warren.ep.acme.p\u0663",  # ARABIC-INDIC DIGIT THREE
    ],
)
def test_queue_endpoint_refuses_other_names(queue: str) -> None:
    assert names.queue_endpoint(PREFIX, queue) is None


@pytest.mark.parametrize(
    ("queue", "runtime"),
    [
        (names.partition_owner(PREFIX, "billing", 0), True),
        (names.partition_owner(PREFIX, "billing", 12), True),
        (names.partition_roster(PREFIX, "billing"), True),
        (names.health_roster(PREFIX, "acme"), True),
        (names.probe_lock(PREFIX, "acme"), True),
        (names.partition_queue(PREFIX, "billing", 0), False),
        (names.work_queue(PREFIX, "acme"), False),
        (names.dlq(PREFIX, "acme"), False),
        (names.state_queue(PREFIX), False),
        (names.delay_queue(PREFIX, 2), False),
        ("warren.ep.billing.q.owner", False),
        ("warren.ep..roster", False),
        ("other.ep.billing.roster", False),
        ("warren.ep.billing.p\u00b2.owner", False),
        ("warren.ep.billing.px1.owner", False),
        ("warren.ep.billing.p.owner", False),
        ("warren.ep.billing.p00.ownership", False),  # not ".owner"
        ("warren.ep.billing.p00.z", False),
        ("warren.ep.billing.rosters", False),  # not ".roster"
        ("warren.ep.billing.z", False),
        ("warren.health.acme.rosters", False),
        ("warren.health.acme", False),
    ],
)
def test_runtime_queues_are_told_from_planned_ones(queue: str, runtime: bool) -> None:
    assert names.is_runtime_queue(PREFIX, queue) is runtime
