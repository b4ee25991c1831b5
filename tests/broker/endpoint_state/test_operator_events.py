"""Operator events: the webhook envelope on the operator exchange, routing key = event type."""

from __future__ import annotations

import asyncio

import pytest

from tests.support.health import dlq_count, operator_inbox
from tests.support.receiver import Receiver, always
from warren.broker.events import Event
from warren.consumers.hooks import AttemptRecord, DeliveryHooks
from warren.consumers.worker import Worker

pytestmark = pytest.mark.timeout(30)


async def test_exhaustion_is_announced_in_the_webhook_envelope(endpoint_config, receiver: Receiver, publish) -> None:
    # Given an endpoint that always fails, two attempts allowed, and an operator queue bound with '#'
    receiver.behaviour = always(500)
    config = await endpoint_config(
        [{"name": "broken", "circuit": {"enabled": False}}],
        retry={"base": "20ms", "cap": "50ms", "max_attempts": 2},
    )
    async with operator_inbox(config) as operator:
        async with Worker(config):
            [event_id] = await publish(config, [Event(type="order.paid", data={"n": 1})])
            # When the message exhausts its attempts
            exhausted = await operator.wait_for("message.exhausted", "broken")
        await operator.barrier()  # the stopped worker's events have all arrived
    # Then the operator hears it, in the envelope every webhook has, routed by its type
    assert set(exhausted) == {"id", "type", "timestamp", "data"}
    assert exhausted["id"].startswith("msg_") and exhausted["timestamp"].endswith("Z")
    assert exhausted["data"]["event_id"] == event_id
    assert exhausted["data"]["attempts"] == 2 and exhausted["data"]["last_status"] == 500
    assert operator.routing_keys == ["message.exhausted"]
    assert await dlq_count(config, "broken") == 1


async def test_circuit_events_say_what_why_and_since_when(endpoint_config, receiver: Receiver, publish) -> None:
    receiver.behaviour = always(503)
    circuit = {"consecutive_failures": 2, "cooldown": "10s"}
    config = await endpoint_config([{"name": "down", "circuit": circuit}], retry={"base": "20ms", "cap": "50ms"})
    async with operator_inbox(config) as operator:
        async with Worker(config):
            await publish(config, [Event(type="x.y", data={"i": i}) for i in range(5)])
            opened = await operator.wait_for("endpoint.circuit_opened", "down")
        await operator.barrier()  # the stopped worker's events have all arrived
    data = opened["data"]
    assert data["state"] == "open" and data["previous"] == "closed"
    assert data["reason"] == "2 consecutive failures"
    assert data["since"] == data["opened_at"] and data["failed_probes"] == 0
    assert data["next_probe_at"] > data["since"]
    assert operator.routing_keys == ["endpoint.circuit_opened"]  # one worker, one transition, one event


async def test_events_queued_when_the_worker_stops_are_all_published(
    endpoint_config, receiver: Receiver, publish
) -> None:
    # Given 200 events that all fail at once on their only attempt, and a worker stopped the moment the last
    # one is exhausted (its operator events are still being published one confirm at a time)
    receiver.behaviour = always(500)
    config = await endpoint_config(
        [{"name": "broken", "concurrency": 200, "circuit": {"enabled": False}}], retry={"max_attempts": 1}
    )
    exhausted: list[str] = []
    all_exhausted = asyncio.Event()

    def observe(record: AttemptRecord) -> None:
        if record.outcome == "exhausted":
            exhausted.append(record.event_id)
            if len(exhausted) == 200:
                all_exhausted.set()

    async with operator_inbox(config) as operator:
        ids = await publish(config, [Event(type="x.y", data={"i": i}) for i in range(200)])
        async with Worker(config, hooks=DeliveryHooks(observers=[observe])):
            await asyncio.wait_for(all_exhausted.wait(), 20)
        await operator.barrier()  # everything the stopped worker published has arrived
    # Then the stop waited for every queued event: one message.exhausted per event, none lost, none twice
    assert sorted(e["data"]["event_id"] for e in operator.events) == sorted(ids)
    assert operator.routing_keys == ["message.exhausted"] * 200
