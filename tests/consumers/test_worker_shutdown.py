"""SIGTERM stops a worker within its grace period whatever state its startup reached, even when RabbitMQ hangs.

Real ``warren worker`` subprocesses; RabbitMQ reached through a TcpProxy that a test stalls (a broker that
takes bytes and never answers) at a chosen point of the worker's startup.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.support.health import wait_until
from tests.support.processes import WorkerProcess, write_config
from tests.support.tcp_proxy import TcpProxy, through
from warren.loop import CLEANUP_SECONDS
from warren.topology.config import WarrenConfig

pytestmark = pytest.mark.timeout(120)

GRACE = 1.0
# The documented bound (docs/deployment.md): the grace period, plus at most CLOSE_BUDGET for closing what no
# longer answers and the event loop's clean-up of leftover tasks (warren/loop.py, CLEANUP_SECONDS).
CLOSE_BUDGET = 3.0 + CLEANUP_SECONDS
# The interpreter's exit (coverage writes its data then) and the signal's delivery, on a loaded machine.
PROCESS_SLACK = 3.0


@pytest.fixture
async def proxy(amqp_url: str) -> AsyncIterator[TcpProxy]:
    async with TcpProxy(urlsplit(amqp_url).port or 5672) as p:
        yield p


@pytest.fixture
async def worker_through_proxy(
    endpoint_config: Callable[..., Any], proxy: TcpProxy, tmp_path: Path
) -> AsyncIterator[Callable[[], Any]]:
    """Start ``warren worker`` reaching RabbitMQ through the proxy; every one started is killed at the end."""
    config: WarrenConfig = await endpoint_config(
        [{"name": "orders"}, {"name": "ledger", "ordering": "key", "partitions": 2}],
        delivery={"grace_period": f"{GRACE:g}s"},
    )
    broker = config.broker.model_copy(update={"url": through(config.broker.url, proxy.port)})
    path = write_config(tmp_path, config.model_copy(update={"broker": broker}))
    started: list[WorkerProcess] = []

    async def start() -> WorkerProcess:
        worker = await WorkerProcess(path).start()
        started.append(worker)
        return worker

    yield start
    for worker in started:
        await worker.cleanup()


async def stop_and_time(worker: WorkerProcess) -> float:
    """SIGTERM, and the time until the process ended (fails with the worker's log if it takes far too long)."""
    started = time.monotonic()
    try:
        await worker.terminate(timeout=GRACE + CLOSE_BUDGET + PROCESS_SLACK + 10)
    except TimeoutError:
        raise AssertionError(f"the worker ignored SIGTERM:\n{worker.log_text()[-3000:]}") from None
    return time.monotonic() - started


async def test_sigterm_while_the_broker_hangs_the_first_handshake(
    worker_through_proxy: Callable[[], Any], proxy: TcpProxy
) -> None:
    # Given a broker that accepts the TCP connection but never answers
    proxy.stall()
    worker = await worker_through_proxy()
    await wait_until(lambda: proxy.accepted >= 1, 15, "the worker's first connection")
    await asyncio.sleep(0.2)  # into the handshake
    # When the worker is told to stop while it waits for the handshake
    took = await stop_and_time(worker)
    # Then it stops within the bound, without waiting for its connect timeout
    assert took < GRACE + CLOSE_BUDGET + PROCESS_SLACK, worker.log_text()[-4000:]
    assert worker.process is not None and worker.process.returncode == 0, worker.log_text()[-4000:]


@pytest.mark.parametrize("connections", [1, 2, 3])
async def test_sigterm_while_the_broker_hangs_midway_through_startup(
    worker_through_proxy: Callable[[], Any], proxy: TcpProxy, connections: int
) -> None:
    # Given a broker that stops answering once the worker has opened its n-th connection (1: the delivery
    # connection, endpoints opening; 2: the health connection, reading the state stream; 3: partition claims)
    worker = await worker_through_proxy()
    await wait_until(lambda: proxy.accepted >= connections, 15, f"connection {connections}")
    proxy.stall()
    await asyncio.sleep(0.2)
    # When the worker is told to stop
    took = await stop_and_time(worker)
    # Then it stops within the bound
    assert took < GRACE + CLOSE_BUDGET + PROCESS_SLACK, worker.log_text()[-4000:]
    assert "worker consuming" not in worker.log_text() or connections == 3


async def test_sigterm_when_the_broker_hangs_after_startup(
    worker_through_proxy: Callable[[], Any], proxy: TcpProxy
) -> None:
    # Given a worker that started, then a broker that stops answering
    worker = await worker_through_proxy()
    await worker.wait_ready()
    proxy.stall()
    # When the worker is told to stop (cancelling consumers and closing channels get no answer)
    took = await stop_and_time(worker)
    # Then it stops within the bound
    assert took < GRACE + CLOSE_BUDGET + PROCESS_SLACK, worker.log_text()[-4000:]
    assert worker.process is not None and worker.process.returncode == 0, worker.log_text()[-4000:]


async def test_sigterm_after_a_normal_startup_stops_promptly(worker_through_proxy: Callable[[], Any]) -> None:
    # Given a worker that started against a healthy broker, with nothing in flight
    worker = await worker_through_proxy()
    await worker.wait_ready()
    # When it is told to stop
    took = await stop_and_time(worker)
    # Then it stops well within the grace period's bound, cleanly
    assert took < GRACE + PROCESS_SLACK, worker.log_text()[-4000:]
    assert worker.process is not None and worker.process.returncode == 0
    assert "worker stopped" in worker.log_text()
