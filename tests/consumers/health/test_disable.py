"""Auto-disable: 410 Gone, or a circuit open longer than ``disable_after``. The state is kept in RabbitMQ:
it survives a worker restart and a RabbitMQ application restart, and ``warren endpoint enable`` resumes."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.health import dlq_count, operator_inbox, settled_count, wait_until
from tests.support.processes import write_config
from tests.support.rabbit import rabbitmqctl, rabbitmqctl_command
from tests.support.receiver import Receiver, always
from warren.broker.endpoint_state.admin import change_admin, open_connection
from warren.broker.endpoint_state.records import DISABLED, OPEN
from warren.broker.events import Event
from warren.consumers.worker import Worker
from warren.topology import names
from warren.topology.config import WarrenConfig

pytestmark = pytest.mark.timeout(120)


async def warren(*args: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "warren", *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await asyncio.wait_for(process.communicate(), 30)
    return process.returncode or 0, out.decode()


@pytest.mark.restarts_broker
@pytest.mark.skipif(rabbitmqctl_command() is None, reason="needs rabbitmqctl for the broker under test")
async def test_410_disables_across_worker_and_rabbitmq_restarts_until_enabled(
    endpoint_config, receiver: Receiver, publish, tmp_path: Path
) -> None:
    # Given an endpoint that answers 410 Gone, and 5 events for it
    receiver.behaviour = always(410)
    config = await endpoint_config([{"name": "gone"}])
    work_queue = names.work_queue(config.broker.prefix, "gone")
    events = [Event(type="x.y", data={"i": i}) for i in range(5)]
    async with operator_inbox(config) as operator:
        async with Worker(config):
            await publish(config, events)
            # When its first request is answered 410, then it is disabled fleet-wide, and the operator told
            disabled = await operator.wait_for("endpoint.disabled", "gone")
        assert "410" in disabled["data"]["reason"]
        attempted = len(receiver.received)  # what was in flight together when the first 410 came back
        assert 1 <= attempted <= 5
        # parked, not dead-lettered (polled: the closed worker's unacked ones come back a moment after its close)
        assert await settled_count(config, work_queue, 5) == 5

        # When a new worker starts (a worker restart), then it reads the state and takes nothing
        async with Worker(config) as worker:
            runner = worker.runners["gone"]
            assert runner.paused_reason is not None and runner.paused_reason.startswith("disabled")
            # When RabbitMQ's application restarts under it
            await rabbitmqctl("stop_app")
            await rabbitmqctl("start_app")
            await rabbitmqctl("await_startup", "--timeout", "60")
            health = worker.health
            assert health is not None
            await wait_until(lambda: health.connected, 30, "health reconnected")
            # Then the state is still there, and still nothing was attempted
            assert health.guards["gone"].view.admin_state == DISABLED
            assert runner.consuming() == [] and len(receiver.received) == attempted
            assert await settled_count(config, work_queue, 5) == 5

            # When the endpoint works again and an operator enables it (the real CLI)
            receiver.behaviour = always(200)
            async with operator_inbox(config) as operator_after:  # the first inbox went with the restart
                path = str(write_config(tmp_path, config))
                code, out = await warren("endpoint", "enable", "gone", "--config", path)
                assert code == 0, out
                # Then the running worker resumes and delivers every parked event, and the operator is told
                await receiver.wait_for(lambda r: r.ok_ids() == {e.id for e in events}, 30)
                await operator_after.wait_for("endpoint.enabled", "gone")
    assert await dlq_count(config, "gone") == 0


async def _down_endpoint(
    endpoint_config: Any, receiver: Receiver, *, disable_after: str, cooldown: str = "200ms"
) -> WarrenConfig:
    """An endpoint "flaky" answering 503, its circuit opening after 2 failures, then probed every ``cooldown``."""
    receiver.behaviour = always(503)
    circuit = {"consecutive_failures": 2, "cooldown": cooldown, "cooldown_factor": 1.0, "disable_after": disable_after}
    config: WarrenConfig = await endpoint_config(
        [{"name": "flaky", "circuit": circuit}], retry={"base": "20ms", "cap": "50ms"}
    )
    return config


async def test_open_longer_than_disable_after_disables_and_enable_probes_first(
    endpoint_config, receiver: Receiver, publish
) -> None:
    # Given an endpoint that is down, a short cool-down, and disable_after of 1 s
    config = await _down_endpoint(endpoint_config, receiver, disable_after="1s")
    async with operator_inbox(config) as operator, Worker(config) as worker:
        await publish(config, [Event(type="x.y", data={"i": i}) for i in range(10)])
        opened = await operator.wait_for("endpoint.circuit_opened", "flaky")
        # When it stays open past disable_after, then the probe holder disables it instead of probing
        disabled = await operator.wait_for("endpoint.disabled", "flaky", timeout=5)
        assert "disable_after" in disabled["data"]["reason"]
        guard = worker.health.guards["flaky"]  # type: ignore[union-attr]
        assert guard.view.admin_state == DISABLED
        assert opened["data"]["state"] == "open"
        requests_when_disabled = len(receiver.received)
        # Then no probe goes to a disabled endpoint: watched until past the moment the circuit's own schedule
        # makes one due (its retry_at) by two more cool-downs, which covers every look the health loop takes
        circuit = guard.view.circuit
        assert circuit is not None and circuit.retry_at is not None
        due = max(circuit.retry_at, time.time()) + 2 * 0.2
        await wait_until(lambda: time.time() >= due or len(receiver.received) > requests_when_disabled, 5)
        assert len(receiver.received) == requests_when_disabled
        # When it is back and enabled, then a probe goes first, succeeds, and everything is delivered
        receiver.behaviour = always(200)
        async with open_connection(config) as connection:
            await change_admin(connection, config, "flaky", "enable")
        await operator.wait_for("endpoint.circuit_closed", "flaky")
        await receiver.wait_for(lambda r: len(r.ok_ids()) >= 10, 15)
    assert await dlq_count(config, "flaky") == 0


async def test_an_endpoint_disabled_while_open_gets_no_probe_past_its_due_time(
    endpoint_config, receiver: Receiver, publish
) -> None:
    # Given an endpoint whose circuit opened (cool-down 1 s, disable_after far away), and an operator who
    # disables it at once (well before the first probe is due, even on a loaded machine)
    config = await _down_endpoint(endpoint_config, receiver, disable_after="1h", cooldown="1s")
    async with operator_inbox(config) as operator, Worker(config) as worker:
        await publish(config, [Event(type="x.y", data={"i": i}) for i in range(10)])
        await operator.wait_for("endpoint.circuit_opened", "flaky")
        async with open_connection(config) as connection:
            await change_admin(connection, config, "flaky", "disable", "maintenance")
        guard = worker.health.guards["flaky"]  # type: ignore[union-attr]
        await wait_until(lambda: guard.view.admin_state == DISABLED, 5, "the disable heard")
        requests_when_disabled = len(receiver.received)
        opened = guard.view.circuit
        assert opened is not None and opened.state == OPEN and opened.retry_at is not None, "disabled too late"
        # When the circuit's own schedule makes a probe due (retry_at), and the health loop looks a few more times
        due = max(opened.retry_at, time.time()) + 0.4
        await wait_until(lambda: time.time() >= due or guard.view.circuit is not opened, 5, "the probe's due time")
        await operator.barrier()
        # Then no probe started: the circuit record is the one that opened it (no half-open written for the
        # fleet), this worker holds no probe, nothing reached the endpoint, and the operator heard only the disable
        assert guard.view.circuit is opened and not guard.probing
        assert len(receiver.received) == requests_when_disabled
        assert operator.types("flaky") == ["endpoint.circuit_opened", "endpoint.disabled"]
