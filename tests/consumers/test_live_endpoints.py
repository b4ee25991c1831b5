"""Live endpoints, worker side, with real worker processes: a worker killed during an apply loses nothing (the
others serve the endpoint), and a worker started afterwards learns the endpoint from the stream alone."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import TEST_SECRET
from tests.support.processes import WorkerProcess, write_config
from tests.support.receiver import Receiver
from tests.support.topology import declare
from warren.broker.amqp.connection import connect
from warren.broker.events import Event
from warren.broker.live_apply import apply_endpoint
from warren.broker.publisher import Publisher
from warren.consumers.worker import Worker
from warren.topology.config import Endpoint, WarrenConfig


async def publish(config: WarrenConfig, ids: list[str], tenant: str) -> None:
    connection = await connect(config.broker.url)
    try:
        publisher = await Publisher.open(connection, config.broker.prefix)
        report = await publisher.publish_many(Event(type="t", data={}, id=i, tenant=tenant) for i in ids)
        assert not report.failed
        assert publisher.unrouted_tenant_events == 0  # the endpoint was there for every one
    finally:
        await connection.close()


@pytest.mark.timeout(60)
async def test_a_worker_killed_during_an_apply_loses_nothing(
    make_config: Callable[..., WarrenConfig], tmp_path: Path
) -> None:
    async with Receiver() as receiver:
        # Given a file with no endpoint, a worker process and an in-process worker, both following live endpoints
        config = make_config([], delivery={"grace_period": "1s"})
        await declare(config)
        path = write_config(tmp_path, config)
        doomed = await WorkerProcess(path).start()
        try:
            await doomed.wait_ready()
            async with Worker(config, name="survivor"):
                endpoint = Endpoint.model_validate(
                    {
                        "name": "live",
                        "url": f"{receiver.url}/live",
                        "secret": TEST_SECRET,
                        "events": ["#"],
                        "tenant": "k",
                    }
                )
                # When the process is killed while the endpoint is being applied
                applying = asyncio.create_task(apply_endpoint(config, endpoint))
                doomed.kill()
                await applying
                ids = [f"e{n}" for n in range(50)]
                await publish(config, ids, "k")
                # Then the surviving worker delivers every event
                await receiver.wait_for(lambda r: set(ids) <= r.ok_ids(), timeout=10)
        finally:
            await doomed.cleanup()
        # And a worker started later, with the API and its store nowhere, learns the endpoint from the stream
        late = await WorkerProcess(path).start()
        try:
            await late.wait_ready()
            more = [f"late{n}" for n in range(10)]
            await publish(config, more, "k")
            await receiver.wait_for(lambda r: set(more) <= r.ok_ids(), timeout=10)
        finally:
            await late.cleanup()
