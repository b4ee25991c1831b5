"""The transport seam: a runner delivering through a transport of the tests' own, against real RabbitMQ.

Nothing HTTP is involved: the decision, the delay chain, the DLQ and ordering work the same for any sink.
"""

from __future__ import annotations

import pytest

from tests.consumers.test_delivery import dlq_messages
from tests.support.transport import RecordingTransport
from warren.broker import wire
from warren.broker.events import Event
from warren.consumers.worker import Worker
from warren.topology.config import Endpoint
from warren.transport.base import Delivery, Outcome, SendResult

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize(
    "endpoint",
    [
        pytest.param({"name": "ep"}, id="unordered"),  # a retry goes through the delay chain
        pytest.param({"name": "ep", "ordering": "key", "partitions": 2}, id="ordered"),  # a retry is held in place
    ],
)
async def test_a_transport_of_our_own_delivers_retries_and_dead_letters(
    endpoint_config, publish, endpoint: dict[str, object]
) -> None:
    # Given an endpoint and a transport that fails "flaky" once and rejects "bad"
    config = await endpoint_config([endpoint], retry={"base": "20ms", "cap": "50ms", "max_attempts": 3})

    def script(endpoint: Endpoint, delivery: Delivery) -> SendResult:
        if delivery.event_id == "bad":
            return SendResult(Outcome.DEAD, "the sink refused it for good", status=7)
        if delivery.event_id == "flaky" and delivery.attempts_made == 0:
            return SendResult(Outcome.RETRY, "the sink was busy", status=9, retry_after=0.05)
        return SendResult(Outcome.DELIVERED, "stored", status=1)

    transport = RecordingTransport(script)
    events = [Event(type="x.y", data={}, id=i, key="k") for i in ("ok", "flaky", "bad")]
    # When a worker delivers through it
    async with Worker(config, transport=transport):
        await publish(config, events)
        await transport.wait_for(lambda t: len(t.sent) >= 4, 15)
        dead = await dlq_messages(None, config, "ep", 1)
    # Then each event was sent, "flaky" twice (its retry counted, through the delay chain or in place)
    sends = [(s.event_id, s.attempts_made) for s in transport.sent]
    assert sorted(sends) == [("bad", 0), ("flaky", 0), ("flaky", 1), ("ok", 0)], sends
    # And the rejected one is a dead letter with the transport's reason and status
    (letter,) = dead
    assert letter.message_id == "bad"
    assert letter.headers[wire.H_DEAD_REASON] == "the sink refused it for good"
    assert letter.headers[wire.H_LAST_STATUS] == 7
    # And the body the transport got is the envelope the publisher wrote, byte for byte
    assert all(s.body.startswith(b'{"id":') for s in transport.sent)
