"""Definitions JSON: the shape `rabbitmqctl import_definitions` reads, and a real import through the
management API creates exactly the planned objects."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import pytest

from warren.broker.management import ManagementClient
from warren.topology.config import WarrenConfig
from warren.topology.definitions import definitions
from warren.topology.planner import plan_topology

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
ENDPOINTS: list[dict[str, Any]] = [
    {"name": "acme", "url": "http://127.0.0.1:9/acme", "events": ["message.*"]},
    {
        "name": "billing",
        "url": "http://127.0.0.1:9/billing",
        "events": ["order.paid"],
        "ordering": "key",
        "partitions": 3,
    },
]


def test_the_document_has_the_definitions_shape() -> None:
    # Given a plan
    config = WarrenConfig(
        delivery={"allow_private_networks": True}, endpoints=[{**e, "secret": SECRET} for e in ENDPOINTS]
    )
    plan = plan_topology(config)
    # When it is exported for vhost "prod"
    document = definitions(plan, "prod")
    # Then it is plain JSON with the keys RabbitMQ's importers read, one entry per planned object
    assert json.loads(json.dumps(document)) == document
    assert document["rabbit_version"] == document["rabbitmq_version"]
    assert document["vhosts"] == [{"name": "prod"}]
    assert len(document["exchanges"]) == len(plan.exchanges)
    assert len(document["queues"]) == len(plan.queues)
    assert len(document["bindings"]) == len(plan.bindings)
    exchange = next(e for e in document["exchanges"] if e["name"] == "warren.ep.billing")
    assert exchange == {
        "name": "warren.ep.billing",
        "vhost": "prod",
        "type": "x-consistent-hash",
        "durable": True,
        "auto_delete": False,
        "internal": False,
        "arguments": {"hash-header": "warren-key"},
    }
    queue = next(q for q in document["queues"] if q["name"] == "warren.ep.billing.p00")
    assert queue == {
        "name": "warren.ep.billing.p00",
        "vhost": "prod",
        "durable": True,
        "auto_delete": False,
        "arguments": {
            "x-queue-type": "quorum",
            "x-single-active-consumer": True,
            "x-delivery-limit": 2**31 - 1,
            "x-dead-letter-exchange": "warren.dead",
            "x-dead-letter-routing-key": "billing",
            "x-dead-letter-strategy": "at-least-once",
            "x-overflow": "reject-publish",
        },
    }
    binding = next(b for b in document["bindings"] if b["destination"] == "warren.ep.acme")
    assert binding == {
        "source": "warren.events",
        "vhost": "prod",
        "destination": "warren.ep.acme",
        "destination_type": "exchange",
        "routing_key": "message.*",
        "arguments": {},
    }
    # No secret, no credentials: the configuration's private parts never reach the export
    assert SECRET.removeprefix("whsec_") not in json.dumps(document)
    assert "guest" not in json.dumps(document)


@pytest.mark.timeout(30)
async def test_the_management_api_imports_the_export(
    management: ManagementClient, make_config: Callable[..., WarrenConfig], prefix: str
) -> None:
    # Given this test's plan (its own prefix) in the run's test vhost
    config = make_config(ENDPOINTS, retry={"base": "100ms", "cap": "1s"})
    plan = plan_topology(config)
    document = definitions(plan, management.vhost)
    try:
        # When the exported JSON is POSTed to /api/definitions/{vhost}, twice (an import is idempotent)
        await management.import_definitions(json.loads(json.dumps(document)))
        await management.import_definitions(document)
        # Then every planned exchange, queue and binding is there, with the planned type and arguments
        exchanges = {e["name"]: e for e in await management.exchanges() if e["name"].startswith(prefix + ".")}
        assert {name: (e["type"], e["arguments"], e["durable"]) for name, e in exchanges.items()} == {
            e.name: (e.type, dict(e.arguments), True) for e in plan.exchanges
        }
        queues = {q["name"]: q for q in await management.queues() if q["name"].startswith(prefix + ".")}
        assert {name: q["arguments"] for name, q in queues.items()} == {q.name: dict(q.arguments) for q in plan.queues}
        assert queues[f"{prefix}.ep.billing.p00"]["type"] == "quorum"
        bindings = {
            (b["source"], b["destination"], b["destination_type"], b["routing_key"])
            for b in await management.bindings()
            if b["source"].startswith(prefix + ".")
        }
        assert bindings == {(b.source, b.destination, b.destination_type, b.routing_key) for b in plan.bindings}
    finally:
        # Leave the shared test vhost as we found it (it is deleted at the end of the run anyway)
        vhost = quote(management.vhost, safe="")
        for queue in plan.queues:
            await management.request("DELETE", f"queues/{vhost}/{quote(queue.name, safe='')}", allow_404=True)
        for exchange in plan.exchanges:
            await management.request("DELETE", f"exchanges/{vhost}/{quote(exchange.name, safe='')}", allow_404=True)
