"""Tenants on a real broker: each tenant's receivers get exactly that tenant's events; platform endpoints get
tenant-less events, and every tenant's only with ``all_tenants``; an event for a tenant nobody serves is
accepted and counted, while a tenant-less event nobody takes is still refused as unroutable."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.support.receiver import Receiver
from tests.support.topology import declare
from warren.broker.amqp.connection import connect
from warren.broker.events import Event
from warren.broker.publisher import TENANT_EVENTS_UNROUTED, Publisher
from warren.consumers.worker import Worker
from warren.core.errors import UnroutableError
from warren.topology.config import WarrenConfig

TENANTS = ("t0", "t1", "t2", "t3")


def _unrouted(tenant: str) -> float:
    return TENANT_EVENTS_UNROUTED.labels(tenant)._value.get()


@pytest.mark.timeout(30)
async def test_each_receiver_gets_exactly_its_tenants_events(make_config: Callable[..., WarrenConfig]) -> None:
    async with Receiver() as receiver:
        # Given two endpoints per tenant, a platform endpoint, and a platform endpoint for every tenant
        endpoints: list[dict[str, Any]] = [
            {"name": f"{t}-{kind}", "tenant": t, "events": [pattern]}
            for t in TENANTS
            for kind, pattern in (("all", "#"), ("orders", "order.*"))
        ]
        types = ["order.*", "user.*"]
        endpoints += [{"name": "platform", "events": types}, {"name": "audit", "events": types, "all_tenants": True}]
        config = make_config([{"url": f"{receiver.url}/{e['name']}", **e} for e in endpoints])
        await declare(config)
        events = [
            Event(type=kind, data={"n": n}, tenant=tenant, id=f"{tenant or 'none'}-{kind}-{n}")
            for tenant in (*TENANTS, None)
            for kind in ("order.paid", "user.created")
            for n in range(3)
        ]
        before = _unrouted("nobody")
        async with Worker(config, spread_partitions=False):
            connection = await connect(config.broker.url)
            try:
                publisher = await Publisher.open(connection, config.broker.prefix)
                report = await publisher.publish_many(events)
                # When an event names a tenant nobody serves: accepted, counted, not an error
                await publisher.publish(Event(type="invoice.sent", data={}, tenant="nobody"))
                with pytest.raises(UnroutableError):  # tenant-less and unsubscribed: refused, as before tenants
                    await publisher.publish(Event(type="nothing.subscribes", data={}))
            finally:
                await connection.close()
            assert not report.failed
            expected: dict[str, set[str]] = {f"{t}-all": {e.id for e in events if e.tenant == t} for t in TENANTS} | {
                f"{t}-orders": {e.id for e in events if e.tenant == t and e.type == "order.paid"} for t in TENANTS
            }
            expected["platform"] = {e.id for e in events if e.tenant is None}
            expected["audit"] = {e.id for e in events}
            total = sum(len(ids) for ids in expected.values())
            await receiver.wait_for(lambda r: len(r.received) >= total, timeout=15)
        # Then each receiver got exactly its events, each once, with the tenant in the envelope
        got: dict[str, list[str]] = {}
        for request in receiver.received:
            got.setdefault(request.path.rsplit("/", 1)[-1], []).append(request.event_id)
            assert request.json.get("tenant") == next(e.tenant for e in events if e.id == request.event_id)
        assert {path: sorted(ids) for path, ids in got.items()} == {p: sorted(ids) for p, ids in expected.items()}
        assert _unrouted("nobody") == before + 1
