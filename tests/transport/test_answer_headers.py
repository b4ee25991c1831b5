"""What an endpoint answered stands, whatever else its answer holds: a Retry-After that is not RFC 9110's, a body
that cannot be read. Real RabbitMQ and a real receiver for the worker; raw HTTP servers on 127.0.0.1 for
answers aiohttp's own server will not write."""

from __future__ import annotations

import pytest

from tests.support.health import settled_count, wait_until
from tests.support.raw_http import RawServer
from tests.support.receiver import Receiver, always
from warren.broker.events import Event
from warren.consumers.hooks import AttemptRecord, DeliveryHooks
from warren.consumers.worker import Worker
from warren.topology import names
from warren.transport.base import Outcome
from warren.transport.http import HttpTransport, new_session

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(
    ("status", "outcome", "work_queue", "dlq"),
    [(200, "delivered", 0, 0), (400, "dead", 0, 1), (410, "disabled", 1, 0)],
)
@pytest.mark.parametrize("retry_after", ["\u00b2", "Wed, 21 Oct 99999999999 07:28:00 GMT"])
async def test_a_retry_after_that_is_not_rfc_9110_leaves_the_status_its_meaning(
    endpoint_config, receiver: Receiver, publish, status: int, outcome: str, work_queue: int, dlq: int, retry_after: str
) -> None:
    # Given an endpoint answering with a Retry-After that is no delay-seconds (SUPERSCRIPT TWO, which isdigit()
    # takes and float() refuses) nor an HTTP-date (a year email.utils overflows on)
    receiver.behaviour = always(status, headers={"Retry-After": retry_after})
    config = await endpoint_config([{"name": "ep"}], retry={"base": "20ms", "cap": "50ms", "max_attempts": 4})
    records: list[AttemptRecord] = []
    # When one event is delivered to it
    async with Worker(config, hooks=DeliveryHooks(observers=[records.append])):
        await publish(config, [Event(type="x.y", data={})])
        await wait_until(lambda: bool(records), 15, "the first attempt")
        # Then its one attempt means what the status says, with no wait asked for: a 200 is delivered (it was
        # POSTed 4 times and dead-lettered as exhausted), a 400 dead-lettered, a 410 disables the endpoint
        assert (records[0].outcome, records[0].status, records[0].retry_after) == (outcome, status, None)
        prefix = config.broker.prefix
        assert await settled_count(config, names.dlq(prefix, "ep"), dlq) == dlq
    # And the message is settled where that outcome puts it (acked; in the DLQ; parked), so it was sent once
    assert await settled_count(config, names.work_queue(prefix, "ep"), work_queue) == work_queue
    assert len(receiver.received) == 1


# The head, then the connection closes before any of the body (with a Retry-After of SUPERSCRIPT TWO, in UTF-8)
CUT_SHORT = b"HTTP/1.1 %d X\r\nContent-Length: 1000\r\nRetry-After: \xc2\xb2\r\n\r\n"
CHUNKED_CUT_SHORT = b"HTTP/1.1 %d X\r\nTransfer-Encoding: chunked\r\n\r\n"
NEVER_SENT = b"HTTP/1.1 %d X\r\nContent-Length: 10\r\n\r\n"  # held open: the body never comes


@pytest.mark.parametrize(("status", "outcome"), [(200, Outcome.DELIVERED), (404, Outcome.DEAD)])
@pytest.mark.parametrize(
    ("answer", "hold"),
    [
        pytest.param(CUT_SHORT, False, id="cut-short"),
        pytest.param(CHUNKED_CUT_SHORT, False, id="chunked-cut-short"),
        pytest.param(NEVER_SENT, True, id="body-times-out"),
    ],
)
async def test_a_status_stands_when_its_body_cannot_be_read(
    status: int, outcome: Outcome, answer: bytes, hold: bool
) -> None:
    session = new_session(True, "test")
    transport = HttpTransport(session, allow_private_networks=True, body_limit=4096)
    try:
        async with RawServer(answer % status, hold=hold) as server:
            result = await transport.post(
                f"http://127.0.0.1:{server.port}/hook", b"{}", {}, timeout=0.5, connect_timeout=0.5
            )
    finally:
        await session.close()
    assert (result.outcome, result.status, result.error, result.retry_after) == (outcome, status, None, None)
    assert result.excerpt.startswith("[the body could not be read: "), result.excerpt
    assert server.requests == 1
