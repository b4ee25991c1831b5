"""One whole delivery through the worker's own code, without the broker or the network, in CPU µs (issue 38,
part 3): the runner's ``_on_message`` for a message as aio-pika hands it over, through the health gate, the HTTP
transport's headers and signature, a canned 200 answer in place of aiohttp's request, the decision, the attempt's
JSON log line (Warren's own logging configuration, written to /dev/null), the metrics and the batched ack. What
is left out (aiohttp's request, aio-pika's frames) the bare loop does too, so this is the part of the worker's CPU
per delivery that is Warren's own. bench/per_delivery_micro.py measures it beside its pieces.

    .venv/bin/python bench/per_delivery_micro.py --compare /tmp/warren-main --rounds 7
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any

from multidict import CIMultiDict, CIMultiDictProxy

DEVNULL = open(os.devnull, "w")  # noqa: SIM115  # the attempt lines' stream, for the process's life
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


class Channel:
    """What the ack batcher uses of aiormq's channel."""

    is_closed = False

    async def basic_ack(self, tag: int, multiple: bool = False, wait: bool = True) -> None:
        pass


class Message:
    """What the worker uses of aio-pika's ``IncomingMessage`` on the happy path."""

    redelivered = False
    consumer_tag = "bench-tag"
    routing_key = "bench"

    def __init__(self, channel: Channel, tag: int, body: bytes, event_id: str, published: int) -> None:
        self.channel = channel
        self.delivery_tag = tag
        self.body = body
        self.message_id = event_id
        self.headers = {"warren-published": published, "warren-key": f"k{tag % 64}"}

    async def ack(self, multiple: bool = False) -> None:
        pass


class Content:
    async def read(self, n: int = -1) -> bytes:
        return b"ok"


class Response:
    status = 200

    def __init__(self) -> None:
        self.headers = CIMultiDictProxy(CIMultiDict({"Content-Type": "text/plain", "Content-Length": "2"}))
        self.content = Content()

    async def __aenter__(self) -> Response:
        return self

    async def __aexit__(self, *exc: object) -> None:
        pass


class Session:
    """aiohttp's ``ClientSession.post`` answering 200 at once (the request itself is the bare loop's cost too)."""

    def post(self, url: str, **kwargs: Any) -> Response:
        return Response()


def deliveries(count: int) -> list[tuple[bytes, str]]:
    import orjson

    out = []
    for i in range(count):
        event_id = f"evt_{i:08d}"
        body = {
            "id": event_id,
            "type": "bench.t0",
            "timestamp": "2026-12-06T10:00:00Z",
            "data": {"n": i, "pad": "x" * 300},
        }
        out.append((orjson.dumps(body), event_id))
    return out


def settings(endpoints: list[dict[str, Any]], lanes: dict[str, Any]) -> Any:
    """The configuration of an in-process run (``endpoints``, ``lanes``), Warren's JSON attempt lines sent to
    /dev/null."""
    from warren.consumers.attempt_log import configure_logging
    from warren.topology.config import WarrenConfig

    configure_logging("json")
    for handler in logging.getLogger().handlers:
        handler.stream = DEVNULL  # type: ignore[attr-defined]  # Warren's LineHandler
    return WarrenConfig(
        broker={"url": "amqp://guest:guest@127.0.0.1:5672/", "prefix": "bench"},
        retry={"base": "50ms", "cap": "500ms", "max_attempts": 10},
        delivery={"allow_private_networks": True},
        worker={"log_format": "json"},
        endpoints=endpoints,
        lanes=lanes,
    )


async def run(count: int, rounds: int, ordered: bool = False) -> float:
    """CPU µs per delivery, the best of ``rounds`` runs of ``count`` deliveries. ``ordered``: to an ordered endpoint
    (``ordering = "key"``), each message through its partition's key lanes (key_lanes.py) as the channel hands it."""
    from warren.consumers.endpoint_runner import EndpointRunner
    from warren.consumers.health.control import HealthControl
    from warren.consumers.hooks import DeliveryHooks
    from warren.consumers.key_lanes import PartitionLanes
    from warren.consumers.metrics import WorkerMetrics
    from warren.transport.http import HttpTransport

    config = settings(
        [{"name": "bench", "url": "http://127.0.0.1:9/hook/bench", "secret": SECRET, "events": ["#"],
          "concurrency": 512, "timeout": "10s",
          **({"ordering": "key", "partitions": 4, "partition_prefetch": 128} if ordered else {})}],
        {"count": 0},
    )  # fmt: skip
    endpoint = config.endpoints[0]
    hooks = DeliveryHooks()
    WorkerMetrics([endpoint.name]).install(hooks)
    transport = HttpTransport(Session(), allow_private_networks=True, body_limit=config.delivery.response_body_limit)  # type: ignore[arg-type]
    runner = EndpointRunner(
        endpoint, config.retry, config.delivery, queues=["bench.q"], prefix="bench", delay_levels=8,
        transport=transport, hooks=hooks,
    )  # fmt: skip
    health = HealthControl(config, {endpoint.name: runner}, hooks, worker="bench")
    # What HealthControl.start hooks in, without its connection.
    hooks.gates.append(health)
    hooks.park_failures.append(health._parks)
    hooks.observers.append(health._observe)
    runner._accepting = True
    runner._consumer_tags["bench.q"] = Message.consumer_tag
    handle = runner._on_message
    if ordered:  # what EndpointConsumers._consume_partition sets up, without its channel
        runner._tag_queue[Message.consumer_tag] = "bench.q"

        async def returned() -> None:
            pass

        lanes = runner._lanes["bench.q"] = PartitionLanes(
            runner._on_message, returned, unstarted=runner._unstarted, prefetch=128
        )
        handle = lanes.dispatch
    channel = Channel()
    bodies = deliveries(count)
    published = int(time.time() * 1000)
    best = float("inf")
    tag = 0
    for _ in range(rounds):
        messages = []
        for body, event_id in bodies:
            tag += 1
            messages.append(Message(channel, tag, body, event_id, published))
        started = time.process_time()
        for i, message in enumerate(messages):
            await handle(message)  # type: ignore[arg-type]
            if i % 64 == 63:
                await asyncio.sleep(0)  # a turn of the loop: the acks' and the log lines' writes
        await asyncio.sleep(0.01)
        best = min(best, (time.process_time() - started) / count * 1e6)
    return best
