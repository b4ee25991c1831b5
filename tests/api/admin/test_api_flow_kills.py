"""Endpoints as live data, end to end (3/3): `warren api` and a worker killed during an apply.

Events flow the whole time (tests/support/event_flow.py remembers when each publish started and whether RabbitMQ
routed it), so every test can say exactly which events an endpoint had to receive: those of its tenant and its
subscriptions published after the call that created it returned.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from tests.api.admin.conftest import ADMIN_TOKEN
from tests.api.admin.flow_support import (
    deploy,
    flow_config,
    free_port,
    owed,
    receivers,
    spec,
)
from tests.support.event_flow import TenantFlow
from tests.support.processes import ApiProcess, WorkerProcess, write_config
from tests.support.receiver import Receiver
from tests.support.store import store_postgres, store_url
from tests.support.topology import declare
from warren.broker.amqp.connection import connect
from warren.broker.amqp.probe import QueueProbe
from warren.topology import names
from warren.topology.config import WarrenConfig

__all__ = ["deploy", "receivers", "store_postgres", "store_url"]


async def appears(config: WarrenConfig, name: str, what: str, call: asyncio.Task[int]) -> None:
    """Until the endpoint's exchange (``what`` "exchange") or work queue ("queue") exists, polled as fast as
    passive declares answer, or the call ended."""
    prefix = config.broker.prefix
    connection = await connect(config.broker.urls)
    try:
        probe = QueueProbe(connection)
        deadline = time.monotonic() + 30
        while not call.done() and time.monotonic() < deadline:
            if what == "exchange" and await probe.exchange_exists(names.endpoint_exchange(prefix, name)):
                break
            if what == "queue" and await probe.depth(names.work_queue(prefix, name)) is not None:
                break
        await probe.close()
    finally:
        await connection.close()


async def objects_of(config: WarrenConfig, name: str) -> dict[str, bool]:
    """Which of an endpoint's objects exist now: its exchange, its work queue, its DLQ."""
    prefix = config.broker.prefix
    connection = await connect(config.broker.urls)
    try:
        probe = QueueProbe(connection)
        found = {
            "exchange": await probe.exchange_exists(names.endpoint_exchange(prefix, name)),
            "queue": await probe.depth(names.work_queue(prefix, name)) is not None,
            "dlq": await probe.depth(names.dlq(prefix, name)) is not None,
        }
        await probe.close()
        return found
    finally:
        await connection.close()


@pytest.mark.timeout(360)  # four restarts of `warren api` and a worker: seconds each on a loaded machine
async def test_killing_a_worker_and_the_api_during_an_apply_converges_and_loses_nothing(
    make_config: Callable[..., WarrenConfig],
    store_url: str,
    receivers: Callable[[], Awaitable[Receiver]],
    tmp_path: Path,
) -> None:
    # Given `warren api` and two workers as processes, and events flowing for the tenants of the endpoints to come
    config = flow_config(make_config, store_url)
    await declare(config)
    path = write_config(tmp_path, config)
    receiver = await receivers()
    # When to kill, in the create call: as it is sent, once its exchange is declared (its queues maybe not, the
    # workers not told), once its queue is declared (the announce and the store write maybe not done)
    kills = ["sent", "exchange", "queue"]
    tenants = [f"k{i}" for i in range(len(kills))]
    api = await ApiProcess(path, free_port()).start()
    workers = [await WorkerProcess(path).start() for _ in range(2)]
    seen: list[str] = []
    converged: dict[str, float] = {}
    try:
        await api.wait_ready()
        for worker in workers:
            await worker.wait_ready(60)
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session,
            TenantFlow(config, tenants, interval=0.02) as flow,
        ):
            for index, (tenant, moment) in enumerate(zip(tenants, kills, strict=True)):
                name = f"killed-{index}"
                body = spec(receiver, name, tenant)

                async def create(api: ApiProcess = api, body: dict[str, Any] = body) -> int:
                    async with session.post(
                        api.url + "/v1/endpoints",
                        data=orjson.dumps(body),
                        headers={"Authorization": f"Bearer {ADMIN_TOKEN}", "Content-Type": "application/json"},
                    ) as response:
                        await response.read()
                        return response.status

                # When the API and a worker are killed (SIGKILL) at that moment of a create call
                call = asyncio.create_task(create())
                if moment != "sent":
                    await appears(config, name, moment, call)
                api.kill()
                workers[0].kill()
                try:
                    first = await call
                except aiohttp.ClientError:
                    first = 0  # the API died with the call
                # Then what RabbitMQ holds of the endpoint is all of it or none of its queues (or re-appliable)
                seen.append(f"at {moment}: answer {first or 'none'}, objects {await objects_of(config, name)}")
                # And once both are back, the same call converges: created now, or created already
                await workers[0].cleanup()
                workers[0] = await WorkerProcess(path).start()
                await api.cleanup()
                api = await ApiProcess(path, api.port).start()
                await api.wait_ready()
                await workers[0].wait_ready(60)
                again = await create(api)
                # (409 endpoint_exists: the store has it, and it is stored only once applied)
                assert again in (201, 409) and (first != 201 or again == 409), (first, again)
                converged[name] = time.monotonic()
                assert all((await objects_of(config, name)).values())
                async with session.get(
                    f"{api.url}/v1/endpoints/{name}", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
                ) as response:
                    assert response.status == 200
            await flow.rounds_after(10)
            await flow.stop()
            # Then no event was lost: every event RabbitMQ routed to an endpoint was delivered to it (the killed
            # worker's unacknowledged ones by another), among them every one published after its call converged
            must = {s.id for s in flow.sent if s.routed}
            for index, tenant in enumerate(tenants):
                after = owed(flow.sent, tenant, ["#"], converged[f"killed-{index}"])
                assert after and after <= must
            await receiver.wait_for(lambda r: must <= r.ok_ids(), timeout=60)
    finally:
        await api.cleanup()
        for worker in workers:
            await worker.cleanup()
    print("\nkilled during the create call:\n  " + "\n  ".join(seen))
