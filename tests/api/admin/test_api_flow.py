"""Endpoints as live data, end to end (1/3): 200 endpoints of 20 tenants created while events flow; apply latency.

Events flow the whole time (tests/support/event_flow.py remembers when each publish started and whether RabbitMQ
routed it), so every test can say exactly which events an endpoint had to receive: those of its tenant and its
subscriptions published after the call that created it returned.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable

import pytest

from tests.api.admin.flow_support import (
    APPLY_LATENCY_LIMIT,
    APPLY_LATENCY_WORST,
    CREATES_AT_ONCE,
    PER_TENANT,
    Deployment,
    allowed,
    backend,
    deploy,
    ids_at,
    ms,
    owed,
    receivers,
    spec,
)
from tests.support.event_flow import TenantFlow
from tests.support.processes import running_workers
from tests.support.receiver import Receiver
from tests.support.store import store_postgres, store_url
from warren.broker.capacity import capacity_problems, quorum_room, read_nodes
from warren.broker.management import ManagementClient

__all__ = ["deploy", "receivers", "store_postgres", "store_url"]


@pytest.mark.alone_on_broker  # hundreds of quorum queues
@pytest.mark.timeout(600)  # 300 s seen for 200 endpoints under a load average of 24 on 2 cores
async def test_endpoints_created_through_the_api_while_events_flow_get_exactly_their_tenants_events(
    deploy: Callable[..., Awaitable[Deployment]],
    receivers: Callable[[], Awaitable[Receiver]],
    store_url: str,
    management: ManagementClient,
) -> None:
    """20 tenants, each with endpoints created through the API while every tenant publishes: 200 endpoints on
    PostgreSQL, 60 on SQLite (PER_TENANT: the same test, fewer endpoints, to keep the suite within its budget);
    fewer on a 3.10 node whose open-files limit holds fewer quorum queues (100 on PostgreSQL at Debian's 1,024).

    Endpoint ``e0`` of a tenant takes every event of the tenant, ``eN`` only ``flow.eN``: every tenant publishes
    the same types, so an event reaching another tenant's endpoint would be seen."""
    tenants = [f"t{i:02d}" for i in range(20)]
    # A 3.10 node with Debian's default 1,024 open files holds about 300 quorum queues; past that its AMQP
    # listener stops answering on every vhost until queues are deleted. Live apply refuses what does not fit, so
    # the test plans no more endpoints than the node holds: 2 quorum queues each, 20 kept.
    nodes = await read_nodes(management)
    room = quorum_room(nodes)
    per_tenant = PER_TENANT[backend(store_url)]
    if room is not None:
        per_tenant = min(per_tenant, (room - 20) // (2 * len(tenants)))
    too_small = capacity_problems(nodes, 2 * 2 * len(tenants) + 20)  # the least that still tests something
    assert not too_small, "the broker under test is too small for this test: " + "; ".join(too_small)
    types = [f"flow.e{j}" for j in range(per_tenant)]
    deployment = await deploy()
    inbox = {tenant: await receivers() for tenant in tenants}
    subscriptions = {f"{t}-e{j}": (t, ["#"] if j == 0 else [types[j]]) for j in range(per_tenant) for t in tenants}
    created: dict[str, float] = {}
    calls: list[float] = []
    gate = asyncio.Semaphore(CREATES_AT_ONCE)

    async def create(name: str) -> None:
        tenant, events = subscriptions[name]
        async with gate:
            started = time.monotonic()
            reply = await deployment.call("POST", "/v1/endpoints", spec(inbox[tenant], name, tenant, events))
            created[name] = time.monotonic()
        assert reply.status == 201, reply.body
        calls.append(created[name] - started)

    # Given two workers that know no endpoint, and every tenant publishing (nobody serves them yet)
    async with (
        running_workers(deployment.path, 2),
        TenantFlow(deployment.config, tenants, types, interval=0.1) as flow,
    ):
        # When the endpoints are created through the API, a few calls at a time, tenants interleaved
        began = time.monotonic()
        await asyncio.gather(*(create(name) for name in subscriptions))
        took = time.monotonic() - began
        # (and events keep flowing until every type was published for every tenant after the last create)
        await flow.rounds_after(len(types) + 1, timeout=60)
        await flow.stop()
        must = {name: owed(flow.sent, t, ev, created[name]) for name, (t, ev) in subscriptions.items()}

        def all_arrived(_: Receiver) -> bool:
            return all(must[n] <= set(ids_at(inbox[t], n)) for n, (t, _ev) in subscriptions.items())

        await inbox[tenants[0]].wait_for(all_arrived, timeout=120)
    print(
        f"\n{len(subscriptions)} endpoints created through the API ({backend(store_url)}, {CREATES_AT_ONCE} calls at "
        f"a time) in {took:.1f} s; create call: {ms(calls)}; {len(flow.sent)} events published"
    )
    # Then every endpoint got every event it was owed, exactly once, and nothing of another tenant or type
    for name, (tenant, events) in subscriptions.items():
        got = ids_at(inbox[tenant], name)
        assert len(got) == len(set(got)), f"{name}: duplicates"
        assert set(got) <= allowed(flow.sent, tenant, events), f"{name}: events it does not subscribe to"
        assert must[name] <= set(got), f"{name}: {len(must[name] - set(got))} owed events missing"
        assert must[name], f"{name}: no event was published for it after its create: the test proves nothing"
    # And each tenant's receiver was called for its own endpoints only
    for tenant, receiver in inbox.items():
        assert {r.path.rsplit("/", 1)[-1].split("-e")[0] for r in receiver.received} == {tenant}


@pytest.mark.timeout(150)
async def test_apply_latency_from_the_api_call_to_the_first_delivery(
    deploy: Callable[..., Awaitable[Deployment]],
    receivers: Callable[[], Awaitable[Receiver]],
    store_url: str,
) -> None:
    # Given two worker processes, and 20 tenants publishing every 20 ms with no endpoint yet
    deployment = await deploy()
    receiver = await receivers()
    tenants = [f"lat{i:02d}" for i in range(20)]
    latencies, calls, after_reply = [], [], []
    async with running_workers(deployment.path, 2), TenantFlow(deployment.config, tenants, interval=0.02):
        for tenant in tenants:
            # When an endpoint for the tenant is created through the API
            started = time.monotonic()
            reply = await deployment.call("POST", "/v1/endpoints", spec(receiver, f"ep-{tenant}", tenant))
            calls.append(time.monotonic() - started)
            assert reply.status == 201, reply.body
            await receiver.wait_for(lambda r, t=tenant: bool(ids_at(r, f"ep-{t}")), timeout=10)
            first = next(r.at for r in receiver.received if r.path.endswith(f"/ep-{tenant}"))
            latencies.append(first - started)
            after_reply.append(first - started - calls[-1])
    # Then the first event reaches it within a second of the call (the median), and the worst within the bound of
    # the 201: the call itself is the API's and the store's, and on a loaded machine one call took 6.7 s
    print(
        f"\napply latency, API call -> first delivery, {len(latencies)} creates ({backend(store_url)}): "
        f"{ms(latencies)}; the create call itself: {ms(calls)}; its 201 -> first delivery: {ms(after_reply)}"
    )
    assert statistics.median(latencies) < APPLY_LATENCY_LIMIT, latencies
    assert max(after_reply) < APPLY_LATENCY_WORST, (after_reply, calls)
