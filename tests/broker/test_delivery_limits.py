"""Delivery limits on the real broker: what setup declares, how it migrates an older topology, and where a
message that does reach a limit goes (its DLQ, with RabbitMQ's reason), on 3.10 and on 4.x alike."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aio_pika
import pytest

from tests.support.cli import warren
from tests.support.dead_letters import wait_depth
from tests.support.processes import write_config
from warren.broker.applier import apply_setup
from warren.broker.events import Event, encode_event
from warren.broker.management import ManagementClient
from warren.broker.migration import POLICY_KEYS
from warren.topology import names
from warren.topology.config import WarrenConfig
from warren.topology.plan import Plan
from warren.topology.planner import DELIVERY_LIMIT, plan_topology

pytestmark = pytest.mark.timeout(90)

ENDPOINTS = [
    {"name": "acme", "url": "http://127.0.0.1:9/acme", "events": ["a.*"]},
    {"name": "bill", "url": "http://127.0.0.1:9/bill", "events": ["b.*"], "ordering": "key", "partitions": 2},
]
BACKSTOP = {"x-dead-letter-exchange", "x-dead-letter-routing-key", "x-dead-letter-strategy", "x-overflow"}


async def _major(api: ManagementClient) -> int:
    return int(str((await api.overview()).get("rabbitmq_version", "0")).split(".")[0])


async def _records(api: ManagementClient, prefix: str) -> dict[str, dict[str, Any]]:
    return {q["name"]: q for q in await api.queues() if q["name"].startswith(prefix + ".")}


async def _reported_limits(api: ManagementClient, queues: list[str], timeout: float = 20) -> dict[str, Any]:
    """RabbitMQ 4.x's own ``delivery_limit`` of each queue, once its stats have arrived for all of them."""
    deadline = time.monotonic() + timeout
    while True:
        found = {name: (await api.queue(name) or {}).get("delivery_limit") for name in queues}
        if all(value is not None for value in found.values()) or time.monotonic() > deadline:
            return found
        await asyncio.sleep(0.5)


def _quorum(plan: Plan) -> list[str]:
    return [q.name for q in plan.queues if q.arguments.get("x-queue-type") == "quorum"]


async def test_setup_gives_every_quorum_queue_the_limit_and_every_consumed_one_the_backstop(
    make_config: Callable[..., WarrenConfig], management: ManagementClient, prefix: str
) -> None:
    # Given a configuration with an unordered and an ordered endpoint, set up on the broker
    config = make_config(ENDPOINTS)
    await apply_setup(config)
    plan = plan_topology(config)
    # When the queues are read back from the management API
    records = await _records(management, prefix)
    # Then every quorum queue holds Warren's limit as an argument ...
    for name in _quorum(plan):
        assert records[name]["arguments"]["x-delivery-limit"] == DELIVERY_LIMIT, name
    # ... the work queue and the partitions dead-letter at least once into their endpoint's DLQ ...
    for name in [names.work_queue(prefix, "acme"), *(names.partition_queue(prefix, "bill", i) for i in range(2))]:
        arguments = records[name]["arguments"]
        assert arguments["x-dead-letter-exchange"] == names.dead_exchange(prefix)
        assert arguments["x-dead-letter-routing-key"] in ("acme", "bill")
        assert (arguments["x-dead-letter-strategy"], arguments["x-overflow"]) == ("at-least-once", "reject-publish")
    # ... and on 4.x the broker itself reports that limit, not its default of 20
    if await _major(management) >= 4:
        reported = await _reported_limits(management, _quorum(plan))
        assert set(reported.values()) == {DELIVERY_LIMIT}, reported


async def _declare_as_before(config: WarrenConfig) -> None:
    """The plan's queues as Warren declared them before delivery limits: no limit, no backstop."""
    plan = plan_topology(config)
    connection = await aio_pika.connect(config.broker.url)
    async with connection:
        channel = await connection.channel()
        for queue in plan.queues:
            arguments = dict(queue.arguments)
            arguments.pop("x-delivery-limit", None)
            if "x-message-ttl" not in arguments:  # only the delay levels had a dead-letter route then
                for key in BACKSTOP:
                    arguments.pop(key, None)
            await channel.declare_queue(queue.name, durable=True, arguments=arguments)


async def test_an_older_topology_is_reported_then_migrated_by_policy(
    make_config: Callable[..., WarrenConfig], management: ManagementClient, prefix: str, tmp_path: Path
) -> None:
    # Given the queues of a topology declared before delivery limits existed
    config = make_config(ENDPOINTS)
    await _declare_as_before(config)
    plan = plan_topology(config)
    path = write_config(tmp_path, config)
    # When `warren setup --dry-run` runs
    dry = await warren("setup", "--dry-run", "--config", str(path))
    # Then it exits 0 and names each queue to migrate and what it lacks, and changes nothing
    assert dry.code == 0, dry.err
    work = names.work_queue(prefix, "acme")
    assert f"would migrate queue {work} by policy: it lacks x-dead-letter-exchange" in dry.out
    assert f"would be put policy {prefix}.limits.acme" in dry.out
    assert "delivery-limit=2147483647" in dry.out
    assert not [p for p in await management.policies() if p["name"].startswith(prefix)]
    # When setup runs for real
    done = await warren("setup", "--config", str(path))
    # Then it migrates every quorum queue in place, and a second run finds nothing to do
    assert done.code == 0, done.err
    assert f"{len(_quorum(plan))} queues migrated by policy" in done.out
    again = await apply_setup(config)
    assert again.no_change, [(o.name, o.status) for o in again.objects if o.status != "same"]
    # And the broker applies the limit and the backstop to the old queues (the policy, read back)
    deadline = time.monotonic() + 20
    while True:
        records = await _records(management, prefix)
        effective = {name: records[name].get("effective_policy_definition") or {} for name in _quorum(plan)}
        if all(e.get("delivery-limit") == DELIVERY_LIMIT for e in effective.values()) or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.5)
    assert {e.get("delivery-limit") for e in effective.values()} == {DELIVERY_LIMIT}
    assert effective[work]["dead-letter-routing-key"] == "acme"
    assert effective[work]["dead-letter-strategy"] == "at-least-once"
    assert "dead-letter-exchange" not in effective[names.dlq(prefix, "acme")]
    if await _major(management) >= 4:  # where the default of 20 applied before
        reported = await _reported_limits(management, _quorum(plan))
        assert set(reported.values()) == {DELIVERY_LIMIT}, reported
    for policy in await management.policies():
        if policy["name"].startswith(prefix + "."):
            await management.delete_policy(policy["name"])


async def _return_until_gone(config: WarrenConfig, queue: str, timeout: float = 20) -> int:
    """Take the queue's message without acking and close the channel (a return), until it is no longer there."""
    connection = await aio_pika.connect(config.broker.url)
    returns = 0
    deadline = time.monotonic() + timeout
    async with connection:
        while time.monotonic() < deadline:
            channel = await connection.channel()
            got: asyncio.Queue[object] = asyncio.Queue()
            consumer = await channel.get_queue(queue, ensure=False)
            await consumer.consume(got.put)
            try:
                await asyncio.wait_for(got.get(), 1.0)
            except TimeoutError:
                return returns
            finally:
                await channel.close()
            returns += 1
    raise AssertionError(f"{queue} still held its message after {returns} returns")


async def test_a_message_past_a_delivery_limit_becomes_a_dead_letter_with_rabbitmqs_reason(
    make_config: Callable[..., WarrenConfig], management: ManagementClient, prefix: str, tmp_path: Path
) -> None:
    # Given a set-up endpoint whose work queue an operator's policy gives a delivery limit of 2 (it wins over
    # Warren's argument: the lower of both applies)
    config = make_config(ENDPOINTS[:1])
    await apply_setup(config)
    work, dlq = names.work_queue(prefix, "acme"), names.dlq(prefix, "acme")
    policy = f"{prefix}-ops-limit"
    body = {"pattern": f"^{work.replace('.', '[.]')}$", "definition": {"delivery-limit": 2}, "priority": 100}
    await management.put_policy(policy, {**body, "apply-to": "queues"})
    try:
        deadline = time.monotonic() + 20
        while ((await management.queue(work)) or {}).get("effective_policy_definition") != body["definition"]:
            assert time.monotonic() < deadline, "the policy never applied"
            await asyncio.sleep(0.3)
        # When an event in it is returned to the queue until the queue lets it go
        event = Event(type="a.b", data={"n": 1})
        connection = await aio_pika.connect(config.broker.url)
        async with connection:
            channel = await connection.channel(publisher_confirms=True)
            await channel.default_exchange.publish(encode_event(event), routing_key=work)
        returns = await _return_until_gone(config, work)
    finally:
        await management.delete_policy(policy)
    # Then it is not dropped: it is in the endpoint's DLQ ...
    assert returns >= 2
    assert await wait_depth(config, dlq, 1) == 1
    # ... and `warren dlq list` gives RabbitMQ's reason for it, though it has none of Warren's headers
    listed = await warren("dlq", "list", "acme", "--json", "--config", str(write_config(tmp_path, config)))
    assert listed.code == 0, listed.err
    (letter,) = json.loads(listed.out)
    assert letter["event_id"] == event.id
    assert letter["dead_reason"] == f"delivery_limit in {work} (dead-lettered by RabbitMQ)"
    assert letter["dead_at"] is not None


def test_the_policy_keys_cover_every_argument_the_limit_and_backstop_add() -> None:
    # The migration can only give what has a policy equivalent: every argument added since must have one
    endpoint = {**ENDPOINTS[0], "secret": "whsec_" + "A" * 32}
    plan = plan_topology(WarrenConfig(endpoints=[endpoint], delivery={"allow_private_networks": True}))
    work = plan.queue(names.work_queue("warren", "acme"))
    assert {"x-delivery-limit", *BACKSTOP} <= set(work.arguments)
    assert {"x-delivery-limit", *BACKSTOP} <= set(POLICY_KEYS)


async def test_a_dlq_without_warrens_limit_is_read_only_where_no_default_limit_applies(
    make_config: Callable[..., WarrenConfig], management: ManagementClient, prefix: str, tmp_path: Path
) -> None:
    # Given an endpoint's DLQ declared by an earlier release: no x-delivery-limit argument
    config = make_config(ENDPOINTS[:1])
    await _declare_as_before(config)
    path = str(write_config(tmp_path, config))
    # When it is listed
    listed = await warren("dlq", "list", "acme", "--config", path)
    # Then on 4.x (default limit 20, each listing spends one) the command refuses and says to run setup;
    # on 3.10 (no default limit) it reads it
    if await _major(management) >= 4:
        assert listed.code == 1 and "delivery limit of 20" in listed.err and "warren setup" in listed.err
    else:
        assert listed.code == 0 and "0 shown of 0" in listed.out, listed.err
    # And once `warren setup` has migrated it, it is read on both
    assert (await warren("setup", "--config", path)).code == 0
    deadline = time.monotonic() + 20
    while (relisted := await warren("dlq", "list", "acme", "--config", path)).code != 0:
        assert time.monotonic() < deadline, relisted.err  # (4.x reports the new limit within seconds)
        await asyncio.sleep(0.5)
    for policy in await management.policies():
        if policy["name"].startswith(prefix + "."):
            await management.delete_policy(policy["name"])
