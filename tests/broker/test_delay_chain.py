"""The binary delay chain on a real RabbitMQ: every level, and composite delays, hold a message for its delay
and then return it to the endpoint's work queue."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

import aio_pika

from tests.support.setup_helpers import Collector
from warren.broker.applier import apply_setup
from warren.topology import names
from warren.topology.config import WarrenConfig
from warren.topology.delays import delay_routing_key, levels_for_delay
from warren.topology.planner import plan_topology

# The path is checked exactly: each message expired once in each level of its delay's binary digits and in no
# other (RabbitMQ's x-death), so a chain that doubles a delay or skips a level fails whatever the machine's load.
# The time is checked for earliness exactly (RabbitMQ keeps TTLs in whole milliseconds) and for lateness loosely:
# each level is one quorum-queue expiry and one dead-letter hop (about 2 ms each on a quiet machine), but a busy
# one makes each expiry timer and hop wait for a core (a CI run under four xdist workers saw 777 ms arrive 199 ms
# late; two whole suites at once on RabbitMQ 4.0.5, 512 ms arrive 635 ms late).
EARLY = 0.002
LATE_FIXED = 0.5
LATE_SHARE = 1.0
COMPOSITE_MS = (0, 5, 300, 777, 1000, 1023)


async def test_each_level_and_composite_delays_return_to_the_work_queue_in_time(
    make_config: Callable[..., WarrenConfig], amqp_url: str, prefix: str
) -> None:
    # Given the topology of a 1 s cap: 10 levels, 1 ms to 512 ms
    config = make_config([{"name": "acme", "url": "http://127.0.0.1:9/acme", "events": ["message.*"]}])
    plan = plan_topology(config)
    assert plan.delay_levels == 10
    await apply_setup(config)
    work = names.work_queue(prefix, "acme")
    delays_ms = sorted({1 << k for k in range(plan.delay_levels)} | set(COMPOSITE_MS))
    connection = await aio_pika.connect(amqp_url)
    async with connection:
        channel = await connection.channel(publisher_confirms=True)
        top = await channel.get_exchange(names.delay_exchange(prefix, plan.delay_levels - 1), ensure=False)
        sent: dict[str, float] = {}
        consumer = await connection.channel()
        # When one message per delay enters the top of the chain, a consumer waiting on the work queue
        async with Collector(consumer, [work]) as collector:
            for delay in delays_ms:
                key = delay_routing_key(delay / 1000, plan.delay_levels, work)
                sent[str(delay)] = time.monotonic()
                await top.publish(aio_pika.Message(b"{}", message_id=str(delay)), routing_key=key, mandatory=True)
            arrivals = await collector.wait(len(delays_ms), timeout=5.0)
    # Then every message comes back to the work queue, having waited in exactly the levels of its delay, once each
    waited = {a.message.message_id: a.at - sent[a.message.message_id or ""] for a in arrivals}
    assert sorted(waited, key=int) == [str(d) for d in delays_ms], "every message came back"
    for arrival in arrivals:
        delay = int(arrival.message.message_id or "")
        deaths = arrival.message.headers.get("x-death") or []
        expired = Counter({str(d["queue"]): int(d["count"]) for d in deaths if d.get("reason") == "expired"})
        levels = levels_for_delay(delay, plan.delay_levels)
        assert expired == Counter({names.delay_queue(prefix, k): 1 for k in levels}), (delay, deaths)
    # And after its delay, not early, nor later than the machine's load explains
    for delay in delays_ms:
        seconds = delay / 1000
        assert seconds - EARLY <= waited[str(delay)] <= seconds * (1 + LATE_SHARE) + LATE_FIXED, (
            delay,
            waited[str(delay)],
        )
