"""`warren setup` as a user runs it: a subprocess against the real RabbitMQ, judged by exit code and output."""

from __future__ import annotations

from pathlib import Path

import aio_pika

from tests.conftest import TEST_SECRET
from tests.support.cli import warren
from tests.support.rabbit import RabbitServer
from tests.support.setup_helpers import prefix_state
from warren.broker.management import ManagementClient
from warren.topology import names
from warren.topology.config import load_config
from warren.topology.planner import plan_topology


def write_config(path: Path, amqp_url: str, management_url: str, prefix: str, *, with_billing: bool = True) -> Path:
    text = f"""
[broker]
url = "{amqp_url}"
management_url = "{management_url}"
prefix = "{prefix}"

[retry]
base = "100ms"
cap = "1s"

[delivery]
allow_private_networks = true

[[endpoints]]
name = "acme"
url = "http://127.0.0.1:9/acme"
secret = "{TEST_SECRET}"
events = ["message.*"]
"""
    if with_billing:
        text += f"""
[[endpoints]]
name = "billing"
url = "http://127.0.0.1:9/billing"
secret = "{TEST_SECRET}"
events = ["order.paid"]
ordering = "key"
partitions = 2
"""
    path.write_text(text)
    return path


async def test_dry_run_then_setup_then_no_change(
    tmp_path: Path, amqp_url: str, rabbit_server: RabbitServer, prefix: str, management: ManagementClient
) -> None:
    config = str(write_config(tmp_path / "warren.toml", amqp_url, rabbit_server.management_url, prefix))
    # A dry run lists what it would create, exits 0 and changes nothing
    dry = await warren("setup", "--config", config, "--dry-run")
    assert dry.code == 0, dry.err
    assert "dry run, nothing changed" in dry.out and f"would create queue {names.work_queue(prefix, 'acme')}" in dry.out
    assert "[order.paid]" in dry.out, "binding keys are printed, not eaten as markup"
    state = await prefix_state(management, prefix)
    assert not state.queues and not state.exchanges
    # The first run creates everything
    first = await warren("setup", "--config", config)
    assert first.code == 0, first.err
    assert "objects created, 0 already present" in first.out
    assert await management.queue(names.partition_queue(prefix, "billing", 1)) is not None
    # The second run says so when nothing changes
    second = await warren("setup", "--config", config)
    assert second.code == 0, second.err
    planned = plan_topology(load_config(config))
    total = len(planned.exchanges) + len(planned.queues) + len(planned.bindings)
    assert f"No change: all {total} planned objects already match the plan." in second.out
    assert not [line for line in second.out.splitlines() if line.lstrip().startswith("created ")]


async def test_drift_exits_1_with_every_difference_and_no_traceback(
    tmp_path: Path, amqp_url: str, rabbit_server: RabbitServer, prefix: str
) -> None:
    # Given the ordered endpoint's first partition declared as a classic queue
    config = str(write_config(tmp_path / "warren.toml", amqp_url, rabbit_server.management_url, prefix))
    partition = names.partition_queue(prefix, "billing", 0)
    connection = await aio_pika.connect(amqp_url)
    async with connection:
        channel = await connection.channel()
        await channel.declare_queue(partition, durable=True)
    # When setup runs
    run = await warren("setup", "--config", config)
    # Then it fails with one message naming the queue, each argument, and the way out
    assert run.code == 1
    assert "Traceback" not in run.err + run.out
    assert "error: setup stopped before declaring anything" in run.err
    assert f"queue '{partition}' differs from the plan" in run.err
    assert "x-queue-type is 'classic' on the broker, 'quorum' in the plan" in run.err
    assert "x-single-active-consumer is absent on the broker, true in the plan" in run.err
    assert "how to migrate" in run.err


async def test_removed_endpoint_is_reported_and_pruned(
    tmp_path: Path, amqp_url: str, rabbit_server: RabbitServer, prefix: str, management: ManagementClient
) -> None:
    both = str(write_config(tmp_path / "both.toml", amqp_url, rabbit_server.management_url, prefix))
    assert (await warren("setup", "--config", both)).code == 0
    one = str(write_config(tmp_path / "one.toml", amqp_url, rabbit_server.management_url, prefix, with_billing=False))
    reported = await warren("setup", "--config", one)
    assert reported.code == 0, reported.err
    assert "endpoint 'billing' is no longer configured" in reported.out and "--prune" in reported.out
    assert await management.queue(names.dlq(prefix, "billing")) is not None
    pruned = await warren("setup", "--config", one, "--prune")
    assert pruned.code == 0, pruned.err
    assert f"deleted queue {names.dlq(prefix, 'billing')}" in pruned.out
    assert await management.queue(names.dlq(prefix, "billing")) is None


async def test_usage_and_config_errors_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[broker]\nqueue_type = "stream"\n')
    run = await warren("setup", "--config", str(bad))
    assert run.code == 2 and "broker.queue_type" in run.err and "Traceback" not in run.err
    missing = await warren("setup", "--config", str(tmp_path / "absent.toml"))
    assert missing.code == 2 and "file not found" in missing.err
    good = write_config(tmp_path / "ok.toml", "amqp://guest:guest@127.0.0.1:5672/%2F", "http://127.0.0.1:15672", "x")
    forced = await warren("setup", "--config", str(good), "--force")
    assert forced.code == 2 and "--force only applies with --prune" in forced.err


async def test_broker_down_exits_1_with_one_line(tmp_path: Path) -> None:
    # Port 9 on 127.0.0.1 (discard) has no listener here: connection refused at once
    config = write_config(tmp_path / "down.toml", "amqp://guest:guest@127.0.0.1:9/%2F", "http://127.0.0.1:9", "x")
    run = await warren("setup", "--config", str(config))
    assert run.code == 1
    assert "Traceback" not in run.err
    assert run.err.startswith("error: management API at http://127.0.0.1:9 unreachable")


async def test_a_dry_run_that_cannot_reach_amqp_exits_1(tmp_path: Path, rabbit_server: RabbitServer) -> None:
    # Given a reachable management API but nobody listening on the AMQP URL (port 1)
    config = write_config(
        tmp_path / "noamqp.toml", "amqp://guest:guest@127.0.0.1:1/%2F", rabbit_server.management_url, "x"
    )
    # When a dry run is asked to gate a deploy
    run = await warren("setup", "--config", str(config), "--dry-run")
    # Then it does not pass: exit 1, one line saying the dry run could not be completed and why
    assert run.code == 1, run.out
    assert "Traceback" not in run.err
    assert run.err.startswith("error: dry run could not be completed: cannot connect to RabbitMQ at amqp://"), run.err
