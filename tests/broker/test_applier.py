"""``apply_setup`` against a real RabbitMQ: exactly the plan, idempotent, all or nothing, and pruning."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import aio_pika
import pytest

from tests.support.setup_helpers import prefix_state
from warren.broker.applier import SetupFailed, apply_setup, check_plugins
from warren.broker.management import ManagementClient
from warren.core.errors import TopologyError
from warren.topology import names
from warren.topology.config import WarrenConfig
from warren.topology.planner import plan_topology

ENDPOINTS = [
    {"name": "acme", "url": "http://127.0.0.1:9/acme", "events": ["message.*"]},
    {"name": "audit", "url": "http://127.0.0.1:9/audit", "events": ["#"]},
    {
        "name": "billing",
        "url": "http://127.0.0.1:9/billing",
        "events": ["order.paid", "order.refunded"],
        "ordering": "key",
        "partitions": 3,
    },
]


async def test_setup_declares_exactly_the_plan(
    make_config: Callable[..., WarrenConfig], management: ManagementClient, prefix: str
) -> None:
    # Given a configuration of two unordered endpoints and an ordered one
    config = make_config(ENDPOINTS)
    plan = plan_topology(config)
    # When setup runs on an empty vhost
    report = await apply_setup(config)
    # Then it created every planned object and found nothing
    assert report.applied and report.ok
    assert len(report.to_create) == len(plan.exchanges) + len(plan.queues) + len(plan.bindings)
    assert not report.leftovers and not report.warnings
    # And the broker holds each queue with exactly its planned arguments (asked by name: lists can lag)
    for queue in plan.queues:
        record = await management.queue(queue.name)
        assert record is not None, queue.name
        assert record["arguments"] == dict(queue.arguments), queue.name
        assert record["durable"] is True and record["type"] == queue.arguments["x-queue-type"]  # quorum; state: stream
    # And each exchange with its type and arguments, each binding, and nothing else under the prefix
    state = await prefix_state(management, prefix)
    assert set(state.exchanges) == {e.name for e in plan.exchanges}
    for exchange in plan.exchanges:
        record = state.exchanges[exchange.name]
        assert (record["type"], record["arguments"], record["durable"]) == (
            exchange.type,
            dict(exchange.arguments),
            True,
        )
    assert set(state.queues) == {q.name for q in plan.queues}
    assert state.bindings == {(b.source, b.destination, b.destination_type, b.routing_key) for b in plan.bindings}


async def test_a_second_setup_changes_nothing(make_config: Callable[..., WarrenConfig]) -> None:
    config = make_config(ENDPOINTS)
    first = await apply_setup(config)
    second = await apply_setup(config)
    assert not first.no_change
    assert second.no_change and second.applied
    assert {o.status for o in second.objects} == {"same"}


async def test_drift_is_reported_and_nothing_is_declared(
    make_config: Callable[..., WarrenConfig], management: ManagementClient, amqp_url: str, prefix: str
) -> None:
    # Given a planned queue that already exists as a classic queue with a TTL
    config = make_config(ENDPOINTS)
    work = names.work_queue(prefix, "acme")
    connection = await aio_pika.connect(amqp_url)
    async with connection:
        channel = await connection.channel()
        await channel.declare_queue(work, durable=True, arguments={"x-queue-type": "classic", "x-message-ttl": 5000})
    # When setup runs
    with pytest.raises(SetupFailed) as caught:
        await apply_setup(config)
    # Then it names the queue and every differing argument with both values, and how to migrate
    report = caught.value.report
    assert [(o.kind, o.name) for o in report.drift] == [("queue", work)]
    described = {d.describe() for d in report.drift[0].differences}
    assert described == {
        "x-message-ttl is 5000 on the broker, absent in the plan",
        "x-queue-type is 'classic' on the broker, 'quorum' in the plan",
        # (and the arguments a policy could give, had the rest matched)
        "x-delivery-limit is absent on the broker, 2147483647 in the plan",
        f"x-dead-letter-exchange is absent on the broker, '{prefix}.dead' in the plan",
        "x-dead-letter-routing-key is absent on the broker, 'acme' in the plan",
        "x-dead-letter-strategy is absent on the broker, 'at-least-once' in the plan",
        "x-overflow is absent on the broker, 'reject-publish' in the plan",
    }
    message = str(caught.value)
    assert work in message and "x-message-ttl is 5000" in message and "delete it and re-run" in message
    # And nothing else was declared: no half topology
    assert not report.applied
    state = await prefix_state(management, prefix)
    assert set(state.queues) == {work} and not state.exchanges and not state.bindings


async def test_dry_run_changes_nothing(
    make_config: Callable[..., WarrenConfig], management: ManagementClient, prefix: str
) -> None:
    config = make_config(ENDPOINTS)
    report = await apply_setup(config, dry_run=True)
    assert report.dry_run and not report.applied
    assert report.to_create and not report.drift
    state = await prefix_state(management, prefix)
    assert not state.exchanges and not state.queues and not state.bindings


async def test_the_local_broker_has_the_consistent_hash_exchange(
    make_config: Callable[..., WarrenConfig], management: ManagementClient
) -> None:
    plan = plan_topology(make_config(ENDPOINTS))
    assert await check_plugins(management, plan) == []


async def test_a_missing_plugin_stops_setup_before_anything_is_declared(
    make_config: Callable[..., WarrenConfig],
    management: ManagementClient,
    prefix: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a broker without the consistent-hash exchange type. This broker has the plugin, and disabling it
    # would break every other run sharing it, so only the answer to "which exchange types?" is replaced.
    async def without_plugin(self: ManagementClient) -> set[str]:
        return {"direct", "fanout", "headers", "topic"}

    monkeypatch.setattr(ManagementClient, "exchange_types", without_plugin)
    # When setup runs for a plan with an ordered endpoint
    with pytest.raises(SetupFailed) as caught:
        await apply_setup(make_config(ENDPOINTS))
    # Then the message names the plugin and the command, and nothing was declared
    assert "rabbitmq-plugins enable rabbitmq_consistent_hash_exchange" in str(caught.value)
    assert names.endpoint_exchange(prefix, "billing") in str(caught.value)
    monkeypatch.undo()
    state = await prefix_state(management, prefix)
    assert not state.exchanges and not state.queues


async def test_a_missing_vhost_is_one_clear_error(make_config: Callable[..., WarrenConfig], amqp_url: str) -> None:
    config = make_config(ENDPOINTS, broker={"url": amqp_url.rsplit("/", 1)[0] + "/no-such-vhost-xyz"})
    with pytest.raises(TopologyError, match="vhost 'no-such-vhost-xyz' does not exist"):
        await apply_setup(config)


async def _publish(amqp_url: str, exchange: str, routing_key: str, count: int) -> None:
    connection = await aio_pika.connect(amqp_url)
    async with connection:
        channel = await connection.channel(publisher_confirms=True)
        target = await channel.get_exchange(exchange, ensure=False)
        for _ in range(count):
            await target.publish(aio_pika.Message(b"{}"), routing_key=routing_key, mandatory=True)


def _actions(report: Any) -> dict[str, str]:
    return {x.leftover.name: x.action for x in report.leftovers}


async def test_removed_endpoint_is_reported_then_pruned_when_empty(
    make_config: Callable[..., WarrenConfig], management: ManagementClient, amqp_url: str, prefix: str
) -> None:
    # Given a deployed endpoint "gone" whose dead-letter queue holds two messages
    kept = {"name": "acme", "url": "http://127.0.0.1:9/acme", "events": ["message.*"]}
    gone = {"name": "gone", "url": "http://127.0.0.1:9/gone", "events": ["gone.*"]}
    await apply_setup(make_config([kept, gone]))
    await _publish(amqp_url, names.dead_exchange(prefix), "gone", 2)
    gone_objects = {
        names.endpoint_exchange(prefix, "gone"),
        names.work_queue(prefix, "gone"),
        names.dlq(prefix, "gone"),
    }
    # When the endpoint leaves the configuration, setup reports its objects and deletes none of them
    config = make_config([kept])
    report = await apply_setup(config)
    assert _actions(report) == dict.fromkeys(gone_objects, "reported")
    assert all(x.leftover.endpoint == "gone" for x in report.leftovers)
    assert await management.queue(names.work_queue(prefix, "gone")) is not None
    assert any(names.endpoint_exchange(prefix, "gone") in w for w in report.warnings), "still fed by events"
    # When setup runs with prune: the exchange and the empty queue go, the DLQ with messages stays
    dry = await apply_setup(config, prune_leftovers=True, dry_run=True)
    assert _actions(dry)[names.work_queue(prefix, "gone")] == "would delete"
    pruned = await apply_setup(config, prune_leftovers=True)
    actions = _actions(pruned)
    assert actions[names.endpoint_exchange(prefix, "gone")] == "deleted"
    assert actions[names.work_queue(prefix, "gone")] == "deleted"
    assert actions[names.dlq(prefix, "gone")] == "kept"
    kept_outcome = next(x for x in pruned.leftovers if x.leftover.name == names.dlq(prefix, "gone"))
    assert kept_outcome.messages == 2 and "--force" in kept_outcome.detail
    state = await prefix_state(management, prefix)
    assert gone_objects & (set(state.queues) | set(state.exchanges)) == {names.dlq(prefix, "gone")}
    # When setup runs with prune and force: the DLQ goes too, and the configured endpoint is untouched
    forced = await apply_setup(config, prune_leftovers=True, force=True)
    assert _actions(forced) == {names.dlq(prefix, "gone"): "deleted"}
    assert await management.queue(names.dlq(prefix, "gone")) is None
    assert (await apply_setup(config)).no_change


async def test_shrinking_partitions_and_delay_levels_leaves_prunable_leftovers(
    make_config: Callable[..., WarrenConfig], management: ManagementClient, prefix: str
) -> None:
    # Given an ordered endpoint with 4 partitions and a 4 s cap (12 delay levels)
    ordered = {"name": "billing", "url": "http://127.0.0.1:9/b", "events": ["order.*"], "ordering": "key"}
    await apply_setup(make_config([{**ordered, "partitions": 4}], retry={"cap": "4s"}))
    # When it shrinks to 2 partitions and a 1 s cap (10 levels)
    config = make_config([{**ordered, "partitions": 2}], retry={"cap": "1s"})
    report = await apply_setup(config)
    # Then the two partitions and two delay levels are reported, with a warning about moving keys
    partitions = {names.partition_queue(prefix, "billing", i) for i in (2, 3)}
    levels = {names.delay_queue(prefix, k) for k in (10, 11)} | {names.delay_exchange(prefix, k) for k in (10, 11)}
    assert set(_actions(report)) == partitions | levels
    assert any("ordering keys move" in w for w in report.warnings)
    # And prune removes them all (they are empty), leaving exactly the plan
    await apply_setup(config, prune_leftovers=True)
    plan = plan_topology(config)
    state = await prefix_state(management, prefix)
    assert set(state.queues) == {q.name for q in plan.queues}
    assert set(state.exchanges) == {e.name for e in plan.exchanges}
    assert state.bindings == {(b.source, b.destination, b.destination_type, b.routing_key) for b in plan.bindings}


async def test_lowering_the_lane_count_leaves_prunable_lanes_and_keeps_one_holding_messages(
    make_config: Callable[..., WarrenConfig], management: ManagementClient, amqp_url: str, prefix: str
) -> None:
    # Given 4 lanes, lane 3 holding a message
    endpoint = {"name": "acme", "url": "http://127.0.0.1:9/acme", "events": ["message.*"]}
    await apply_setup(make_config([endpoint], lanes={"count": 4}))
    await _publish(amqp_url, "", names.lane_queue(prefix, 3), 1)
    # When the count goes down to 2: lanes 2 and 3 (and their DLQs) are reported, nothing is deleted
    config = make_config([endpoint], lanes={"count": 2})
    retired = {names.lane_queue(prefix, i) for i in (2, 3)} | {names.lane_dlq(prefix, i) for i in (2, 3)}
    report = await apply_setup(config)
    assert _actions(report) == dict.fromkeys(retired, "reported")
    # And prune deletes the empty ones and keeps lane 3, which still holds its message
    actions = _actions(await apply_setup(config, prune_leftovers=True))
    assert actions == {**dict.fromkeys(retired, "deleted"), names.lane_queue(prefix, 3): "kept"}
    state = await prefix_state(management, prefix)
    assert set(state.queues) == {q.name for q in plan_topology(config).queues} | {names.lane_queue(prefix, 3)}
