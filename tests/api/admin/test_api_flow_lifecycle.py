"""Endpoints as live data, end to end: a deleted endpoint leaves nothing that a later endpoint of its name inherits.

The held-out check this answers: tenant A's endpoint dead-lettered 3 events, it was force-deleted, the name was
created again for tenant B, and `recover` delivered A's 3 events to B's URL. Each test here runs the API with its
real live apply and a real worker process, and looks from both tenants' side.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable

import pytest
from typer.testing import CliRunner

from tests.api.admin.flow_support import Deployment, deploy, queue_depth, receivers, spec
from tests.conftest import TEST_SECRET
from tests.support.processes import WorkerProcess, running_workers
from tests.support.receiver import Receiver, always
from tests.support.store import store_postgres, store_url
from warren.broker.amqp.connection import connect
from warren.broker.events import Event
from warren.broker.live_apply import apply_endpoint
from warren.broker.publisher import Publisher
from warren.cli import app
from warren.topology import names
from warren.topology.config import Endpoint, WarrenConfig

__all__ = ["deploy", "receivers", "store_postgres", "store_url"]

# The store's backend does not matter to what is tested here: SQLite only, to keep the suite's time.
pytestmark = [pytest.mark.timeout(90), pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)]


async def publish(config: WarrenConfig, tenant: str, count: int) -> list[str]:
    connection = await connect(config.broker.urls)
    try:
        publisher = await Publisher.open(connection, config.broker.prefix)
        return [await publisher.publish(Event(type="order.paid", data={"n": n}, tenant=tenant)) for n in range(count)]
    finally:
        await connection.close()


async def depth_reaches(config: WarrenConfig, queue: str, wanted: int, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while (await queue_depth(config, queue) or 0) < wanted:
        assert time.monotonic() < deadline, f"{queue} never held {wanted}"
        await asyncio.sleep(0.05)


async def logged(worker: WorkerProcess, text: str, times: int, timeout: float = 15) -> None:
    """Until the worker's log holds ``text`` ``times`` times (or fail with the log's end)."""
    deadline = time.monotonic() + timeout
    while worker.log_text().count(text) < times:
        assert time.monotonic() < deadline, worker.log_text()[-3000:]
        await asyncio.sleep(0.05)


async def cli(*args: str) -> str:
    result = await asyncio.to_thread(CliRunner().invoke, app, list(args))
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


async def test_a_deleted_endpoints_dead_letters_never_reach_the_next_endpoint_of_its_name(
    deploy: Callable[..., Awaitable[Deployment]], receivers: Callable[[], Awaitable[Receiver]]
) -> None:
    # Given tenant A's endpoint, which rejected 3 events (400: dead-lettered at once)
    deployment = await deploy()
    config, prefix = deployment.config, deployment.config.broker.prefix
    receiver_a, receiver_b = await receivers(), await receivers()
    receiver_a.behaviour = always(400)
    first = await deployment.call("POST", "/v1/endpoints", spec(receiver_a, "shared", "tenant-a"))
    assert first.status == 201, first.body
    async with running_workers(deployment.path, 1):
        ids_a = await publish(config, "tenant-a", 3)
        await depth_reaches(config, names.dlq(prefix, "shared"), 3)
        # (`warren dlq show` serves a live endpoint: the letter is A's event)
        shown = await cli("dlq", "show", "shared", ids_a[0], "--config", str(deployment.path), "--json")
        assert json.loads(shown)["envelope"]["tenant"] == "tenant-a"
        # When it is force-deleted: the answer counts the 3 dead letters it discarded, and its DLQ is gone
        deleted = await deployment.call("DELETE", "/v1/endpoints/shared?force=true")
        assert deleted.status == 204, deleted.body
        assert deleted.headers["Warren-Discarded-Dead-Letters"] == "3"
        assert await queue_depth(config, names.dlq(prefix, "shared")) is None
        # And the name is created again, for tenant B
        second = await deployment.call("POST", "/v1/endpoints", spec(receiver_b, "shared", "tenant-b"))
        assert second.status == 201, second.body
        # Then tenant B's view holds nothing of A's: its DLQ lists nothing (`warren dlq` serves a live endpoint)...
        listed = await cli("dlq", "list", "shared", "--config", str(deployment.path), "--json")
        assert json.loads(listed) == []
        # ...and recovering everything since an hour ago sends nothing
        recovered = await deployment.call("POST", "/v1/endpoints/shared/recover?since=1h")
        assert recovered.status == 200 and recovered.body["recovered"] == 0, recovered.body
        # And B gets its own events, and never one of A's
        ids_b = await publish(config, "tenant-b", 2)
        await receiver_b.wait_for(lambda r: set(ids_b) <= r.ok_ids(), timeout=15)
    assert not receiver_b.ok_ids() & set(ids_a)
    assert {r.event_id for r in receiver_b.received} == set(ids_b)
    # And tenant A's view: the endpoint of its own is gone (B's answers under the name, for B's tenant)
    assert (await deployment.call("GET", "/v1/endpoints/shared")).body["tenant"] == "tenant-b"


async def test_retries_of_a_deleted_endpoint_coming_due_never_reach_another_tenant_reusing_its_name(
    deploy: Callable[..., Awaitable[Deployment]], receivers: Callable[[], Awaitable[Receiver]]
) -> None:
    # Given tenant A's endpoint answering 503, its events' retries waiting 3 s in the delay chain
    deployment = await deploy(retry={"schedule": ["3s"], "jitter": "none", "max_attempts": 5})
    config = deployment.config
    receiver_a, receiver_b = await receivers(), await receivers()
    receiver_a.behaviour = always(503)
    created = await deployment.call("POST", "/v1/endpoints", spec(receiver_a, "reused", "tenant-a"))
    assert created.status == 201, created.body
    worker = WorkerProcess(deployment.path)
    try:
        await worker.start()
        await worker.wait_ready()
        ids_a = await publish(config, "tenant-a", 3)
        await receiver_a.wait_for(lambda r: {x.event_id for x in r.received} >= set(ids_a), timeout=15)
        attempted = time.monotonic()
        # When it is force-deleted while they wait, and the name is created again for tenant B at once
        deleted = await deployment.call("DELETE", "/v1/endpoints/reused?force=true")
        assert deleted.status == 204, deleted.body
        again = await deployment.call("POST", "/v1/endpoints", spec(receiver_b, "reused", "tenant-b"))
        assert again.status == 201, again.body
        assert time.monotonic() - attempted < 3, "the retries came due before the name was reused: no test"
        # Then the retries come due into B's queue, and B's worker discards each one: they are tenant A's events
        await logged(worker, "an event of tenant 'tenant-a'", 3)
        # And B receives its own events, never one of A's
        ids_b = await publish(config, "tenant-b", 2)
        await receiver_b.wait_for(lambda r: set(ids_b) <= r.ok_ids(), timeout=15)
    finally:
        await worker.cleanup()
    assert {r.event_id for r in receiver_b.received} == set(ids_b)
    assert (await queue_depth(config, names.dlq(config.broker.prefix, "reused"))) == 0


async def test_an_earlier_endpoints_leftover_queue_never_delivers_another_tenants_events(
    deploy: Callable[..., Awaitable[Deployment]], receivers: Callable[[], Awaitable[Receiver]]
) -> None:
    # Given a queue left under a name by an earlier endpoint of tenant "old" (as `warren setup --prune` leaves a
    # file endpoint's queue that still holds events), holding 2 of its events, and no endpoint of that name stored
    deployment = await deploy()
    config = deployment.config
    receiver = await receivers()
    leftover = Endpoint.model_validate(
        {"name": "left", "url": f"{receiver.url}/left", "secret": TEST_SECRET, "events": ["#"], "tenant": "old"}
    )
    await apply_endpoint(config.model_copy(update={"endpoints": (leftover,)}), leftover)
    ids_old = await publish(config, "old", 2)
    await depth_reaches(config, names.work_queue(config.broker.prefix, "left"), 2)
    # When an endpoint of that name is created for another tenant, and a worker serves it
    created = await deployment.call("POST", "/v1/endpoints", spec(receiver, "left", "new"))
    assert created.status == 201, created.body
    worker = WorkerProcess(deployment.path)
    try:
        await worker.start()
        await worker.wait_ready()
        # Then the earlier tenant's 2 events are discarded, never delivered, and its own events are
        await logged(worker, "an event of tenant 'old'", 2)
        ids_new = await publish(config, "new", 2)
        await receiver.wait_for(lambda r: set(ids_new) <= r.ok_ids(), timeout=15)
        assert await worker.terminate() == 0  # a graceful stop: every ack is sent before it ends
    finally:
        await worker.cleanup()
    assert {r.event_id for r in receiver.received} == set(ids_new) and not set(ids_old) & receiver.ok_ids()
    assert await queue_depth(config, names.work_queue(config.broker.prefix, "left")) == 0
